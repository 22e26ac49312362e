/*
 * decode.cu - GPT-2-small-shaped transformer decode: batch 1, one token per
 * step, greedy. 12 layers, d_model 768, 12 heads of 64, MLP 3072, vocabulary
 * 50257, 1024 positions; fp16 weights, activations and KV cache (random,
 * deterministic), fp32 accumulation everywhere, fp32 logits.
 *
 * The op sequence is the one an eager fp16 framework runs for GPT-2 at batch
 * 1 (PyTorch's addmm with a 1-row input copies the bias into the output and
 * calls a GEMV with beta 1; attention is scores / scale / mask / softmax /
 * PV; HF's NewGELU is eight elementwise ops), 316 launches per token; each
 * kernel is a bandwidth-efficient one (16-byte loads, a warp per GEMV row,
 * one block per LayerNorm), launched with programmatic dependent launch as
 * an fp16 engine on Hopper does: what a kernel may read before its
 * predecessor ends (weights, the position, the KV rows of earlier steps) it
 * loads before griddepcontrol.wait, and the bias copies let the GEMV after
 * them launch early. The step is launch-bound: the weights (~250 MB of
 * fp16) take ~60 us of the step at H200 bandwidth. Every reduction has a
 * fixed order (shuffles and shared-memory trees, no atomics): all modes give
 * the same bits.
 *
 * The position lives at a fixed device address, written before each step by
 * an async copy from pinned memory (outside the region, in every mode).
 * What changes between steps, with the runtime:
 * - the KV-cache slice the step appends to (kcache + t*L*D) every step: an
 *   interior pointer of the cache, rebased through its own bound slot,
 * - the KV cache itself when it grows (capacity doubles from 64 tokens:
 *   reallocated (stream-ordered) and copied at steps 64, 128, 256, 512),
 * - the attention length bucket (128 tokens): the shape key, one graph each.
 * The hand-written graph instead keeps everything at fixed addresses (cache
 * allocated at full size, append slot computed on the device from the
 * position), one graph per bucket: the best a person would write.
 * All modes compute the same thing: the generated tokens and final logits
 * are compared bit for bit.
 *
 * Environment (diagnostics, tests/gpu/runtime_check.sh uses them):
 *   EX_DECODE_PDL=0         plain <<<>>> launches instead of PDL
 *   EX_DECODE_PREFETCH=0    GEMV weight loads after griddepcontrol.wait
 *                           (default 1: issued before it)
 *   EX_DECODE_PDL_EARLY=N   kernels that let their successor launch before
 *                           they wait for their predecessor, a mask of the
 *                           PDL_* kinds (default 6: the bias copies, layer
 *                           norm and attn_pv; 31 all)
 *   EX_DECODE_GRAPH_PATCH=1 graph mode appends through a pointer like the
 *                           runtime and patches the 12 append nodes every step
 *                           (cudaGraphExecKernelNodeSetParams; =2: then
 *                           cudaGraphUpload on a second stream; =3: two execs
 *                           alternating + that upload): what an update costs
 *   EX_DECODE_FULLCACHE=1   runtime mode allocates the KV cache at full size
 *   EX_STEP_TIMES=1         GPU time per step (events), split into steady
 *                           state and transitions (bucket starts, growth)
 *   EX_DECODE_PROFILE=1     eager: per-kernel GPU time of the last step
 *   EX_DECODE_SKIP=a,b      leave those launches out (names as in the
 *                           profile: gemv_qkv, attn_pv, ...); wrong output,
 *                           for what each kind costs in the step
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
#define FP16_MIN -65504.0f   /* HF's mask value for fp16 (finfo.min) */

typedef __half h16;

/* EX_DECODE_PROFILE=1 (eager): per-kernel GPU time of the last step, events
 * between launches queued behind a spin kernel (no host gaps) */
#define PMAX 400
static cudaEvent_t pev[PMAX + 1];
static const char *pname[PMAX + 1];
static int pn = -1;               /* -1: off */
#define P(name, s) do { if (pn >= 0 && pn < PMAX) { \
	CK(cudaEventRecord(pev[pn + 1], s)); pname[++pn] = name; } } while (0)

__global__ void spin(long long cycles)
{
	long long t0 = clock64();

	while (clock64() - t0 < cycles)
		;
}

enum { EW_ADD, EW_MUL, EW_MULS, EW_ADDS, EW_POW3, EW_TANH };

/* 8 halves <-> 8 floats through one 16-byte access */
__device__ __forceinline__ void unpack8(uint4 r, float *f)
{
	const __half2 *h = (const __half2 *)&r;

#pragma unroll
	for (int k = 0; k < 4; k++) {
		float2 v = __half22float2(h[k]);

		f[2 * k] = v.x;
		f[2 * k + 1] = v.y;
	}
}

__device__ __forceinline__ void ld8(const h16 *p, float *f)
{
	unpack8(__ldg((const uint4 *)p), f);
}

/* the same without the read-only path (data written by the previous kernel) */
__device__ __forceinline__ void ld8v(const h16 *p, float *f)
{
	unpack8(*(const uint4 *)p, f);
}

__device__ __forceinline__ void st8(h16 *p, const float *f)
{
	uint4 r;
	__half2 *h = (__half2 *)&r;

#pragma unroll
	for (int k = 0; k < 4; k++)
		h[k] = __floats2half2_rn(f[2 * k], f[2 * k + 1]);
	*(uint4 *)p = r;
}

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
	for (int k = 16; k > 0; k >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, k);
	return v;
}

__device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
	for (int k = 16; k > 0; k >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, k));
	return v;
}

