/*
 * cublaslt.cu - an MLP training step on cuBLASLt, the way llm.c's
 * train_gpt2.cu does its matmuls.
 *
 * Exercises: cublasLtMatmul for every forward, input-gradient and
 * weight-gradient matmul, with descriptors, layouts, preference and the
 * algorithm heuristic created per call (host work only) and ONE 32 MiB
 * workspace allocated up front and passed to every matmul (so nothing
 * allocates under capture); own bias+GELU, GELU-backward, bias-gradient,
 * softmax cross-entropy kernels (SGD from corpus.h); an error check after
 * every launch.
 *
 * Region: lt.train  8 layers x (matmul, bias+GELU | GELU-bwd, dW matmul, db,
 *                   dX matmul | 2 SGD) + loss: ~65 launches (more when a
 *                   matmul picks split-K), batch 32, width 64.
 *
 * Expected: graphed (replays > 0), outputs bit-identical to --eager.
 */
#include "corpus.h"
#include <cublasLt.h>

static void cudaCheck_(cudaError_t error, const char *file, int line)
{
	if (error != cudaSuccess) {
		printf("[CUDA ERROR] at file %s:%d:\n%s\n", file, line, cudaGetErrorString(error));
		exit(EXIT_FAILURE);
	}
}
#define cudaCheck(err) (cudaCheck_(err, __FILE__, __LINE__))

static void cublasCheck_(cublasStatus_t status, const char *file, int line)
{
	if (status != CUBLAS_STATUS_SUCCESS) {
		printf("[cuBLAS ERROR]: %d %s %d\n", (int)status, file, line);
		exit(EXIT_FAILURE);
	}
}
#define cublasCheck(status) (cublasCheck_((status), __FILE__, __LINE__))

#define B 32
#define C 64
#define L 8
#define NB 8
#define WS_SIZE (32 << 20)

static cublasLtHandle_t lt;
static void *ws;            /* the one workspace, allocated once */

/* D (m x n, col-major) = op(A) op(B), op(A) m x k, op(B) k x n, FP32 throughout */
static void matmul(float *d, const float *a, const float *b, int m, int n, int k, int ta, int tb,
		   cudaStream_t s)
{
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t la, lb, ld;
	cublasLtMatmulPreference_t pref;
	cublasLtMatmulHeuristicResult_t heur;
	cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	size_t wsz = WS_SIZE;
	int found = 0;
	const float one = 1.0f, zero = 0.0f;

	cublasCheck(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
	cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
	cublasCheck(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, ta ? k : m, ta ? m : k, ta ? k : m));
	cublasCheck(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, tb ? n : k, tb ? k : n, tb ? n : k));
	cublasCheck(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m));
	cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
	cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
							 &wsz, sizeof(wsz)));
	cublasCheck(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &heur, &found));
	if (!found)
		cublasCheck(CUBLAS_STATUS_NOT_SUPPORTED);   /* no algorithm for this shape */
	cublasCheck(cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, &heur.algo,
				   ws, WS_SIZE, s));
	cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
	cublasCheck(cublasLtMatrixLayoutDestroy(la));
	cublasCheck(cublasLtMatrixLayoutDestroy(lb));
	cublasCheck(cublasLtMatrixLayoutDestroy(ld));
	cublasCheck(cublasLtMatmulDescDestroy(desc));
}

#define GELU_S 0.7978845608f
__device__ float gelu(float v) { return 0.5f * v * (1.0f + tanhf(GELU_S * (v + 0.044715f * v * v * v))); }

/* pre += bias (kept for backward); out = gelu(pre); rows of C */
__global__ void bias_gelu(float *pre, float *out, const float *bias, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n) {
		float v = pre[i] + bias[i % C];

		pre[i] = v;
		out[i] = gelu(v);
	}
}

__global__ void gelu_bwd(float *dpre, const float *dout, const float *pre, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n) {
		float x = pre[i], th = tanhf(GELU_S * (x + 0.044715f * x * x * x));
		float dth = (1.0f - th * th) * GELU_S * (1.0f + 3.0f * 0.044715f * x * x);

		dpre[i] = dout[i] * (0.5f * (1.0f + th) + 0.5f * x * dth);
	}
}

__global__ void bias_grad(float *db, const float *dpre)
{
	int o = threadIdx.x, b;
	float s = 0;

	for (b = 0; b < B; b++)
		s += dpre[b * C + o];
	db[o] = s;
}

/* softmax cross-entropy over C classes, one block of B threads; dlogits, mean loss */
__global__ void crossentropy(const float *logits, const int *targets, float *dlogits, float *loss)
{
	__shared__ float lb[B];
	const float *z = logits + threadIdx.x * C;
	float *dz = dlogits + threadIdx.x * C, mx = z[0], sum = 0;
	int i, t = targets[threadIdx.x];

	for (i = 1; i < C; i++)
		mx = fmaxf(mx, z[i]);
	for (i = 0; i < C; i++)
		sum += expf(z[i] - mx);
	for (i = 0; i < C; i++)
		dz[i] = (expf(z[i] - mx) / sum - (i == t)) / B;
	lb[threadIdx.x] = logf(sum) + mx - z[t];
	__syncthreads();
	if (threadIdx.x == 0) {
		float s = 0;

		for (i = 0; i < B; i++)
			s += lb[i];
		*loss = s / B;
	}
}

static float *dalloc(size_t n)
{
	float *p;

	cudaCheck(cudaMalloc(&p, n * sizeof(float)));
	return p;
}

