/*
 * decode.cu - GPT-2-small-shaped transformer decode: batch 1, one token per
 * step, greedy. 12 layers, d_model 768, 12 heads of 64, MLP 3072, vocabulary
 * 50257, 1024 positions; fp16 weights (random, deterministic), fp32
 * activations. The op sequence mirrors an eager framework's GPT-2 (separate
 * bias copy + GEMV per linear, scores / scale / mask / softmax / PV, the
 * tanh-GELU as eight elementwise ops): 316 launches per token.
 *
 * The position lives at a fixed device address, written before each step by
 * an async copy from pinned memory (outside the region, in every mode).
 * What changes between steps, with the runtime:
 * - the KV-cache slice the step appends to (kcache + t*L*D) every step: an
 *   interior pointer of the cache, rebased through its own bound slot,
 * - the KV cache itself when it grows (capacity doubles from 64 tokens:
 *   reallocated and copied at steps 64, 128, 256, 512),
 * - the attention length bucket (128 tokens): the shape key, one graph each.
 * The hand-written graph instead keeps everything at fixed addresses (cache
 * allocated at full size, append slot computed on the device from the
 * position), one graph per bucket: the best a person would write.
 * All modes compute the same thing: the generated tokens and final logits
 * are compared bit for bit.
 */
#include "../excommon.h"
#include <cuda_fp16.h>
#include <math.h>

#define L 12
#define D 768
#define NH 12
#define HD 64
#define F 3072
#define V 50257
#define MAXT 1024

enum { EW_ADD, EW_MUL, EW_MULS, EW_ADDS, EW_POW3, EW_TANH };

__global__ void init_h(__half *p, size_t n, uint32_t seed, float scale)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;

	for (; i < n; i += (size_t)gridDim.x * blockDim.x)
		p[i] = __float2half(ex_rand((uint32_t)i, seed, scale));
}

__global__ void embed(float *x, const __half *wte, const float *wpe, const int *tokens,
		      const int *pos)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x, p = *pos, tok = tokens[p];

	x[i] = __half2float(wte[(size_t)tok * D + i]) + wpe[(size_t)p * D + i];
}

__global__ void layernorm(const float *x, float *y, const float *g, const float *b, int d)
{
	__shared__ float red[256];
	float s = 0, mean, var;
	int i, k;

	for (i = threadIdx.x; i < d; i += blockDim.x)
		s += x[i];
	red[threadIdx.x] = s;
	__syncthreads();
	for (k = blockDim.x / 2; k > 0; k >>= 1) {
		if ((int)threadIdx.x < k)
			red[threadIdx.x] += red[threadIdx.x + k];
		__syncthreads();
	}
	mean = red[0] / d;
	__syncthreads();
	s = 0;
	for (i = threadIdx.x; i < d; i += blockDim.x)
		s += (x[i] - mean) * (x[i] - mean);
	red[threadIdx.x] = s;
	__syncthreads();
	for (k = blockDim.x / 2; k > 0; k >>= 1) {
		if ((int)threadIdx.x < k)
			red[threadIdx.x] += red[threadIdx.x + k];
		__syncthreads();
	}
	var = red[0] / d;
	for (i = threadIdx.x; i < d; i += blockDim.x)
		y[i] = (x[i] - mean) * rsqrtf(var + 1e-5f) * g[i] + b[i];
}

__global__ void bias_copy(float *y, const float *b, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		y[i] = b[i];
}

/* y[n] (+)= W[n,:] . x, one warp per row, 8 halves per lane per step; x is
 * staged in shared memory (k floats of dynamic shared memory) */
__global__ void gemv(const __half *w, const float *x, float *y, int n, int k, int beta)
{
	extern __shared__ float xs[];
	int row = blockIdx.x * 8 + threadIdx.x / 32, lane = threadIdx.x % 32, c, j;
	const uint4 *wr;
	float acc = 0;

	for (c = threadIdx.x; c < k; c += blockDim.x)
		xs[c] = x[c];
	__syncthreads();
	if (row >= n)
		return;
	wr = (const uint4 *)(w + (size_t)row * k);
#pragma unroll 4
	for (c = lane; c < k / 8; c += 32) {
		uint4 raw = __ldg(wr + c);
		const __half *hv = (const __half *)&raw;

		for (j = 0; j < 8; j++)
			acc += __half2float(hv[j]) * xs[c * 8 + j];
	}
	for (j = 16; j > 0; j >>= 1)
		acc += __shfl_xor_sync(0xffffffffu, acc, j);
	if (lane == 0)
		y[row] = (beta ? y[row] : 0.0f) + acc;
}