/*
 * Programmatic dependent launch (on; EX_DECODE_PDL=0 turns it off): every
 * kernel of the step lets its successor launch and waits for its
 * predecessor's completion, so each launch's latency hides behind the
 * previous kernel's work (what TensorRT-LLM does on H100/H200). Without the
 * launch attribute both instructions are no-ops.
 * pdl_early (EX_DECODE_PDL_EARLY): the kernels that trigger before their
 * wait, so that their successor launches as soon as all of their blocks are
 * resident, even while they still wait, one bit per kind (PDL_*): bias_copy
 * (whose successor, a GEMV, then streams its weights for longer), layernorm
 * and attn_pv (a bias copy follows them, or kplan's fused bias copy + GEMV),
 * the GEMVs, kv_append, the rest; the others trigger after it. The default,
 * 6, is the measured best (H100: fused 282.1 -> 273.3, graph 463.5 -> 458.5
 * us per token against 2, docs/PERFORMANCE.md). Any choice is correct: every kernel waits before it
 * touches what its predecessors wrote, and a successor only launches once
 * all of this grid's blocks have started, so waiting blocks never keep an
 * earlier grid's blocks from running.
 *
 * The position (*pos) is read before the wait: the host's copy that writes
 * it precedes the step's first kernel in stream order (a copy is never
 * overlapped with a kernel by PDL), and every later kernel of the step can
 * only launch after that first one did.
 */
#define PDL_OTHER 1   /* the kernels not named below */
#define PDL_BIAS 2    /* bias_copy */
#define PDL_PRE 4     /* layernorm, attn_pv: a bias copy follows them */
#define PDL_GEMV 8
#define PDL_KV 16     /* kv_append */
__constant__ int pdl_early;

__device__ __forceinline__ void pdl_entry(int bits = PDL_OTHER)
{
	if (pdl_early & bits) {
		asm volatile("griddepcontrol.launch_dependents;" :::);
		asm volatile("griddepcontrol.wait;" ::: "memory");
	} else {
		asm volatile("griddepcontrol.wait;" ::: "memory");
		asm volatile("griddepcontrol.launch_dependents;" :::);
	}
}

static int use_pdl = 1;
static int use_prefetch = 1;   /* EX_DECODE_PREFETCH: GEMV weights before the wait */
static int gemv_rows = 4;      /* EX_DECODE_GEMV_ROWS: rows per block of the layers' GEMVs */

/* EX_DECODE_SKIP=name,...: those launches left out (a diagnostic: what each
 * kind of kernel costs inside the step; the output is then wrong) */
static const char *skip_list;

static int skipped(const char *what)
{
	size_t n = strlen(what);
	const char *p;

	for (p = skip_list; p && (p = strstr(p, what)); p += n) {
		if ((p == skip_list || p[-1] == ',') && (p[n] == ',' || !p[n]))
			return 1;
	}
	return 0;
}

/* launch one kernel of the step; `what` names it for EX_DECODE_PROFILE and
 * EX_DECODE_SKIP */
template <typename... KA, typename... A>
static void lk(const char *what, void (*k)(KA...), dim3 g, dim3 b, cudaStream_t s, A... args)
{
	cudaLaunchConfig_t c = {};
	cudaLaunchAttribute at[1] = {};

	if (skip_list && skipped(what))
		return;
	if (!use_pdl) {
		k<<<g, b, 0, s>>>(args...);
	} else {
		at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
		at[0].val.programmaticStreamSerializationAllowed = 1;
		c.gridDim = g;
		c.blockDim = b;
		c.stream = s;
		c.attrs = at;
		c.numAttrs = 1;
		cudaLaunchKernelEx(&c, k, args...);
	}
	P(what, s);
}

__global__ void init_h(h16 *p, size_t n, uint32_t seed, float scale, float bias)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;

	for (; i < n; i += (size_t)gridDim.x * blockDim.x)
		p[i] = __float2half(bias + ex_rand((uint32_t)i, seed, scale));
}

/* x = wte[token] + wpe[pos]: one block of D/8 threads */
__global__ void embed(h16 *x, const h16 *wte, const h16 *wpe, const int *tokens, const int *pos)
{
	int i = threadIdx.x * 8, p, tok, k;
	float a[8], b[8];

	p = *pos;
	pdl_entry();
	tok = tokens[p];
	ld8(wte + (size_t)tok * D + i, a);
	ld8(wpe + (size_t)p * D + i, b);
	for (k = 0; k < 8; k++)
		a[k] += b[k];
	st8(x + i, a);
}

/* block sum of one value per thread (128 threads), same order every time */
__device__ __forceinline__ float block_sum128(float v, float *red)
{
	v = warp_sum(v);
	if (threadIdx.x % 32 == 0)
		red[threadIdx.x / 32] = v;
	__syncthreads();
	v = ((red[0] + red[1]) + red[2]) + red[3];
	__syncthreads();
	return v;
}

/* y = LayerNorm(x) over D: one block of 128 threads, 8 values each (96 busy) */
__global__ void layernorm(const h16 *x, h16 *y, const h16 *g, const h16 *b)
{
	__shared__ float red[4];
	int i = threadIdx.x * 8, k, on = i < D;
	float v[8], gv[8], bv[8], s = 0, mean, var;

	if (on) {   /* the weights are constants: loaded while the predecessor ends */
		ld8(g + i, gv);
		ld8(b + i, bv);
	}
	pdl_entry(PDL_PRE);
	if (on) {
		ld8v(x + i, v);
		for (k = 0; k < 8; k++)
			s += v[k];
	}
	mean = block_sum128(s, red) * (1.0f / D);
	s = 0;
	if (on) {
		for (k = 0; k < 8; k++)
			s += (v[k] - mean) * (v[k] - mean);
	}
	var = block_sum128(s, red) * (1.0f / D);
	if (!on)
		return;
	for (k = 0; k < 8; k++)
		v[k] = (v[k] - mean) * rsqrtf(var + 1e-5f) * gv[k] + bv[k];
	st8(y + i, v);
}

/* y = b (addmm's bias broadcast into the output): 8 halves per thread */
__global__ void bias_copy(h16 *y, const h16 *b, int n)
{
	int i = (blockIdx.x * blockDim.x + threadIdx.x) * 8;

	pdl_entry(PDL_BIAS);
	if (i < n)
		*(uint4 *)(y + i) = __ldg((const uint4 *)(b + i));
}

