/*
 * per_thread.cu - a program compiled with `nvcc --default-stream per-thread`
 * that launches everything `<<<grid, block>>>` with no stream.
 *
 * Exercises: every launch, memset and copy goes to the calling thread's
 * per-thread default stream (stream handle 0 means that stream in this
 * compilation unit: the CUDA_API_PER_THREAD_DEFAULT_STREAM API variants).
 * One region is entered with stream 0, as such code naturally does (the
 * runtime cannot capture the legacy stream, so it must see that 0 means the
 * per-thread stream here), the other with cudaStreamPerThread.
 *
 * Regions:
 *   ptds.train  (stream 0) cudaMemsetAsync of the gradients (stream 0), 2
 *               micro-batches of forward + backward, SGD: 8 layers,
 *               ~98 launches + 2 memsets
 *   ptds.eval   (cudaStreamPerThread) forward + loss of 3 held-out batches:
 *               ~54 launches
 *
 * Expected: both graphed (the runtime resolves stream 0 to the per-thread
 * stream), or eager with a clear reason (would-break-capture naming the
 * legacy stream); never crashes; outputs bit-identical to --eager.
 */
#include "corpus.h"

#define CHECK(x) do { cudaError_t rc_ = (x); if (rc_ != cudaSuccess) { \
	fprintf(stderr, "fatal: %s failed: %s (%s:%d)\n", #x, cudaGetErrorString(rc_), \
		__FILE__, __LINE__); exit(1); } } while (0)

#define L 8
#define NB 8
#define NE 3
#define G ((CP_N + 127) / 128)

static void forward(struct cp_mlp *m, const float *x)
{
	int l;

	cp_copy<<<G, 128>>>(m->act, x, CP_N);
	for (l = 0; l < L; l++) {
		cp_linear_fwd<<<CP_B, CP_D>>>(m->act + (size_t)l * CP_N, m->W + (size_t)l * CP_D * CP_D,
					      m->b + (size_t)l * CP_D, m->pre + (size_t)l * CP_N);
		cp_tanh_fwd<<<G, 128>>>(m->pre + (size_t)l * CP_N, m->act + (size_t)(l + 1) * CP_N, CP_N);
	}
	CHECK(cudaGetLastError());
}

static void backward(struct cp_mlp *m, const float *t, float *loss)
{
	int l;

	cp_mse<<<1, CP_N>>>(m->act + (size_t)L * CP_N, t, m->d0, loss);
	for (l = L - 1; l >= 0; l--) {
		cp_tanh_bwd<<<G, 128>>>(m->d0, m->act + (size_t)(l + 1) * CP_N, m->d1, CP_N);
		cp_linear_bwd_w<<<CP_D, CP_D>>>(m->d1, m->act + (size_t)l * CP_N,
						m->dW + (size_t)l * CP_D * CP_D, m->db + (size_t)l * CP_D, 1);
		if (l > 0)
			cp_linear_bwd_x<<<CP_B, CP_D>>>(m->d1, m->W + (size_t)l * CP_D * CP_D, m->d0);
	}
	CHECK(cudaGetLastError());
}

static void train_step(struct cp_mlp *m, const float *x0, const float *x1, const float *t0,
		       const float *t1, float *loss)
{
	int l;

	CHECK(cudaMemsetAsync(m->dW, 0, L * CP_D * CP_D * sizeof(float)));   /* stream 0 */
	CHECK(cudaMemsetAsync(m->db, 0, L * CP_D * sizeof(float)));
	forward(m, x0);
	backward(m, t0, loss);
	forward(m, x1);
	backward(m, t1, loss + 1);
	for (l = 0; l < L; l++) {
		cp_sgd<<<(CP_D * CP_D + 255) / 256, 256>>>(m->W + (size_t)l * CP_D * CP_D,
							  m->dW + (size_t)l * CP_D * CP_D, CP_D * CP_D, 0.03f);
		cp_sgd<<<1, CP_D>>>(m->b + (size_t)l * CP_D, m->db + (size_t)l * CP_D, CP_D, 0.03f);
	}
	CHECK(cudaGetLastError());
}