__global__ void ew(int op, float *out, const float *a, const float *b, float s, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	switch (op) {
	case EW_ADD: out[i] = a[i] + b[i]; break;
	case EW_MUL: out[i] = a[i] * b[i]; break;
	case EW_MULS: out[i] = a[i] * s; break;
	case EW_ADDS: out[i] = a[i] + s; break;
	case EW_POW3: out[i] = a[i] * a[i] * a[i]; break;
	default: out[i] = tanhf(a[i]); break;
	}
}

/* append this step's K and V (from qkv) at the slot, or at slot + pos rows */
__global__ void kv_append(float *kslot, float *vslot, const float *qkv, const int *pos,
			  int by_pos)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	size_t off = by_pos ? (size_t)*pos * L * D : 0;

	kslot[off + i] = qkv[D + i];
	vslot[off + i] = qkv[2 * D + i];
}

/* scores[h][j] = q_h . K[j]_h for j <= pos (0 beyond: masked later) */
__global__ void attn_scores(const float *qkv, const float *kc, float *scores, const int *pos)
{
	int h = blockIdx.x, j = blockIdx.y * blockDim.x + threadIdx.x, d;
	float s = 0;

	if (j <= *pos) {
		const float *kr = kc + (size_t)j * L * D + h * HD;

		for (d = 0; d < HD; d++)
			s += qkv[h * HD + d] * kr[d];
	}
	scores[h * MAXT + j] = s;
}

__global__ void attn_scale(float *scores, int maxlen, float scale)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x, h = i / maxlen, j = i % maxlen;

	if (h < NH)
		scores[h * MAXT + j] *= scale;
}

__global__ void attn_mask(float *scores, const int *pos, int maxlen)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x, h = i / maxlen, j = i % maxlen;

	if (h < NH && j > *pos)
		scores[h * MAXT + j] = -INFINITY;
}

__global__ void softmax_rows(float *scores, int maxlen)
{
	__shared__ float red[256];
	float *row = scores + blockIdx.x * MAXT;
	float m = -INFINITY, s = 0;
	int j, k;

	for (j = threadIdx.x; j < maxlen; j += blockDim.x)
		m = fmaxf(m, row[j]);
	red[threadIdx.x] = m;
	__syncthreads();
	for (k = blockDim.x / 2; k > 0; k >>= 1) {
		if ((int)threadIdx.x < k)
			red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + k]);
		__syncthreads();
	}
	m = red[0];
	__syncthreads();
	for (j = threadIdx.x; j < maxlen; j += blockDim.x) {
		float e = expf(row[j] - m);

		row[j] = e;
		s += e;
	}
	red[threadIdx.x] = s;
	__syncthreads();
	for (k = blockDim.x / 2; k > 0; k >>= 1) {
		if ((int)threadIdx.x < k)
			red[threadIdx.x] += red[threadIdx.x + k];
		__syncthreads();
	}
	s = red[0];
	for (j = threadIdx.x; j < maxlen; j += blockDim.x)
		row[j] /= s;
}

/* att[h][d] = sum_j p[j] V[j]_h[d]: 16 groups of 64 threads split j, then
 * the groups are added in a fixed order (deterministic) */
__global__ void attn_pv(const float *scores, const float *vc, float *att, const int *pos)
{
	__shared__ float part[16][HD];
	int h = blockIdx.x, d = threadIdx.x % HD, g = threadIdx.x / HD, j, n = *pos;
	float s = 0;

#pragma unroll 4
	for (j = g; j <= n; j += 16)
		s += scores[h * MAXT + j] * vc[(size_t)j * L * D + h * HD + d];
	part[g][d] = s;
	__syncthreads();
	if (g == 0) {
		for (j = 1; j < 16; j++)
			s += part[j][d];
		att[h * HD + d] = s;
	}
}

