/*
 * gpatch.c - pointer patching in a graph captured by other means
 * (kp_rt_gpatch_*, include/kplan/runtime.h): the PyTorch package points a
 * torch.cuda.CUDAGraph at each call's argument instead of copying the
 * argument into the buffer the graph was captured with (PyGraph).
 *
 * The graph's nodes are read with the runtime's backend (kernel parameters
 * and their layouts, memcpy/memset pointers), the same reading the C API's
 * own patching uses (core.c find_sites). A site is an aligned 8-byte word
 * of a kernel parameter whose value lies in [base, base + bytes); setting a
 * new base rewrites each site to new + (value - base) in the node's
 * parameter buffer and updates the node in the exec, once per node.
 */
#include "rt_internal.h"

#include <stdlib.h>
#include <string.h>

struct gsite {
	uint32_t node;            /* index into nodes */
	uint32_t off;             /* byte offset in the node's parameter buffer */
	uint64_t delta;           /* value - base at open */
};

struct kp_rt_gpatch {
	const struct kp__rt_backend *be;
	void *exec;
	struct kp__rt_node *nodes;
	size_t n_nodes;
	struct gsite *sites;      /* in node order */
	size_t n_sites;
	uintptr_t cur;            /* the base the exec's sites point at now */
};

/* The sites of one node into *g (grown as needed). 0, -5. */
static int node_sites(struct kp_rt_gpatch *g, size_t *cap, uint32_t i, uintptr_t base,
		      size_t bytes)
{
	const struct kp__rt_node *nd = &g->nodes[i];

	for (uint32_t j = 0; j < nd->n_params; j++) {
		uint32_t off = nd->param_off[j], end = off + nd->param_size[j];

		if (end > nd->params_len)
			end = (uint32_t)nd->params_len;
		for (uint32_t w = (off + 7) & ~7u; w + 8 <= end; w += 8) {
			uint64_t v;

			memcpy(&v, nd->params + w, 8);
			if (v < base || v - base >= bytes)
				continue;
			if (g->n_sites == *cap) {
				size_t nc = *cap ? *cap * 2 : 16;
				void *p = realloc(g->sites, nc * sizeof(*g->sites));
				if (!p)
					return -5;
				g->sites = p;
				*cap = nc;
			}
			g->sites[g->n_sites].node = i;
			g->sites[g->n_sites].off = w;
			g->sites[g->n_sites].delta = v - base;
			g->n_sites++;
		}
	}
	return 0;
}

/* 1 when a memcpy/memset node's pointer lies in [base, base + bytes) */
static int memop_touches(const struct kp__rt_node *nd, uintptr_t base, size_t bytes)
{
	for (uint32_t j = 0; j < nd->n_params; j++) {
		uint64_t v;

		if (nd->param_off[j] + 8 > nd->params_len)
			continue;
		memcpy(&v, nd->params + nd->param_off[j], 8);
		if (v >= base && v - base < bytes)
			return 1;
	}
	return 0;
}

KP_RT_API int kp_rt_gpatch_open(kp_rt *rt, void *graph, void *exec, const void *ptr,
				size_t bytes, kp_rt_gpatch **out)
{
	const struct kp__rt_backend *be = kp__rt_backend_of(rt);
	uintptr_t base = (uintptr_t)ptr;
	struct kp_rt_gpatch *g;
	size_t cap = 0;
	int rc = 0;

	if (out)
		*out = NULL;
	if (!be || !be->nodes || !be->set_params || !graph || !exec || !ptr || !bytes || !out)
		return -1;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -5;
	g->be = be;
	g->exec = exec;
	g->cur = base;
	if (be->nodes(be->ctx, graph, &g->nodes, &g->n_nodes)) {
		/* the backend fails a node whose layout it cannot read */
		free(g);
		return -3;
	}
	for (size_t i = 0; i < g->n_nodes && !rc; i++) {
		const struct kp__rt_node *nd = &g->nodes[i];

		if (nd->kind == KP__RT_NODE_MEMOP && memop_touches(nd, base, bytes))
			rc = -2;
		else if (nd->kind == KP__RT_NODE_KERNEL)
			rc = node_sites(g, &cap, (uint32_t)i, base, bytes);
	}
	if (rc) {
		kp_rt_gpatch_close(g);
		return rc;
	}
	*out = g;
	return (int)(g->n_sites > 0x7fffffff ? 0x7fffffff : g->n_sites);
}

KP_RT_API int kp_rt_gpatch_set(kp_rt_gpatch *g, const void *new_ptr)
{
	uintptr_t nb = (uintptr_t)new_ptr;

	if (!g || !new_ptr)
		return -1;
	if (nb == g->cur)
		return 0;
	for (size_t i = 0; i < g->n_sites; i++) {
		uint64_t v = nb + g->sites[i].delta;

		memcpy(g->nodes[g->sites[i].node].params + g->sites[i].off, &v, 8);
	}
	/* one update per node with sites (the sites are in node order) */
	for (size_t i = 0; i < g->n_sites; i++) {
		uint32_t nd = g->sites[i].node;

		if (i && nd == g->sites[i - 1].node)
			continue;
		if (g->be->set_params(g->be->ctx, g->exec, &g->nodes[nd])) {
			g->cur = 0;   /* a mix: the next set rewrites every node */
			return -4;
		}
	}
	g->cur = nb;
	return 0;
}

KP_RT_API void kp_rt_gpatch_close(kp_rt_gpatch *g)
{
	if (!g)
		return;
	if (g->nodes)
		g->be->nodes_free(g->be->ctx, g->nodes, g->n_nodes);
	free(g->sites);
	free(g);
}