__device__ __forceinline__ void store_out(h16 *y, float v) { *y = __float2half(v); }
__device__ __forceinline__ void store_out(float *y, float v) { *y = v; }
__device__ __forceinline__ float load_out(const h16 *y) { return __half2float(*y); }
__device__ __forceinline__ float load_out(const float *y) { return *y; }

/*
 * y[n] = (beta ? y : 0) + W[n,K] . x[K]: a warp per row, 4 rows per block
 * (2 per block measured slower: the LM head's 25k blocks),
 * every lane's K/256 16-byte loads of W issued before the arithmetic;
 * fp32 accumulation, fixed-order lane sums then a shuffle tree.
 * PRE: the weight loads are issued before griddepcontrol.wait, so under
 * programmatic dependent launch they stream while the previous kernel
 * finishes (the weights are constant; x and y are touched after the wait):
 * what TensorRT-LLM's PDL kernels do. EX_DECODE_PREFETCH=0 loads after it.
 */
#define GEMV_ROWS 4      /* rows per block (EX_DECODE_GEMV_ROWS: 1..8, the layers' GEMVs) */
#define GEMV_MAX_ROWS 8
template <int K, typename OUT, bool PRE>
__global__ void __launch_bounds__(32 * GEMV_MAX_ROWS) gemv(const h16 *__restrict__ w,
						       const h16 *__restrict__ x, OUT *y, int n,
						       int beta)
{
	constexpr int NV = K / 256;
	int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32, c, k;
	const uint4 *wr = (const uint4 *)(w + (size_t)row * K), *xr = (const uint4 *)x;
	uint4 wv[NV];
	float acc = 0, y0 = 0;

	if (PRE && row < n) {
#pragma unroll
		for (c = 0; c < NV; c++)
			wv[c] = __ldcs(wr + lane + 32 * c);
	}
	pdl_entry(PDL_GEMV);
	if (row >= n)
		return;
	if (!PRE) {
#pragma unroll
		for (c = 0; c < NV; c++)
			wv[c] = __ldcs(wr + lane + 32 * c);   /* streamed: read once per step */
	}
	if (beta && lane == 0)
		y0 = load_out(y + row);   /* issued with x's loads, not after the sum */
#pragma unroll
	for (c = 0; c < NV; c++) {
		uint4 xv = xr[lane + 32 * c];
		const __half2 *wh = (const __half2 *)&wv[c], *xh = (const __half2 *)&xv;

#pragma unroll
		for (k = 0; k < 4; k++) {
			float2 a = __half22float2(wh[k]), b = __half22float2(xh[k]);

			acc = fmaf(a.x, b.x, acc);
			acc = fmaf(a.y, b.y, acc);
		}
	}
	acc = warp_sum(acc);
	if (lane == 0)
		store_out(y + row, y0 + acc);
}

/* elementwise op over n halves (n % 8 == 0), fp32 math, fp16 result */
__global__ void ew(int op, h16 *out, const h16 *a, const h16 *b, float s, int n)
{
	int i = (blockIdx.x * blockDim.x + threadIdx.x) * 8, k;
	float x[8], y[8];

	pdl_entry();
	if (i >= n)
		return;
	ld8v(a + i, x);
	if (op == EW_ADD || op == EW_MUL)
		ld8v(b + i, y);
	for (k = 0; k < 8; k++) {
		switch (op) {
		case EW_ADD: x[k] = x[k] + y[k]; break;
		case EW_MUL: x[k] = x[k] * y[k]; break;
		case EW_MULS: x[k] = x[k] * s; break;
		case EW_ADDS: x[k] = x[k] + s; break;
		case EW_POW3: x[k] = x[k] * x[k] * x[k]; break;
		default: x[k] = tanhf(x[k]); break;
		}
	}
	st8(out + i, x);
}

/* append this step's K and V (from qkv) at the slot, or at slot + pos rows
 * (one block of D/8 threads; what vLLM's cache-append kernel does) */
__global__ void kv_append(h16 *kslot, h16 *vslot, const h16 *qkv, const int *pos, int by_pos)
{
	int i = threadIdx.x * 8;
	size_t off;

	off = by_pos ? (size_t)*pos * L * D : 0;
	pdl_entry(PDL_KV);
	*(uint4 *)(kslot + off + i) = *(const uint4 *)(qkv + D + i);
	*(uint4 *)(vslot + off + i) = *(const uint4 *)(qkv + 2 * D + i);
}

/*
 * scores[h][j] = q_h . K[j]_h for j <= pos (0 beyond: masked later); grid
 * (NH, maxlen/64), 128 threads: 8 lanes per key (16 bytes each), 16 keys per
 * pass, 4 passes; kc = cache + layer*D (rows of L*D halves).
 */
__global__ void attn_scores(const h16 *qkv, const h16 *kc, h16 *scores, const int *pos)
{
	int h = blockIdx.x, g = threadIdx.x / 8, part = threadIdx.x % 8, n, it, k;
	float q[8], kv[8];
	uint4 kr[4];
	const h16 *kh = kc + h * HD + part * 8;   /* this lane's 8 halves of key row 0 */

	/* the keys' loads first (the score stores below may alias them as far
	 * as the compiler knows, so it would not hoist them itself); the keys
	 * of earlier steps before the wait: the step's first kernel came after
	 * them in stream order (as for *pos); this step's key after it */
	n = *pos;
#pragma unroll
	for (it = 0; it < 4; it++) {
		int j = blockIdx.y * 64 + it * 16 + g;

		if (j < n)
			kr[it] = *(const uint4 *)(kh + (size_t)j * L * D);
	}
	pdl_entry();
	ld8v(qkv + h * HD + part * 8, q);
#pragma unroll
	for (it = 0; it < 4; it++) {
		int j = blockIdx.y * 64 + it * 16 + g;

		if (j == n)
			kr[it] = *(const uint4 *)(kh + (size_t)j * L * D);
	}
#pragma unroll
	for (it = 0; it < 4; it++) {
		int j = blockIdx.y * 64 + it * 16 + g;
		float s = 0;

		if (j <= n) {
			unpack8(kr[it], kv);
			for (k = 0; k < 8; k++)
				s = fmaf(q[k], kv[k], s);
		}
		s += __shfl_xor_sync(0xffffffffu, s, 4);
		s += __shfl_xor_sync(0xffffffffu, s, 2);
		s += __shfl_xor_sync(0xffffffffu, s, 1);
		if (part == 0)
			scores[h * MAXT + j] = __float2half(s);
	}
}

