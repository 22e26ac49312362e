/*
 * corpus.h - shared by the corpus programs (examples/corpus/NAME.cu): real-style
 * CUDA programs that each exercise one pattern real code uses inside a
 * region (tests/gpu/corpus_check.sh runs them record -> analyze -> plan ->
 * apply and compares with eager).
 *
 *   corpus_NAME [--eager] [--graph-body] [--plan PATH] [--steps N] [program flags]
 *
 *   --eager      plain launches, no kplan call at all (the reference)
 *   --graph-body --eager, then (after the hash) one call of each region body
 *                kplan graphs captured by hand and its replay period printed
 *                (cp_body_begin / cp_body_end)
 *   (default)    every region through libkplanrt; no plan: all eager, each
 *                region call an NVTX range (what `kplan record` records)
 *   --plan PATH  (or KPLAN_PLAN=PATH) the regions the plan graphs are
 *                captured and replayed
 *
 * Output: in runtime modes one line per region,
 *   "REGION <name> calls N replays R captures C eager E reasons r:n,..."
 * (the runtime's counters, attributed to the region by differencing
 * kp_rt_get_stats around each call), then, last,
 *   "RESULT <name> mode <eager|runtime|plan> steps N us_per_step T hash H"
 * where H hashes the final outputs (losses, parameters) bit for bit. With
 * --graph-body, before RESULT, one line per region kplan graphs,
 *   "BODY <region> replay_us <t>"
 * the replay period in microseconds of one call of that region's body
 * captured by hand ("-" when it could not be captured).
 *
 * Each program has its own exit-on-error check (real code does); this file
 * only brings the command line, the tiny MLP trainer most of them step, the
 * hash and the timing. Nothing here synchronises inside a region.
 */
#ifndef KP_CORPUS_H
#define KP_CORPUS_H

#include "../excommon.h"   /* ex_now_ns, ex_fnv, ex_rand, ex_init_f32 */

enum cp_mode { CP_EAGER, CP_RUNTIME, CP_PLAN };

struct cp_args {
	int mode;
	const char *plan;
	int steps;
	int graph_body;            /* --graph-body (implies eager) */
	unsigned flags;            /* bit i: extra[i] was given */
};

static inline void cp_parse(int argc, char **argv, struct cp_args *a, int def_steps,
			    const char *const *extra)
{
	int i, j, eager = 0;

	memset(a, 0, sizeof(*a));
	a->steps = def_steps;
	a->plan = getenv("KPLAN_PLAN");
	if (a->plan && !*a->plan)
		a->plan = NULL;
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--eager")) {
			eager = 1;
		} else if (!strcmp(argv[i], "--graph-body")) {
			eager = 1;
			a->graph_body = 1;
		} else if (!strcmp(argv[i], "--plan") && i + 1 < argc) {
			a->plan = argv[++i];
		} else if (!strcmp(argv[i], "--steps") && i + 1 < argc) {
			a->steps = atoi(argv[++i]);
		} else {
			for (j = 0; extra && extra[j] && strcmp(argv[i], extra[j]); j++)
				;
			if (!extra || !extra[j]) {
				fprintf(stderr, "usage: %s [--eager] [--graph-body] [--plan PATH] [--steps N]",
					argv[0]);
				for (j = 0; extra && extra[j]; j++)
					fprintf(stderr, " [%s]", extra[j]);
				fprintf(stderr, "\n");
				exit(64);
			}
			a->flags |= 1u << j;
		}
	}
	if (a->steps < 1)
		a->steps = 1;
	a->mode = eager ? CP_EAGER : a->plan ? CP_PLAN : CP_RUNTIME;
	if (eager)
		a->plan = NULL;
}

/* NULL in eager mode: the program then calls no kplan function. */
static inline kp_rt *cp_open(const struct cp_args *a)
{
	struct kp_rt_err err;
	kp_rt *rt;

	if (a->mode == CP_EAGER)
		return NULL;
	rt = kp_rt_open(a->plan, &err);
	if (!rt) {
		fprintf(stderr, "kp_rt_open(%s): %s\n", a->plan ? a->plan : "no plan", err.msg);
		exit(1);
	}
	return rt;
}

/* Per-region counters: the runtime's, differenced around each region call. */
struct cp_region {
	const char *name;
	uint64_t calls, replays, captures, eager, by[KP_RT_R_COUNT];
	struct kp_rt_stats s0;
};

