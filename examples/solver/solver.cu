/*
 * solver.cu - Jacobi iterations for a 2-D Poisson problem (128 x 128 grid,
 * zero boundary), with a host convergence check every 10 iterations: the
 * residual norm is reduced on the GPU (two kernels), copied to the host, and
 * the host waits for it (a synchronisation inside the loop). A CUDA graph
 * cannot contain that wait, so the region is the 10 iterations + residual
 * between two checks, and the check stays eager: the split a plan makes
 * around a blocker.
 *
 * EX_SOLVER_SYNC_IN_REGION=1 puts the copy + wait inside the region instead:
 * the runtime's capture is then invalidated and the region falls back to
 * eager (reason capture-failed) with the same results: a safety check.
 */
#include "../excommon.h"

#define N 128
#define BLOCK_ITERS 10
#define NB ((N * N + 255) / 256)

__global__ void jacobi(const float *u, float *v, const float *f, float h2)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x, r = i / N, c = i % N;
	float s;

	if (i >= N * N)
		return;
	s = (r > 0 ? u[i - N] : 0.0f) + (r < N - 1 ? u[i + N] : 0.0f) +
	    (c > 0 ? u[i - 1] : 0.0f) + (c < N - 1 ? u[i + 1] : 0.0f);
	v[i] = 0.25f * (s + h2 * f[i]);
}

/* partial sums of (A u - f)^2, one per block, fixed tree */
__global__ void residual_partial(const float *u, const float *f, float *part, float inv_h2)
{
	__shared__ float red[256];
	int i = blockIdx.x * blockDim.x + threadIdx.x, r = i / N, c = i % N;
	float e = 0;

	if (i < N * N) {
		float s = (r > 0 ? u[i - N] : 0.0f) + (r < N - 1 ? u[i + N] : 0.0f) +
			  (c > 0 ? u[i - 1] : 0.0f) + (c < N - 1 ? u[i + 1] : 0.0f);
		float au = (4.0f * u[i] - s) * inv_h2;

		e = (au - f[i]) * (au - f[i]);
	}
	ex_block_sum(red, e);
	if (threadIdx.x == 0)
		part[blockIdx.x] = red[0];
}

__global__ void residual_final(const float *part, int n, float *res)
{
	__shared__ float red[256];
	float s = 0;
	int i;

	for (i = threadIdx.x; i < n; i += blockDim.x)
		s += part[i];
	ex_block_sum(red, s);
	if (threadIdx.x == 0)
		res[0] = sqrtf(red[0]);
}

struct solver {
	float *u, *v, *f, *part, *res, *hres;
};

static void block(struct solver *m, cudaStream_t s, float h2)
{
	int k;

	for (k = 0; k < BLOCK_ITERS; k += 2) {
		jacobi<<<NB, 256, 0, s>>>(m->u, m->v, m->f, h2);
		jacobi<<<NB, 256, 0, s>>>(m->v, m->u, m->f, h2);
	}
	residual_partial<<<NB, 256, 0, s>>>(m->u, m->f, m->part, 1.0f / h2);
	residual_final<<<1, 256, 0, s>>>(m->part, NB, m->res);
}

static void check(struct solver *m, cudaStream_t s)
{
	CK(cudaMemcpyAsync(m->hres, m->res, sizeof(float), cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
}

/*
 * The check inside a region: while the runtime captures, the wait fails
 * ("operation not permitted when stream is capturing") and invalidates the
 * capture; the runtime then has the body run again eagerly, where it works.
 */
static void check_in_region(struct solver *m, cudaStream_t s)
{
	enum cudaStreamCaptureStatus st;

	CK(cudaStreamIsCapturing(s, &st));
	if (st == cudaStreamCaptureStatusNone) {
		check(m, s);
		return;
	}
	cudaMemcpyAsync(m->hres, m->res, sizeof(float), cudaMemcpyDeviceToHost, s);
	cudaStreamSynchronize(s);
	cudaGetLastError();
}

int main(int argc, char **argv)
{
	struct ex_args a;
	struct solver m;
	cudaStream_t s;
	cudaGraph_t g = NULL;
	cudaGraphExec_t ge = NULL;
	const float h = 1.0f / (N + 1), h2 = h * h;
	const char *sync_in = getenv("EX_SOLVER_SYNC_IN_REGION");
	int in_region = sync_in && atoi(sync_in), b, nblocks, done = 0;
	float first = -1, tol;
	int64_t t0, t1;
	uint64_t hsh;
	kp_rt *rt;

	ex_parse(argc, argv, &a, 3000);
	nblocks = a.steps / BLOCK_ITERS;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMalloc(&m.u, N * N * sizeof(float)));
	CK(cudaMalloc(&m.v, N * N * sizeof(float)));
	CK(cudaMemset(m.u, 0, N * N * sizeof(float)));
	CK(cudaMemset(m.v, 0, N * N * sizeof(float)));
	CK(cudaMalloc(&m.f, N * N * sizeof(float)));
	ex_fill(m.f, N * N, 5, 1.0f, 1.0f);
	CK(cudaMalloc(&m.part, NB * sizeof(float)));
	CK(cudaMalloc(&m.res, sizeof(float)));
	CK(cudaMallocHost(&m.hres, sizeof(float)));
	CK(cudaDeviceSynchronize());
	rt = ex_open_rt(&a);

	t0 = ex_now_ns();
	for (b = 0; b < nblocks && !done; b++) {
		if (a.mode == EX_EAGER) {
			block(&m, s, h2);
			check(&m, s);
		} else if (a.mode == EX_RUNTIME) {
			kp_region r;

			do {
				if (kp_region_begin(rt, &r, "solver.block", 0, s)) {
					block(&m, s, h2);
					if (in_region)
						check_in_region(&m, s);
				}
			} while (kp_region_end(rt, &r) > 0);
			if (!in_region)
				check(&m, s);
		} else {
			if (!ge) {
				CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
				block(&m, s, h2);
				CK(cudaStreamEndCapture(s, &g));
				CK(cudaGraphInstantiate(&ge, g, 0));
			}
			CK(cudaGraphLaunch(ge, s));
			check(&m, s);
		}
		if (first < 0)
			first = *m.hres;
		tol = first * 0.4f;     /* converged: residual down 2.5x */
		done = *m.hres < tol;
	}
	CK(cudaStreamSynchronize(s));
	t1 = ex_now_ns();
	CK(cudaGetLastError());
	printf("iterations %d residual %.6g (first %.6g)\n", b * BLOCK_ITERS, *m.hres, first);
	hsh = ex_dev_hash(m.u, N * N * sizeof(float), 0xcbf29ce484222325ULL);
	hsh = ex_fnv(&b, sizeof(b), hsh);
	a.steps = b * BLOCK_ITERS;
	if (ge)     /* after the hash: replays go on iterating u */
		ex_body("solver", ex_replay_us(ge, s) / BLOCK_ITERS);
	ex_result("solver", &a, t1 - t0, hsh);
	kp_rt_close(rt);
	return 0;
}