/* scores[h][0..maxlen) *= scale, 8 per thread */
__global__ void attn_scale(h16 *scores, int maxlen, float scale)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x, per = maxlen / 8, k;
	float v[8];
	h16 *p;

	pdl_entry();
	if (i >= NH * per)
		return;
	p = scores + (i / per) * MAXT + (i % per) * 8;
	ld8v(p, v);
	for (k = 0; k < 8; k++)
		v[k] *= scale;
	st8(p, v);
}

/* scores[h][j] = fp16 min for j > pos (torch.where with the causal mask) */
__global__ void attn_mask(h16 *scores, const int *pos, int maxlen)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x, per = maxlen / 8, n, j0, k;
	float v[8];
	h16 *p;

	n = *pos;
	pdl_entry();
	if (i >= NH * per)
		return;
	j0 = (i % per) * 8;
	p = scores + (i / per) * MAXT + j0;
	ld8v(p, v);
	for (k = 0; k < 8; k++)
		v[k] = j0 + k > n ? FP16_MIN : v[k];
	st8(p, v);
}

/* softmax of each head's row [0, maxlen): one block of 128 threads per head,
 * 8 values per thread in registers, fp32 math */
__global__ void softmax_rows(h16 *scores, int maxlen)
{
	__shared__ float red[4];
	h16 *row = scores + blockIdx.x * MAXT;
	int j0 = threadIdx.x * 8, on = j0 < maxlen, k;
	float v[8], m = -INFINITY, s = 0;

	pdl_entry();
	if (on) {
		ld8v(row + j0, v);
		for (k = 0; k < 8; k++)
			m = fmaxf(m, v[k]);
	}
	m = warp_max(m);
	if (threadIdx.x % 32 == 0)
		red[threadIdx.x / 32] = m;
	__syncthreads();
	m = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
	__syncthreads();
	if (on) {
		for (k = 0; k < 8; k++) {
			v[k] = expf(v[k] - m);
			s += v[k];
		}
	}
	s = block_sum128(s, red);
	if (!on)
		return;
	for (k = 0; k < 8; k++)
		v[k] /= s;
	st8(row + j0, v);
}

/*
 * att[h][d] = sum_{j <= pos} p[j] V[j]_h[d]: grid (NH, 4), each block 16 of
 * the head's 64 dims; 256 threads = 128 row groups x 2 lanes (one 32-byte
 * sector of a V row), every row's loads issued before the sums; the row
 * groups are added in a fixed order: xor shuffles over the 16 groups of a
 * warp, then the 8 warps in order.
 */
__global__ void __launch_bounds__(256) attn_pv(const h16 *scores, const h16 *vc, h16 *att,
						const int *pos)
{
	__shared__ float part[8][16];
	int h = blockIdx.x, r = threadIdx.x / 2, s8 = (threadIdx.x % 2) * 8;
	int d0 = blockIdx.y * 16 + s8, n, j, k, st;
	const h16 *pr = scores + h * MAXT;
	float acc[8] = { 0, 0, 0, 0, 0, 0, 0, 0 }, v[8];
	uint4 vr[MAXT / 128];
	h16 pj[MAXT / 128];
	const h16 *vh = vc + (size_t)r * L * D + h * HD + d0;   /* row r; row r + 128 j after */

	/* the values of earlier steps before the wait (as the keys in
	 * attn_scores), this step's row and the probabilities after it */
	n = *pos;
#pragma unroll
	for (j = 0; j < MAXT / 128; j++) {
		if (r + 128 * j < n)
			vr[j] = *(const uint4 *)(vh + (size_t)(128 * j) * L * D);
	}
	pdl_entry(PDL_PRE);
#pragma unroll
	for (j = 0; j < MAXT / 128; j++) {
		if (r + 128 * j <= n)
			pj[j] = pr[r + 128 * j];
		if (r + 128 * j == n)
			vr[j] = *(const uint4 *)(vh + (size_t)(128 * j) * L * D);
	}
#pragma unroll
	for (j = 0; j < MAXT / 128; j++) {
		if (r + 128 * j <= n) {
			float p = __half2float(pj[j]);

			unpack8(vr[j], v);
			for (k = 0; k < 8; k++)
				acc[k] = fmaf(p, v[k], acc[k]);
		}
	}
	/* lanes 2r + s: the same s8 sits on lanes of equal parity */
#pragma unroll
	for (st = 16; st > 1; st >>= 1) {
		for (k = 0; k < 8; k++)
			acc[k] += __shfl_xor_sync(0xffffffffu, acc[k], st);
	}
	if (threadIdx.x % 32 < 2) {
		for (k = 0; k < 8; k++)
			part[threadIdx.x / 32][s8 + k] = acc[k];
	}
	__syncthreads();
	if (threadIdx.x < 2) {
		for (k = 0; k < 8; k++) {
			float t = part[0][s8 + k];

			for (j = 1; j < 8; j++)
				t += part[j][s8 + k];
			acc[k] = t;
		}
		st8(att + h * HD + d0, acc);
	}
}