static inline void cp_enter(kp_rt *rt, struct cp_region *g)
{
	if (rt)
		kp_rt_get_stats(rt, &g->s0);
}

static inline void cp_leave(kp_rt *rt, struct cp_region *g)
{
	struct kp_rt_stats s1;
	int i;

	if (!rt)
		return;
	kp_rt_get_stats(rt, &s1);
	g->calls += s1.calls - g->s0.calls;
	g->replays += s1.replays - g->s0.replays;
	g->captures += s1.captures - g->s0.captures;
	g->eager += s1.eager - g->s0.eager;
	for (i = 0; i < KP_RT_R_COUNT; i++)
		g->by[i] += s1.eager_by_reason[i] - g->s0.eager_by_reason[i];
}

static inline void cp_report(kp_rt *rt, const struct cp_region *g)
{
	int i, n = 0;

	if (!rt)
		return;
	printf("REGION %s calls %llu replays %llu captures %llu eager %llu reasons ", g->name,
	       (unsigned long long)g->calls, (unsigned long long)g->replays,
	       (unsigned long long)g->captures, (unsigned long long)g->eager);
	for (i = 1; i < KP_RT_R_COUNT; i++) {
		if (g->by[i])
			printf("%s%s:%llu", n++ ? "," : "", kp_rt_reason_name(i),
			       (unsigned long long)g->by[i]);
	}
	printf("%s\n", n ? "" : "-");
}

static inline void cp_result(const char *name, const struct cp_args *a, int64_t ns, uint64_t h)
{
	static const char *const mode[] = { "eager", "runtime", "plan" };

	printf("RESULT %s mode %s steps %d us_per_step %.3f hash %016llx\n", name, mode[a->mode],
	       a->steps, ns / 1e3 / a->steps, (unsigned long long)h);
	fflush(stdout);
}

#define CP_HASH0 0xcbf29ce484222325ULL

/*
 * --graph-body: the replay period of one region call captured by hand, for
 * the cost model's validation corpus (bench/example_corpus.sh). After the
 * eager run and its hash (the replays write the outputs again, and the eager
 * run did any warm-up the body needs):
 *
 *   check(cp_body_begin(s));      thread-local capture of the region's stream
 *   ...exactly the calls of one region body, on s, a typical step's arguments
 *   check(cp_body_end("label", s));
 *
 * cp_body_end ends the capture, instantiates, times the replays
 * (ex_replay_us: fastest of 9 batches of 30), prints
 * "BODY <label> replay_us <t>" and destroys the graph. A capture or
 * instantiation that fails prints "BODY <label> replay_us -" (the reason on
 * stderr) and is not an error; the other errors are returned for the
 * program's own check.
 */
static inline cudaError_t cp_body_begin(cudaStream_t s)
{
	return cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
}

static inline cudaError_t cp_body_end(const char *label, cudaStream_t s)
{
	cudaGraph_t g = NULL;
	cudaGraphExec_t x = NULL;
	cudaError_t e;

	e = cudaStreamEndCapture(s, &g);
	if (e == cudaSuccess)
		e = cudaGraphInstantiate(&x, g, 0);
	if (e != cudaSuccess) {
		fprintf(stderr, "BODY %s: capture failed: %s\n", label, cudaGetErrorString(e));
		printf("BODY %s replay_us -\n", label);
		(void)cudaGetLastError();
		return g ? cudaGraphDestroy(g) : cudaSuccess;
	}
	printf("BODY %s replay_us %.3f\n", label, ex_replay_us(x, s));
	fflush(stdout);
	if ((e = cudaGraphExecDestroy(x)))
		return e;
	return cudaGraphDestroy(g);
}

/* Hash n bytes of device memory (after the program's final sync). */
static inline uint64_t cp_dev_hash(const void *d, size_t n, uint64_t h)
{
	void *buf = malloc(n);

	if (!buf || cudaMemcpy(buf, d, n, cudaMemcpyDeviceToHost) != cudaSuccess) {
		fprintf(stderr, "cp_dev_hash: cannot read back %zu bytes\n", n);
		exit(1);
	}
	h = ex_fnv(buf, n, h);
	free(buf);
	return h;
}