/* tokens[pos + 1] = argmax(logits), lowest index on ties */
__global__ void argmax(const float *logits, int *tokens, const int *pos)
{
	__shared__ float bv[1024];
	__shared__ int bi[1024];
	float best = -INFINITY;
	int idx = 0x7fffffff, i, k;

	for (i = threadIdx.x; i < V; i += blockDim.x) {
		if (logits[i] > best) {
			best = logits[i];
			idx = i;
		}
	}
	bv[threadIdx.x] = best;
	bi[threadIdx.x] = idx;
	__syncthreads();
	for (k = blockDim.x / 2; k > 0; k >>= 1) {
		if ((int)threadIdx.x < k) {
			float ov = bv[threadIdx.x + k];
			int oi = bi[threadIdx.x + k];

			if (ov > bv[threadIdx.x] || (ov == bv[threadIdx.x] && oi < bi[threadIdx.x])) {
				bv[threadIdx.x] = ov;
				bi[threadIdx.x] = oi;
			}
		}
		__syncthreads();
	}
	if (threadIdx.x == 0)
		tokens[*pos + 1] = bi[0];
}

struct layer {
	__half *wqkv, *wproj, *wfc, *wproj2;
	float *bqkv, *bproj, *bfc, *bproj2, *ln1g, *ln1b, *ln2g, *ln2b;
};

struct dec {
	struct layer ly[L];
	__half *wte;
	float *wpe, *lnfg, *lnfb;
	float *x, *h, *qkv, *att, *tmp, *f, *p, *scores, *logits;
	float *kc, *vc;
	int *tokens;
	size_t cap;
};

static void linear(cudaStream_t s, const __half *w, const float *b, const float *x, float *y,
		   int n, int k)
{
	bias_copy<<<(n + 255) / 256, 256, 0, s>>>(y, b, n);
	gemv<<<(n + 7) / 8, 256, k * sizeof(float), s>>>(w, x, y, n, k, 1);
}

static void ewl(cudaStream_t s, int op, float *out, const float *a, const float *b, float c, int n)
{
	ew<<<(n + 255) / 256, 256, 0, s>>>(op, out, a, b, c, n);
}

/* One decode step. kslot/vslot: the append slot (by_pos 0) or the cache
 * base (by_pos 1, slot chosen from *pos on the device). */
static void step(struct dec *m, cudaStream_t s, const int *pos, float *kslot, float *vslot,
		 int by_pos, int maxlen)
{
	int l;

	embed<<<D / 256, 256, 0, s>>>(m->x, m->wte, m->wpe, m->tokens, pos);
	for (l = 0; l < L; l++) {
		struct layer *y = &m->ly[l];

		layernorm<<<1, 256, 0, s>>>(m->x, m->h, y->ln1g, y->ln1b, D);
		linear(s, y->wqkv, y->bqkv, m->h, m->qkv, 3 * D, D);
		kv_append<<<D / 256, 256, 0, s>>>(kslot + l * D, vslot + l * D, m->qkv, pos, by_pos);
		attn_scores<<<dim3(NH, maxlen / 128), 128, 0, s>>>(m->qkv, m->kc + l * D, m->scores, pos);
		attn_scale<<<NH * maxlen / 256, 256, 0, s>>>(m->scores, maxlen, 0.125f);
		attn_mask<<<NH * maxlen / 256, 256, 0, s>>>(m->scores, pos, maxlen);
		softmax_rows<<<NH, 256, 0, s>>>(m->scores, maxlen);
		attn_pv<<<NH, 16 * HD, 0, s>>>(m->scores, m->vc + l * D, m->att, pos);
		linear(s, y->wproj, y->bproj, m->att, m->tmp, D, D);
		ewl(s, EW_ADD, m->x, m->x, m->tmp, 0, D);
		layernorm<<<1, 256, 0, s>>>(m->x, m->h, y->ln2g, y->ln2b, D);
		linear(s, y->wfc, y->bfc, m->h, m->f, F, D);
		/* NewGELU as an eager framework runs it: 8 elementwise ops */
		ewl(s, EW_POW3, m->p, m->f, NULL, 0, F);
		ewl(s, EW_MULS, m->p, m->p, NULL, 0.044715f, F);
		ewl(s, EW_ADD, m->p, m->f, m->p, 0, F);
		ewl(s, EW_MULS, m->p, m->p, NULL, 0.7978845608f, F);
		ewl(s, EW_TANH, m->p, m->p, NULL, 0, F);
		ewl(s, EW_ADDS, m->p, m->p, NULL, 1.0f, F);
		ewl(s, EW_MUL, m->p, m->f, m->p, 0, F);
		ewl(s, EW_MULS, m->p, m->p, NULL, 0.5f, F);
		linear(s, y->wproj2, y->bproj2, m->p, m->tmp, D, F);
		ewl(s, EW_ADD, m->x, m->x, m->tmp, 0, D);
	}
	layernorm<<<1, 256, 0, s>>>(m->x, m->h, m->lnfg, m->lnfb, D);
	gemv<<<(V + 7) / 8, 256, D * sizeof(float), s>>>(m->wte, m->h, m->logits, V, D, 0);
	argmax<<<1, 1024, 0, s>>>(m->logits, m->tokens, pos);
}