/* (value, index) pair that wins: larger value, lower index on ties */
__device__ __forceinline__ void amax_take(float &bv, int &bi, float ov, int oi)
{
	if (ov > bv || (ov == bv && oi < bi)) {
		bv = ov;
		bi = oi;
	}
}

/* tokens[pos + 1] = argmax(logits), lowest index on ties: 1024 threads,
 * 16-byte loads, shuffle trees */
__global__ void __launch_bounds__(1024) argmax(const float *logits, int *tokens, const int *pos)
{
	__shared__ float wv[32];
	__shared__ int wi[32];
	const float4 *l4 = (const float4 *)logits;
	float best = -INFINITY;
	int idx = 0x7fffffff, i, k, lane = threadIdx.x % 32, w = threadIdx.x / 32, p;

	p = *pos;
	pdl_entry();
#pragma unroll 4
	for (i = threadIdx.x; i < V / 4; i += 1024) {
		float4 v = l4[i];

		amax_take(best, idx, v.x, 4 * i);
		amax_take(best, idx, v.y, 4 * i + 1);
		amax_take(best, idx, v.z, 4 * i + 2);
		amax_take(best, idx, v.w, 4 * i + 3);
	}
	if (threadIdx.x == 0) {
		for (i = V / 4 * 4; i < V; i++)
			amax_take(best, idx, logits[i], i);
	}
	for (k = 16; k > 0; k >>= 1)
		amax_take(best, idx, __shfl_xor_sync(0xffffffffu, best, k),
			  __shfl_xor_sync(0xffffffffu, idx, k));
	if (lane == 0) {
		wv[w] = best;
		wi[w] = idx;
	}
	__syncthreads();
	if (w == 0) {
		best = wv[lane];
		idx = wi[lane];
		for (k = 16; k > 0; k >>= 1)
			amax_take(best, idx, __shfl_xor_sync(0xffffffffu, best, k),
				  __shfl_xor_sync(0xffffffffu, idx, k));
		if (lane == 0)
			tokens[p + 1] = idx;
	}
}

struct layer {
	h16 *wqkv, *wproj, *wfc, *wproj2;
	h16 *bqkv, *bproj, *bfc, *bproj2, *ln1g, *ln1b, *ln2g, *ln2b;
};

struct dec {
	struct layer ly[L];
	h16 *wte, *wpe, *lnfg, *lnfb;
	h16 *x, *h, *qkv, *att, *tmp, *f, *p, *scores;
	float *logits;
	h16 *kc, *vc;
	int *tokens;
	size_t cap;
};

#define EW_BLOCK 128
#define EW_GRID(n) (((n) / 8 + EW_BLOCK - 1) / EW_BLOCK)

/* addmm at batch 1: bias copied into y, then y += W x */
template <int K>
static void linear(cudaStream_t s, const h16 *w, const h16 *b, const h16 *x, h16 *y, int n)
{
	lk("bias_copy", bias_copy, EW_GRID(n), EW_BLOCK, s, y, b, n);
	lk(n == 3 * D ? "gemv_qkv" : n == F ? "gemv_fc" : K == F ? "gemv_proj2" : "gemv_proj",
	   use_prefetch ? gemv<K, h16, true> : gemv<K, h16, false>, (n + gemv_rows - 1) / gemv_rows,
	   32 * gemv_rows, s, w, x, y, n, 1);
}

static void ewl(cudaStream_t s, int op, h16 *out, const h16 *a, const h16 *b, float c, int n)
{
	lk(n == F ? "ew_gelu" : "ew_residual", ew, EW_GRID(n), EW_BLOCK, s, op, out, a, b, c, n);
}

/* One decode step. kslot/vslot: the append slot (by_pos 0) or the cache
 * base (by_pos 1, slot chosen from *pos on the device). */
static void step(struct dec *m, cudaStream_t s, const int *pos, h16 *kslot, h16 *vslot,
		 int by_pos, int maxlen)
{
	int l, sg = (NH * maxlen / 8 + EW_BLOCK - 1) / EW_BLOCK;

	lk("embed", embed, 1, D / 8, s, m->x, m->wte, m->wpe, m->tokens, pos);
	for (l = 0; l < L; l++) {
		struct layer *y = &m->ly[l];

		lk("layernorm", layernorm, 1, 128, s, m->x, m->h, y->ln1g, y->ln1b);
		linear<D>(s, y->wqkv, y->bqkv, m->h, m->qkv, 3 * D);
		lk("kv_append", kv_append, 1, D / 8, s, kslot + l * D, vslot + l * D, m->qkv, pos,
		   by_pos);
		lk("attn_scores", attn_scores, dim3(NH, maxlen / 64), 128, s, m->qkv, m->kc + l * D,
		   m->scores, pos);
		lk("attn_scale", attn_scale, sg, EW_BLOCK, s, m->scores, maxlen, 0.125f);
		lk("attn_mask", attn_mask, sg, EW_BLOCK, s, m->scores, pos, maxlen);
		lk("softmax", softmax_rows, NH, 128, s, m->scores, maxlen);
		lk("attn_pv", attn_pv, dim3(NH, 4), 256, s, m->scores, m->vc + l * D, m->att, pos);
		linear<D>(s, y->wproj, y->bproj, m->att, m->tmp, D);
		ewl(s, EW_ADD, m->x, m->x, m->tmp, 0, D);
		lk("layernorm", layernorm, 1, 128, s, m->x, m->h, y->ln2g, y->ln2b);
		linear<D>(s, y->wfc, y->bfc, m->h, m->f, F);
		/* NewGELU as an eager framework runs it: 8 elementwise ops */
		ewl(s, EW_POW3, m->p, m->f, NULL, 0, F);
		ewl(s, EW_MULS, m->p, m->p, NULL, 0.044715f, F);
		ewl(s, EW_ADD, m->p, m->f, m->p, 0, F);
		ewl(s, EW_MULS, m->p, m->p, NULL, 0.7978845608f, F);
		ewl(s, EW_TANH, m->p, m->p, NULL, 0, F);
		ewl(s, EW_ADDS, m->p, m->p, NULL, 1.0f, F);
		ewl(s, EW_MUL, m->p, m->f, m->p, 0, F);
		ewl(s, EW_MULS, m->p, m->p, NULL, 0.5f, F);
		linear<F>(s, y->wproj2, y->bproj2, m->p, m->tmp, D);
		ewl(s, EW_ADD, m->x, m->x, m->tmp, 0, D);
	}
	lk("layernorm", layernorm, 1, 128, s, m->x, m->h, m->lnfg, m->lnfb);
	lk("gemv_lmhead", use_prefetch ? gemv<D, float, true> : gemv<D, float, false>,
	   (V + GEMV_ROWS - 1) / GEMV_ROWS, 32 * GEMV_ROWS, s, m->wte, m->h, m->logits, V, 0);
	lk("argmax", argmax, 1, 1024, s, m->logits, m->tokens, pos);
}