/* ------------------------------------------------------------------------ */
/*
 * The tiny MLP trainer: L layers of D x D tanh units on batches of B rows,
 * MSE loss, plain SGD. Everything tiny, so every kernel is a few
 * microseconds and a step (about 8 launches per layer) is launch-bound.
 * Deterministic: no atomics, fixed-order reductions.
 */
#define CP_B 16
#define CP_D 32
#define CP_N (CP_B * CP_D)

struct cp_mlp {
	int L;
	float *W, *b, *dW, *db;    /* L*D*D, L*D */
	float *pre, *act;          /* L*N pre-activations, (L+1)*N activations (act[0] = input) */
	float *d0, *d1;            /* N each: gradient ping-pong */
};

__global__ void cp_copy(float *dst, const float *src, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		dst[i] = src[i];
}

/* pre[b][o] = b[o] + sum_i x[b][i] W[o][i] */
__global__ void cp_linear_fwd(const float *x, const float *W, const float *bias, float *pre)
{
	int b = blockIdx.x, o = threadIdx.x, i;
	float s = bias[o];

	for (i = 0; i < CP_D; i++)
		s += x[b * CP_D + i] * W[o * CP_D + i];
	pre[b * CP_D + o] = s;
}

__global__ void cp_tanh_fwd(const float *pre, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		y[i] = tanhf(pre[i]);
}

/* dy = 2 (y - t) / N; loss_slot[0] = mean (y - t)^2 (one block of CP_N threads) */
__global__ void cp_mse(const float *y, const float *t, float *dy, float *loss_slot)
{
	__shared__ float red[CP_N];
	int i = threadIdx.x, k;
	float e = y[i] - t[i];

	dy[i] = 2.0f * e / CP_N;
	red[i] = e * e;
	__syncthreads();
	for (k = CP_N / 2; k > 0; k >>= 1) {
		if (i < k)
			red[i] += red[i + k];
		__syncthreads();
	}
	if (i == 0)
		*loss_slot = red[0] / CP_N;
}

__global__ void cp_tanh_bwd(const float *dy, const float *y, float *dpre, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		dpre[i] = dy[i] * (1.0f - y[i] * y[i]);
}

/* dx[b][i] = sum_o dpre[b][o] W[o][i] */
__global__ void cp_linear_bwd_x(const float *dpre, const float *W, float *dx)
{
	int b = blockIdx.x, i = threadIdx.x, o;
	float s = 0;

	for (o = 0; o < CP_D; o++)
		s += dpre[b * CP_D + o] * W[o * CP_D + i];
	dx[b * CP_D + i] = s;
}

/* dW[o][i] (+)= sum_b dpre[b][o] x[b][i]; db[o] (+)= sum_b dpre[b][o] */
__global__ void cp_linear_bwd_w(const float *dpre, const float *x, float *dW, float *db, int accum)
{
	int o = blockIdx.x, i = threadIdx.x, b;
	float s = 0, sb = 0;

	for (b = 0; b < CP_B; b++) {
		s += dpre[b * CP_D + o] * x[b * CP_D + i];
		sb += dpre[b * CP_D + o];
	}
	dW[o * CP_D + i] = accum ? dW[o * CP_D + i] + s : s;
	if (i == 0)
		db[o] = accum ? db[o] + sb : sb;
}

__global__ void cp_sgd(float *p, const float *g, int n, float lr)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		p[i] -= lr * g[i];
}

/* Allocate and initialise (outside any region; the caller checks errors). */
static inline cudaError_t cp_mlp_init(struct cp_mlp *m, int L, uint32_t seed)
{
	cudaError_t e;
	size_t dd = (size_t)L * CP_D * CP_D;

	m->L = L;
	if ((e = cudaMalloc(&m->W, dd * 4)) || (e = cudaMalloc(&m->b, (size_t)L * CP_D * 4)) ||
	    (e = cudaMalloc(&m->dW, dd * 4)) || (e = cudaMalloc(&m->db, (size_t)L * CP_D * 4)) ||
	    (e = cudaMalloc(&m->pre, (size_t)L * CP_N * 4)) ||
	    (e = cudaMalloc(&m->act, (size_t)(L + 1) * CP_N * 4)) ||
	    (e = cudaMalloc(&m->d0, CP_N * 4)) || (e = cudaMalloc(&m->d1, CP_N * 4)))
		return e;
	ex_init_f32<<<64, 256>>>(m->W, dd, seed, 0.35f, 0);
	ex_init_f32<<<4, 256>>>(m->b, (size_t)L * CP_D, seed + 1, 0.05f, 0);
	if ((e = cudaGetLastError()))
		return e;
	if ((e = cudaMemset(m->dW, 0, dd * 4)) || (e = cudaMemset(m->db, 0, (size_t)L * CP_D * 4)))
		return e;
	return cudaDeviceSynchronize();
}