static void eval_step(struct cp_mlp *m, const float *ex, const float *et, float *loss)
{
	int k;

	for (k = 0; k < NE; k++) {
		forward(m, ex + (size_t)k * CP_N);
		cp_mse<<<1, CP_N>>>(m->act + (size_t)L * CP_N, et + (size_t)k * CP_N, m->d0, loss + k);
		CHECK(cudaGetLastError());
	}
}

int main(int argc, char **argv)
{
	struct cp_args a;
	struct cp_mlp m;
	struct cp_region rg_train = { "ptds.train" }, rg_eval = { "ptds.eval" };
	float *x, *t, *ex, *et, *losses, *elosses;
	kp_rt *rt;
	int64_t t0, t1;
	uint64_t h;
	int step;

	cp_parse(argc, argv, &a, 200, NULL);
	CHECK(cp_mlp_init(&m, L, 41));
	CHECK(cp_data(&x, &t, NB, 500));
	CHECK(cp_data(&ex, &et, NE, 600));
	CHECK(cudaMalloc(&losses, 2 * a.steps * sizeof(float)));
	CHECK(cudaMalloc(&elosses, (size_t)NE * a.steps * sizeof(float)));
	rt = cp_open(&a);

	t0 = ex_now_ns();
	for (step = 0; step < a.steps; step++) {
		int b0 = (2 * step) % NB, b1 = b0 + 1;
		const float *x0 = x + (size_t)b0 * CP_N, *x1 = x + (size_t)b1 * CP_N;
		const float *tt0 = t + (size_t)b0 * CP_N, *tt1 = t + (size_t)b1 * CP_N;
		float *ls = losses + 2 * step, *els = elosses + (size_t)NE * step;
		kp_region r;

		if (!rt) {
			train_step(&m, x0, x1, tt0, tt1, ls);
			eval_step(&m, ex, et, els);
			continue;
		}
		cp_enter(rt, &rg_train);
		do {
			if (kp_region_begin(rt, &r, "ptds.train", 0, 0))    /* stream 0 */
				train_step(&m, x0, x1, tt0, tt1, ls);
			kp_rt_bind(rt, &r, 0, x0, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 1, x1, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 2, tt0, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 3, tt1, CP_N * sizeof(float), 0);
			kp_rt_bind(rt, &r, 4, ls, 2 * sizeof(float), KP_RT_BIND_OUTPUT);
		} while (kp_region_end(rt, &r) > 0);
		cp_leave(rt, &rg_train);

		cp_enter(rt, &rg_eval);
		do {
			if (kp_region_begin(rt, &r, "ptds.eval", 0, cudaStreamPerThread))
				eval_step(&m, ex, et, els);
			kp_rt_bind(rt, &r, 0, els, NE * sizeof(float), KP_RT_BIND_OUTPUT);
		} while (kp_region_end(rt, &r) > 0);
		cp_leave(rt, &rg_eval);
	}
	CHECK(cudaStreamSynchronize(0));
	t1 = ex_now_ns();
	h = cp_dev_hash(losses, 2 * a.steps * sizeof(float), CP_HASH0);
	h = cp_dev_hash(elosses, (size_t)NE * a.steps * sizeof(float), h);
	h = cp_mlp_hash(&m, h);
	cp_report(rt, &rg_train);
	cp_report(rt, &rg_eval);
	if (a.graph_body) {
		/* both on the per-thread default stream, where this compilation unit's
		 * stream-0 launches and memsets go (ptds.train's region stream 0) */
		int b0 = (2 * (a.steps - 1)) % NB;

		CHECK(cp_body_begin(cudaStreamPerThread));
		train_step(&m, x + (size_t)b0 * CP_N, x + (size_t)(b0 + 1) * CP_N, t + (size_t)b0 * CP_N,
			   t + (size_t)(b0 + 1) * CP_N, losses + 2 * (a.steps - 1));
		CHECK(cp_body_end("ptds.train", cudaStreamPerThread));
		CHECK(cp_body_begin(cudaStreamPerThread));
		eval_step(&m, ex, et, elosses + (size_t)NE * (a.steps - 1));
		CHECK(cp_body_end("ptds.eval", cudaStreamPerThread));
	}
	cp_result("per_thread", &a, t1 - t0, h);
	if (rt)
		kp_rt_close(rt);
	return 0;
}