static h16 *hal(size_t n, uint32_t seed, float scale, float bias)
{
	h16 *p;

	CK(cudaMalloc(&p, n * sizeof(h16)));
	init_h<<<1024, 256>>>(p, n, seed, scale, bias);
	CK(cudaGetLastError());
	return p;
}

/*
 * grow the KV cache to hold `need` tokens (outside any region), stream-
 * ordered like a framework's caching allocator: nothing waits for the GPU
 * (with cudaFree, each growth drained the queue and the step after it ran
 * with an idle GPU)
 */
static void grow(struct dec *m, cudaStream_t s, size_t need)
{
	size_t cap = m->cap ? m->cap : 64;
	h16 *nk, *nv;

	while (cap < need)
		cap *= 2;
	if (cap == m->cap)
		return;
	CK(cudaMallocAsync((void **)&nk, cap * L * D * sizeof(h16), s));
	CK(cudaMallocAsync((void **)&nv, cap * L * D * sizeof(h16), s));
	if (m->cap) {
		CK(cudaMemcpyAsync(nk, m->kc, m->cap * L * D * sizeof(h16),
				   cudaMemcpyDeviceToDevice, s));
		CK(cudaMemcpyAsync(nv, m->vc, m->cap * L * D * sizeof(h16),
				   cudaMemcpyDeviceToDevice, s));
		CK(cudaFreeAsync(m->kc, s));
		CK(cudaFreeAsync(m->vc, s));
	}
	m->kc = nk;
	m->vc = nv;
	m->cap = cap;
}

/* EX_DECODE_GRAPH_PATCH: the hand-written graph's kv_append nodes, patched */
struct gpatch {
	cudaGraph_t g;
	cudaGraphExec_t x[2];
	int cur, n;
	cudaGraphNode_t node[L];
	cudaKernelNodeParams p[L];
	void *args[L][5];
	h16 *ks[L], *vs[L];
	const int *pos;
	int by_pos;
};

static void gpatch_find(struct gpatch *gp, struct dec *m, const int *pos)
{
	cudaGraphNode_t nodes[512], kn[512];
	size_t n = 512, i, nk = 0;
	int l, by_func;

	CK(cudaGraphGetNodes(gp->g, nodes, &n));
	for (i = 0; i < n; i++) {
		cudaGraphNodeType t;

		CK(cudaGraphNodeGetType(nodes[i], &t));
		if (t == cudaGraphNodeTypeKernel)
			kn[nk++] = nodes[i];
	}
	/* by function; else by position (creation order: embed, then 26 per
	 * layer with kv_append fourth) */
	for (by_func = 1; by_func >= 0; by_func--) {
		gp->n = 0;
		for (i = 0; i < nk && gp->n < L; i++) {
			cudaKernelNodeParams kp;

			CK(cudaGraphKernelNodeGetParams(kn[i], &kp));
			if (by_func ? kp.func != (void *)kv_append : (i < 1 || (i - 1) % 26 != 3))
				continue;
			l = gp->n++;
			gp->node[l] = kn[i];
			gp->p[l] = kp;
		}
		if (gp->n == L)
			break;
	}
	if (gp->n != L) {
		fprintf(stderr, "decode: found %d kv_append nodes, expected %d\n", gp->n, L);
		exit(2);
	}
	gp->pos = pos;
	gp->by_pos = 0;
	for (l = 0; l < L; l++) {
		gp->args[l][0] = &gp->ks[l];
		gp->args[l][1] = &gp->vs[l];
		gp->args[l][2] = &m->qkv;
		gp->args[l][3] = &gp->pos;
		gp->args[l][4] = &gp->by_pos;
		gp->p[l].func = (void *)kv_append;
		gp->p[l].kernelParams = gp->args[l];
		gp->p[l].extra = NULL;
	}
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return x < y ? -1 : x > y;
}

/* EX_STEP_TIMES: where the GPU time went, steady state vs transitions (the
 * first two steps of each 128-token bucket, the cache growth at 64) */
static void step_times(cudaEvent_t *ev, int n)
{
	float *d = (float *)malloc(n * sizeof(float)), *rest = (float *)malloc(n * sizeof(float));
	float tr = 0, other = 0, ms;
	int t, nr = 0, ntr = 0, top[8] = { -1, -1, -1, -1, -1, -1, -1, -1 }, k;

	for (t = 0; t < n; t++) {
		CK(cudaEventElapsedTime(&ms, ev[t], ev[t + 1]));
		d[t] = ms * 1e3f;
		if (t % 128 < 2 || t == 64 || t == 65) {
			tr += d[t];
			ntr++;
		} else {
			other += d[t];
			rest[nr++] = d[t];
		}
		for (k = 0; k < 8; k++) {
			if (top[k] < 0 || d[t] > d[top[k]]) {
				memmove(top + k + 1, top + k, (7 - k) * sizeof(int));
				top[k] = t;
				break;
			}
		}
	}
	qsort(rest, nr, sizeof(float), cmp_float);
	printf("steps: %.1f ms; %d transition steps %.1f ms; %d others %.1f ms, median %.1f us, "
	       "mean %.1f us\n", (tr + other) / 1e3, ntr, tr / 1e3, nr, other / 1e3,
	       nr ? rest[nr / 2] : 0, nr ? other / nr : 0);
	printf("slowest steps:");
	for (k = 0; k < 8 && top[k] >= 0; k++)
		printf(" %d:%.0f", top[k], d[top[k]]);
	printf(" us\n");
	free(d);
	free(rest);
}