static float *fal(size_t n, uint32_t seed, float scale, float bias)
{
	float *p;

	CK(cudaMalloc(&p, n * sizeof(float)));
	ex_fill(p, n, seed, scale, bias);
	return p;
}

static __half *hal(size_t n, uint32_t seed, float scale)
{
	__half *p;

	CK(cudaMalloc(&p, n * sizeof(__half)));
	init_h<<<1024, 256>>>(p, n, seed, scale);
	CK(cudaGetLastError());
	return p;
}

/* grow the KV cache to hold `need` tokens (outside any region) */
static void grow(struct dec *m, cudaStream_t s, size_t need)
{
	size_t cap = m->cap ? m->cap : 64;
	float *nk, *nv;

	while (cap < need)
		cap *= 2;
	if (cap == m->cap)
		return;
	CK(cudaMalloc(&nk, cap * L * D * sizeof(float)));
	CK(cudaMalloc(&nv, cap * L * D * sizeof(float)));
	if (m->cap) {
		CK(cudaMemcpyAsync(nk, m->kc, m->cap * L * D * sizeof(float),
				   cudaMemcpyDeviceToDevice, s));
		CK(cudaMemcpyAsync(nv, m->vc, m->cap * L * D * sizeof(float),
				   cudaMemcpyDeviceToDevice, s));
		CK(cudaStreamSynchronize(s));
		CK(cudaFree(m->kc));
		CK(cudaFree(m->vc));
	}
	m->kc = nk;
	m->vc = nv;
	m->cap = cap;
}