/* Forward from x (copied into act[0]): 1 + 2L launches. */
static inline cudaError_t cp_mlp_forward(struct cp_mlp *m, const float *x, cudaStream_t s)
{
	int l;

	cp_copy<<<(CP_N + 255) / 256, 256, 0, s>>>(m->act, x, CP_N);
	for (l = 0; l < m->L; l++) {
		cp_linear_fwd<<<CP_B, CP_D, 0, s>>>(m->act + (size_t)l * CP_N, m->W + (size_t)l * CP_D * CP_D,
						    m->b + (size_t)l * CP_D, m->pre + (size_t)l * CP_N);
		cp_tanh_fwd<<<(CP_N + 127) / 128, 128, 0, s>>>(m->pre + (size_t)l * CP_N,
							      m->act + (size_t)(l + 1) * CP_N, CP_N);
	}
	return cudaGetLastError();
}

/* Loss against t into *loss_slot, then backward into dW/db: 1 + 3L - 1 launches. */
static inline cudaError_t cp_mlp_backward(struct cp_mlp *m, const float *t, float *loss_slot,
					  int accum, cudaStream_t s)
{
	int l;

	cp_mse<<<1, CP_N, 0, s>>>(m->act + (size_t)m->L * CP_N, t, m->d0, loss_slot);
	for (l = m->L - 1; l >= 0; l--) {
		cp_tanh_bwd<<<(CP_N + 127) / 128, 128, 0, s>>>(m->d0, m->act + (size_t)(l + 1) * CP_N,
							      m->d1, CP_N);
		cp_linear_bwd_w<<<CP_D, CP_D, 0, s>>>(m->d1, m->act + (size_t)l * CP_N,
						      m->dW + (size_t)l * CP_D * CP_D,
						      m->db + (size_t)l * CP_D, accum);
		if (l > 0)
			cp_linear_bwd_x<<<CP_B, CP_D, 0, s>>>(m->d1, m->W + (size_t)l * CP_D * CP_D, m->d0);
	}
	return cudaGetLastError();
}

/* SGD on every layer's weights and biases: 2L launches. */
static inline cudaError_t cp_mlp_update(struct cp_mlp *m, float lr, cudaStream_t s)
{
	int l;

	for (l = 0; l < m->L; l++) {
		cp_sgd<<<(CP_D * CP_D + 255) / 256, 256, 0, s>>>(m->W + (size_t)l * CP_D * CP_D,
								  m->dW + (size_t)l * CP_D * CP_D,
								  CP_D * CP_D, lr);
		cp_sgd<<<1, CP_D, 0, s>>>(m->b + (size_t)l * CP_D, m->db + (size_t)l * CP_D, CP_D, lr);
	}
	return cudaGetLastError();
}

static inline uint64_t cp_mlp_hash(const struct cp_mlp *m, uint64_t h)
{
	h = cp_dev_hash(m->W, (size_t)m->L * CP_D * CP_D * 4, h);
	return cp_dev_hash(m->b, (size_t)m->L * CP_D * 4, h);
}

/* A data set of nb batches of inputs and targets (x in [-1,1], t in [-0.5,0.5]). */
static inline cudaError_t cp_data(float **x, float **t, int nb, uint32_t seed)
{
	cudaError_t e;

	if ((e = cudaMalloc(x, (size_t)nb * CP_N * 4)) || (e = cudaMalloc(t, (size_t)nb * CP_N * 4)))
		return e;
	ex_init_f32<<<64, 256>>>(*x, (size_t)nb * CP_N, seed, 1.0f, 0);
	ex_init_f32<<<64, 256>>>(*t, (size_t)nb * CP_N, seed + 7, 0.5f, 0);
	if ((e = cudaGetLastError()))
		return e;
	return cudaDeviceSynchronize();
}

#endif