/* The EX_DECODE_* experiment switches; -1 (after a message) when one is out of range. */
static int read_env(const struct ex_args *a, int *gpatch, int *full, int *early)
{
	if (a->mode == EX_GRAPH && getenv("EX_DECODE_GRAPH_PATCH"))
		*gpatch = atoi(getenv("EX_DECODE_GRAPH_PATCH"));
	if (getenv("EX_DECODE_PDL"))
		use_pdl = atoi(getenv("EX_DECODE_PDL"));
	if (getenv("EX_DECODE_PREFETCH"))
		use_prefetch = atoi(getenv("EX_DECODE_PREFETCH"));
	skip_list = getenv("EX_DECODE_SKIP");
	if (getenv("EX_DECODE_GEMV_ROWS"))
		gemv_rows = atoi(getenv("EX_DECODE_GEMV_ROWS"));
	if (gemv_rows < 1 || gemv_rows > GEMV_MAX_ROWS) {
		fprintf(stderr, "decode: EX_DECODE_GEMV_ROWS must be 1..%d\n", GEMV_MAX_ROWS);
		return -1;
	}
	if (getenv("EX_DECODE_PDL_EARLY"))
		*early = atoi(getenv("EX_DECODE_PDL_EARLY"));
	if (a->mode == EX_RUNTIME && getenv("EX_DECODE_FULLCACHE"))
		*full = atoi(getenv("EX_DECODE_FULLCACHE"));
	return 0;
}

/* The model's weights (seeded, deterministic), activations, logits and tokens. */
static void init_model(struct dec *m)
{
	int l, bos = 50256;

	for (l = 0; l < L; l++) {
		struct layer *y = &m->ly[l];
		uint32_t b = 1000 * (l + 1);

		y->wqkv = hal((size_t)3 * D * D, b + 1, 0.06f, 0);
		y->wproj = hal((size_t)D * D, b + 2, 0.04f, 0);
		y->wfc = hal((size_t)F * D, b + 3, 0.06f, 0);
		y->wproj2 = hal((size_t)D * F, b + 4, 0.02f, 0);
		y->bqkv = hal(3 * D, b + 5, 0.02f, 0);
		y->bproj = hal(D, b + 6, 0.02f, 0);
		y->bfc = hal(F, b + 7, 0.02f, 0);
		y->bproj2 = hal(D, b + 8, 0.02f, 0);
		y->ln1g = hal(D, b + 9, 0.1f, 1);
		y->ln1b = hal(D, b + 10, 0.1f, 0);
		y->ln2g = hal(D, b + 11, 0.1f, 1);
		y->ln2b = hal(D, b + 12, 0.1f, 0);
	}
	m->wte = hal((size_t)V * D, 77, 0.1f, 0);
	m->wpe = hal((size_t)MAXT * D, 78, 0.02f, 0);
	m->lnfg = hal(D, 79, 0.1f, 1);
	m->lnfb = hal(D, 80, 0.1f, 0);
	m->x = hal(D, 1, 0, 0);
	m->h = hal(D, 1, 0, 0);
	m->qkv = hal(3 * D, 1, 0, 0);
	m->att = hal(D, 1, 0, 0);
	m->tmp = hal(D, 1, 0, 0);
	m->f = hal(F, 1, 0, 0);
	m->p = hal(F, 1, 0, 0);
	m->scores = hal(NH * MAXT, 1, 0, 0);
	CK(cudaMalloc(&m->logits, V * sizeof(float)));
	CK(cudaMemset(m->logits, 0, V * sizeof(float)));
	CK(cudaMalloc(&m->tokens, (MAXT + 1) * sizeof(int)));
	CK(cudaMemset(m->tokens, 0, (MAXT + 1) * sizeof(int)));
	CK(cudaMemcpy(m->tokens, &bos, sizeof(int), cudaMemcpyHostToDevice));
}

/* The profile (EX_DECODE_PROFILE): GPU time between consecutive events, by kernel. */
static void print_profile(int step)
{
	const char *names[32];
	float tot[32] = { 0 }, all = 0, ms;
	int cnt[32] = { 0 }, nn = 0, i, j;

	for (i = 1; i <= pn; i++) {
		CK(cudaEventElapsedTime(&ms, pev[i - 1], pev[i]));
		for (j = 0; j < nn && strcmp(names[j], pname[i]); j++)
			;
		if (j == nn && nn < 32)
			names[nn++] = pname[i];
		if (j < 32) {
			tot[j] += ms;
			cnt[j]++;
		}
		all += ms;
	}
	printf("profile (step %d, eager queued behind a spin: %d launches, %.1f us):\n",
	       step, pn, all * 1e3);
	for (j = 0; j < nn; j++)
		printf("  %-12s %4d launches %8.1f us %6.2f us each\n", names[j], cnt[j],
		       tot[j] * 1e3, tot[j] * 1e3 / cnt[j]);
}