struct net {
	float *W, *b, *dW, *db;   /* W[l] is C x C (row-major [out][in]) */
	float *pre, *act;         /* pre[l], act[l] (act[0] = input): B x C each */
	float *g0, *g1;           /* activation gradients */
};

static void train_step(struct net *n, const float *x, const int *tg, float *loss, cudaStream_t s)
{
	const int N = B * C, G = (N + 255) / 256;
	int l;

	cp_copy<<<G, 256, 0, s>>>(n->act, x, N);   /* a kernel: a memcpy node could not be patched */
	cudaCheck(cudaGetLastError());
	for (l = 0; l < L; l++) {   /* act[l+1] = gelu(act[l] W^T + b) */
		matmul(n->pre + l * N, n->W + l * C * C, n->act + l * N, C, B, C, 1, 0, s);
		bias_gelu<<<G, 256, 0, s>>>(n->pre + l * N, n->act + (l + 1) * N, n->b + l * C, N);
		cudaCheck(cudaGetLastError());
	}
	crossentropy<<<1, B, 0, s>>>(n->act + L * N, tg, n->g0, loss);
	cudaCheck(cudaGetLastError());
	for (l = L - 1; l >= 0; l--) {
		gelu_bwd<<<G, 256, 0, s>>>(n->g1, n->g0, n->pre + l * N, N);
		cudaCheck(cudaGetLastError());
		matmul(n->dW + l * C * C, n->act + l * N, n->g1, C, C, B, 0, 1, s);   /* dW = x^T dpre */
		bias_grad<<<1, C, 0, s>>>(n->db + l * C, n->g1);
		cudaCheck(cudaGetLastError());
		if (l > 0)
			matmul(n->g0, n->W + l * C * C, n->g1, C, B, C, 0, 0, s);      /* dx = dpre W */
	}
	for (l = 0; l < L; l++) {
		cp_sgd<<<(C * C + 255) / 256, 256, 0, s>>>(n->W + l * C * C, n->dW + l * C * C, C * C, 0.1f);
		cp_sgd<<<1, C, 0, s>>>(n->b + l * C, n->db + l * C, C, 0.1f);
		cudaCheck(cudaGetLastError());
	}
}

int main(int argc, char **argv)
{
	struct cp_args a;
	struct cp_region rg = { "lt.train" };
	struct net n;
	cudaStream_t s;
	float *x, *losses;
	int *tg, htg[NB * B];
	kp_rt *rt;
	int64_t t0, t1;
	uint64_t h;
	int step;

	cp_parse(argc, argv, &a, 200, NULL);
	cudaCheck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	cublasCheck(cublasLtCreate(&lt));
	cudaCheck(cudaMalloc(&ws, WS_SIZE));
	n.W = dalloc(L * C * C), n.dW = dalloc(L * C * C), n.b = dalloc(L * C), n.db = dalloc(L * C);
	n.pre = dalloc(L * B * C), n.act = dalloc((L + 1) * B * C);
	n.g0 = dalloc(B * C), n.g1 = dalloc(B * C), x = dalloc(NB * B * C), losses = dalloc(a.steps);
	cudaCheck(cudaMalloc(&tg, NB * B * sizeof(int)));
	ex_init_f32<<<64, 256>>>(n.W, L * C * C, 3, 0.3f, 0);
	ex_init_f32<<<4, 256>>>(n.b, L * C, 4, 0.02f, 0);
	ex_init_f32<<<64, 256>>>(x, NB * B * C, 5, 1.0f, 0);
	for (step = 0; step < NB * B; step++)
		htg[step] = (int)((step * 2654435761u) >> 7) % C;
	cudaCheck(cudaMemcpy(tg, htg, sizeof(htg), cudaMemcpyHostToDevice));
	cudaCheck(cudaGetLastError());
	cudaCheck(cudaDeviceSynchronize());
	rt = cp_open(&a);

	t0 = ex_now_ns();
	for (step = 0; step < a.steps; step++) {
		const float *xb = x + (step % NB) * B * C;
		const int *tb = tg + (step % NB) * B;
		kp_region r;

		if (!rt) {
			train_step(&n, xb, tb, losses + step, s);
			continue;
		}
		cp_enter(rt, &rg);
		do {
			if (kp_region_begin(rt, &r, "lt.train", 0, s))
				train_step(&n, xb, tb, losses + step, s);
			kp_rt_bind(rt, &r, 0, xb, B * C * sizeof(float), 0);
			kp_rt_bind(rt, &r, 1, tb, B * sizeof(int), 0);
			kp_rt_bind(rt, &r, 2, losses + step, sizeof(float), KP_RT_BIND_OUTPUT);
		} while (kp_region_end(rt, &r) > 0);
		cp_leave(rt, &rg);
	}
	cudaCheck(cudaStreamSynchronize(s));
	t1 = ex_now_ns();
	h = cp_dev_hash(losses, a.steps * sizeof(float), CP_HASH0);
	h = cp_dev_hash(n.W, L * C * C * sizeof(float), h);
	h = cp_dev_hash(n.b, L * C * sizeof(float), h);
	cp_report(rt, &rg);
	if (a.graph_body) {
		/* lt.train on s: the matmuls' host work (descriptors, heuristic) runs
		 * at capture, the workspace exists already */
		step = a.steps - 1;
		cudaCheck(cp_body_begin(s));
		train_step(&n, x + (step % NB) * B * C, tg + (step % NB) * B, losses + step, s);
		cudaCheck(cp_body_end("lt.train", s));
	}
	cp_result("cublaslt", &a, t1 - t0, h);
	if (rt)
		kp_rt_close(rt);
	cublasCheck(cublasLtDestroy(lt));
	return 0;
}