int main(int argc, char **argv)
{
	struct ex_args a;
	struct dec m;
	cudaStream_t s;
	cudaGraphExec_t ge[MAXT / 128 + 1] = { 0 };
	int *dpos, *hpos, t, l;
	int64_t t0, t1;
	uint64_t h;
	kp_rt *rt;

	ex_parse(argc, argv, &a, 1000);
	if (a.steps < 1 || a.steps > MAXT - 1) {
		fprintf(stderr, "decode: --steps must be 1..%d\n", MAXT - 1);
		return 64;
	}
	memset(&m, 0, sizeof(m));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	for (l = 0; l < L; l++) {
		struct layer *y = &m.ly[l];
		uint32_t b = 1000 * (l + 1);

		y->wqkv = hal((size_t)3 * D * D, b + 1, 0.06f);
		y->wproj = hal((size_t)D * D, b + 2, 0.04f);
		y->wfc = hal((size_t)F * D, b + 3, 0.06f);
		y->wproj2 = hal((size_t)D * F, b + 4, 0.02f);
		y->bqkv = fal(3 * D, b + 5, 0.02f, 0);
		y->bproj = fal(D, b + 6, 0.02f, 0);
		y->bfc = fal(F, b + 7, 0.02f, 0);
		y->bproj2 = fal(D, b + 8, 0.02f, 0);
		y->ln1g = fal(D, b + 9, 0.1f, 1);
		y->ln1b = fal(D, b + 10, 0.1f, 0);
		y->ln2g = fal(D, b + 11, 0.1f, 1);
		y->ln2b = fal(D, b + 12, 0.1f, 0);
	}
	m.wte = hal((size_t)V * D, 77, 0.1f);
	m.wpe = fal((size_t)MAXT * D, 78, 0.02f, 0);
	m.lnfg = fal(D, 79, 0.1f, 1);
	m.lnfb = fal(D, 80, 0.1f, 0);
	m.x = fal(D, 1, 0, 0);
	m.h = fal(D, 1, 0, 0);
	m.qkv = fal(3 * D, 1, 0, 0);
	m.att = fal(D, 1, 0, 0);
	m.tmp = fal(D, 1, 0, 0);
	m.f = fal(F, 1, 0, 0);
	m.p = fal(F, 1, 0, 0);
	m.scores = fal(NH * MAXT, 1, 0, 0);
	m.logits = fal(V, 1, 0, 0);
	CK(cudaMalloc(&m.tokens, (MAXT + 1) * sizeof(int)));
	CK(cudaMemset(m.tokens, 0, (MAXT + 1) * sizeof(int)));
	{
		int bos = 50256;

		CK(cudaMemcpy(m.tokens, &bos, sizeof(int), cudaMemcpyHostToDevice));
	}
	CK(cudaMallocHost(&hpos, MAXT * sizeof(int)));   /* pinned: async copies */
	for (t = 0; t < MAXT; t++)
		hpos[t] = t;
	CK(cudaMalloc(&dpos, sizeof(int)));
	grow(&m, s, a.mode == EX_GRAPH ? MAXT : 64);
	CK(cudaDeviceSynchronize());
	rt = ex_open_rt(&a);

	t0 = ex_now_ns();
	for (t = 0; t < a.steps; t++) {
		int maxlen = (t / 128 + 1) * 128;

		CK(cudaMemcpyAsync(dpos, hpos + t, sizeof(int), cudaMemcpyHostToDevice, s));
		if (a.mode == EX_GRAPH) {
			cudaGraphExec_t *x = &ge[maxlen / 128];

			if (!*x) {
				cudaGraph_t g;

				CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
				step(&m, s, dpos, m.kc, m.vc, 1, maxlen);
				CK(cudaStreamEndCapture(s, &g));
				CK(cudaGraphInstantiate(x, g, 0));
				CK(cudaGraphDestroy(g));
			}
			CK(cudaGraphLaunch(*x, s));
			continue;
		}
		grow(&m, s, (size_t)t + 1);
		{
			float *ks = m.kc + (size_t)t * L * D, *vs = m.vc + (size_t)t * L * D;
			const int *pos = dpos;

			if (a.mode == EX_EAGER) {
				step(&m, s, pos, ks, vs, 0, maxlen);
			} else {
				kp_region r;
				size_t cb = m.cap * L * D * sizeof(float), sb = L * D * sizeof(float);

				do {
					if (kp_region_begin(rt, &r, "decode.step", (uint64_t)maxlen, s))
						step(&m, s, pos, ks, vs, 0, maxlen);
					kp_rt_bind(rt, &r, 0, m.kc, cb, 0);
					kp_rt_bind(rt, &r, 1, m.vc, cb, 0);
					kp_rt_bind(rt, &r, 2, ks, sb, 0);
					kp_rt_bind(rt, &r, 3, vs, sb, 0);
					kp_rt_bind(rt, &r, 4, m.logits, V * sizeof(float),
						   KP_RT_BIND_OUTPUT);
				} while (kp_region_end(rt, &r) > 0);
			}
		}
	}
	CK(cudaStreamSynchronize(s));
	t1 = ex_now_ns();
	CK(cudaGetLastError());
	h = ex_dev_hash(m.tokens, (size_t)(a.steps + 1) * sizeof(int), 0xcbf29ce484222325ULL);
	h = ex_dev_hash(m.logits, V * sizeof(float), h);
	{
		int last;

		CK(cudaMemcpy(&last, m.tokens + a.steps, sizeof(int), cudaMemcpyDeviceToHost));
		printf("last token %d\n", last);
	}
	ex_result("decode", &a, t1 - t0, h);
	kp_rt_close(rt);
	return 0;
}