int main(int argc, char **argv)
{
	struct ex_args a;
	struct dec m;
	cudaStream_t s, us = NULL;
	cudaGraphExec_t ge[MAXT / 128 + 1] = { 0 };
	static struct gpatch gp[MAXT / 128 + 1];
	int *dpos, *hpos, t, gpatch = 0, full = 0, early = PDL_BIAS | PDL_PRE;
	int64_t t0, t1, gp_set = 0, gp_launch = 0, ta;
	cudaEvent_t *sev = NULL;
	uint64_t h;
	kp_rt *rt;

	ex_parse(argc, argv, &a, 1000);
	if (a.steps < 1 || a.steps > MAXT - 1) {
		fprintf(stderr, "decode: --steps must be 1..%d\n", MAXT - 1);
		return 64;
	}
	if (read_env(&a, &gpatch, &full, &early))
		return 64;
	memset(&m, 0, sizeof(m));
	CK(cudaMemcpyToSymbol(pdl_early, &early, sizeof(early)));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	if (gpatch >= 2)
		CK(cudaStreamCreateWithFlags(&us, cudaStreamNonBlocking));
	init_model(&m);
	CK(cudaMallocHost(&hpos, MAXT * sizeof(int)));   /* pinned: async copies */
	for (t = 0; t < MAXT; t++)
		hpos[t] = t;
	CK(cudaMalloc(&dpos, sizeof(int)));
	grow(&m, s, a.mode == EX_GRAPH || full ? MAXT : 64);
	if (getenv("EX_STEP_TIMES")) {   /* GPU time per step: an event after each */
		sev = (cudaEvent_t *)calloc(a.steps + 1, sizeof(*sev));
		for (t = 0; t <= a.steps; t++)
			CK(cudaEventCreate(&sev[t]));
	}
	CK(cudaDeviceSynchronize());
	rt = ex_open_rt(&a);
	if (sev)
		CK(cudaEventRecord(sev[0], s));

	/* one token per step, the modes side by side (graph with patched
	 * nodes, graph per cache size, eager, through the runtime): they stay
	 * in main so that they read against each other */
	t0 = ex_now_ns();
	for (t = 0; t < a.steps; t++) {
		int maxlen = (t / 128 + 1) * 128;

		if (sev && t > 0)
			CK(cudaEventRecord(sev[t], s));   /* end of step t - 1 */
		CK(cudaMemcpyAsync(dpos, hpos + t, sizeof(int), cudaMemcpyHostToDevice, s));
		if (a.mode == EX_GRAPH && gpatch) {
			struct gpatch *g = &gp[maxlen / 128];
			int k;

			if (!g->x[0]) {
				CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
				step(&m, s, dpos, m.kc + (size_t)t * L * D, m.vc + (size_t)t * L * D,
				     0, maxlen);
				CK(cudaStreamEndCapture(s, &g->g));
				CK(cudaGraphInstantiate(&g->x[0], g->g, 0));
				if (gpatch >= 3)
					CK(cudaGraphInstantiate(&g->x[1], g->g, 0));
				gpatch_find(g, &m, dpos);
			}
			if (gpatch >= 3)
				g->cur = 1 - g->cur;
			ta = ex_now_ns();
			for (k = 0; k < L; k++) {
				g->ks[k] = m.kc + (size_t)t * L * D + k * D;
				g->vs[k] = m.vc + (size_t)t * L * D + k * D;
				CK(cudaGraphExecKernelNodeSetParams(g->x[g->cur], g->node[k], &g->p[k]));
			}
			if (gpatch >= 2)
				CK(cudaGraphUpload(g->x[g->cur], us));
			gp_set += ex_now_ns() - ta;
			ta = ex_now_ns();
			CK(cudaGraphLaunch(g->x[g->cur], s));
			gp_launch += ex_now_ns() - ta;
			continue;
		}
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
			h16 *ks = m.kc + (size_t)t * L * D, *vs = m.vc + (size_t)t * L * D;
			const int *pos = dpos;

			if (a.mode == EX_EAGER && t == a.steps - 1 && getenv("EX_DECODE_PROFILE")) {
				int i;

				for (i = 0; i <= PMAX; i++)
					CK(cudaEventCreate(&pev[i]));
				spin<<<1, 1, 0, s>>>(20000000);   /* ~10 ms: all launches queue up */
				CK(cudaEventRecord(pev[0], s));
				pn = 0;
				step(&m, s, pos, ks, vs, 0, maxlen);
			} else if (a.mode == EX_EAGER) {
				step(&m, s, pos, ks, vs, 0, maxlen);
			} else {
				kp_region r;
				size_t cb = m.cap * L * D * sizeof(h16), sb = L * D * sizeof(h16);

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
	if (sev)
		CK(cudaEventRecord(sev[a.steps], s));
	CK(cudaStreamSynchronize(s));
	t1 = ex_now_ns();
	CK(cudaGetLastError());
	if (sev)
		step_times(sev, a.steps);
	h = ex_dev_hash(m.tokens, (size_t)(a.steps + 1) * sizeof(int), 0xcbf29ce484222325ULL);
	h = ex_dev_hash(m.logits, V * sizeof(float), h);
	{
		int last;

		CK(cudaMemcpy(&last, m.tokens + a.steps, sizeof(int), cudaMemcpyDeviceToHost));
		printf("last token %d\n", last);
	}
	if (pn > 0)
		print_profile(a.steps - 1);
	if (gpatch)
		fprintf(stderr, "decode: graph patch: host us/token in updates %.2f, in launch %.2f\n",
			gp_set / 1e3 / a.steps, gp_launch / 1e3 / a.steps);
	if (a.mode == EX_GRAPH && !gpatch && a.steps > 0) {
		/* each KV-length bucket's graph, weighted by the tokens it ran
		 * (after the hash: replays write the cache and the logits) */
		double sum = 0;
		int k, n;

		for (k = 1; k <= MAXT / 128; k++) {   /* ge[k]: tokens (k - 1) * 128 .. k * 128 - 1 */
			n = a.steps - (k - 1) * 128 < 128 ? a.steps - (k - 1) * 128 : 128;
			if (ge[k] && n > 0)
				sum += n * ex_replay_us(ge[k], s);
		}
		ex_body("decode", sum / a.steps);
	}
	ex_result("decode", &a, t1 - t0, h);
	kp_rt_close(rt);
	return 0;
}
