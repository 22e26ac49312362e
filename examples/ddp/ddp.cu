/*
 * ddp.cu - data-parallel MLP training, one process per GPU: each rank runs
 * the same 8-layer MLP (width 256, GELU) on its own batch of 16, and one
 * training step is forward, MSE loss, backward, an NCCL all-reduce (sum) of
 * each layer's gradients as soon as backward has produced them, and an SGD
 * update scaled by 1/ranks. 56 small kernels and 8 all-reduces per step, a
 * few microseconds of GPU work each: the eager step is bound by launch cost.
 *
 * NCCL is loaded at run time (dlopen libnccl.so.2, or $KPLAN_NCCL_LIB): the
 * example builds without NCCL's headers or library. The few types and
 * values it needs are declared below, as nccl.h defines them.
 *
 *   ex_ddp eager|runtime PLAN|graph|device [--ranks N] [--steps N]
 *          [--warmup N] [--sync-on-rank R]
 *
 * --ranks N forks N ranks, rank r on GPU r; rank 0 makes the NCCL unique id
 * and hands it to the others through a pipe opened before the fork (the
 * parent makes no CUDA call). Without --ranks, a launcher's RANK /
 * WORLD_SIZE / LOCAL_RANK select the rank and GPU, and the id travels
 * through the file named by EX_DDP_ID_FILE (rank 0 writes it; it must not
 * exist before the job starts); with neither, one rank in this process.
 *
 * Runtime mode: the whole step is region "ddp.step" (input and target
 * batches bound, slots 0 and 1), and the ranks agree on each graph through
 * kp_rt_set_agree: an all-reduce (min) of one int over the job's
 * communicator on a side stream. Graph mode captures the step once by hand
 * and launches it every step. --sync-on-rank R makes rank R wait for its
 * stream in the middle of the step: its watch objects, so every rank must
 * run the region eagerly (runtime mode; graph mode refuses it).
 *
 * Every rank prints "RESULT ddp MODE rank R ranks N steps S us_per_step T
 * hash H loss L": H hashes the weights after the run, equal on every rank
 * and in every mode; L is the rank's loss summed over the run (its own data:
 * it differs between ranks), equal in every mode (%.9g prints a float
 * exactly); us_per_step is timed after the --warmup steps. Runtime mode adds "STATS ddp rank R ..." (the
 * runtime's counters), graph mode "BODY ddp rank R replay_us_per_step T".
 */
#include "../excommon.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define D 256           /* layer width */
#define B 16            /* batch per rank */
#define NL 8            /* layers */
#define NIN 16          /* input batches per rank, used round-robin */
#define NP (D * D + D)  /* parameters of one layer: W (in x out, row-major), then b */
#define TILE 16
#define LR 0.01f

/* ------------------------------------------------------------------------ */
/* NCCL, loaded at run time (values as in nccl.h) */

typedef struct { char internal[128]; } nccl_id;   /* ncclUniqueId */
typedef struct nccl_comm_s *nccl_comm;            /* ncclComm_t */
enum {
	NCCL_SUCCESS = 0,       /* ncclResult_t */
	NCCL_INT32 = 2,         /* ncclDataType_t */
	NCCL_FLOAT32 = 7,
	NCCL_SUM = 0,           /* ncclRedOp_t */
	NCCL_MIN = 3,
};

struct nccl {
	void *lib;
	const char *path;
	int (*get_unique_id)(nccl_id *id);
	int (*comm_init_rank)(nccl_comm *comm, int nranks, nccl_id id, int rank);
	int (*all_reduce)(const void *send, void *recv, size_t count, int type, int op,
			  nccl_comm comm, cudaStream_t stream);
	int (*comm_destroy)(nccl_comm comm);
	const char *(*error_string)(int rc);
};

static struct nccl nc;

#define NC(x) do { int r_ = (x); if (r_ != NCCL_SUCCESS) { \
	fprintf(stderr, "%s:%d: %s: nccl error %d: %s\n", __FILE__, __LINE__, #x, r_, \
		nc.error_string(r_)); \
	exit(1); } } while (0)

/* dlopen NCCL; exit 2 ("skip") naming the library when it is not there. */
static void nccl_load(void)
{
	const char *p = getenv("KPLAN_NCCL_LIB");
	struct { const char *name; void **fn; } syms[] = {
		{ "ncclGetUniqueId", (void **)&nc.get_unique_id },
		{ "ncclCommInitRank", (void **)&nc.comm_init_rank },
		{ "ncclAllReduce", (void **)&nc.all_reduce },
		{ "ncclCommDestroy", (void **)&nc.comm_destroy },
		{ "ncclGetErrorString", (void **)&nc.error_string },
	};
	size_t i;

	nc.path = p && *p ? p : "libnccl.so.2";
	nc.lib = dlopen(nc.path, RTLD_NOW | RTLD_LOCAL);
	if (!nc.lib) {
		fprintf(stderr, "ex_ddp: cannot load NCCL (%s): %s; set KPLAN_NCCL_LIB to its path "
			"or add its directory to LD_LIBRARY_PATH (skip)\n", nc.path, dlerror());
		exit(2);
	}
	for (i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		*syms[i].fn = dlsym(nc.lib, syms[i].name);
		if (!*syms[i].fn) {
			fprintf(stderr, "ex_ddp: %s has no %s: not an NCCL 2 library (skip)\n",
				nc.path, syms[i].name);
			exit(2);
		}
	}
}

/* ------------------------------------------------------------------------ */
/* kernels: fixed-order arithmetic only (no atomics), so every mode and every
 * rank computes the same bits */

/*
 * C[M x N] (row-major) = A . B with A(i,k) = A[i*sam + k*sak] and B(k,j) =
 * Bm[k*sbk + j*sbn]: the strides give the forward product and both
 * transposed products of backward. 16 x 16 tiles through shared memory.
 */
__global__ void gemm(const float *A, int sam, int sak, const float *Bm, int sbk, int sbn,
		     float *C, int M, int N, int K)
{
	__shared__ float as[TILE][TILE + 1], bs[TILE][TILE + 1];
	int tx = threadIdx.x, ty = threadIdx.y;
	int i = blockIdx.y * TILE + ty, j = blockIdx.x * TILE + tx;
	float acc = 0;
	int k0, k;

	for (k0 = 0; k0 < K; k0 += TILE) {
		int ka = k0 + tx, kb = k0 + ty;

		as[ty][tx] = i < M && ka < K ? A[(size_t)i * sam + (size_t)ka * sak] : 0.0f;
		bs[ty][tx] = kb < K && j < N ? Bm[(size_t)kb * sbk + (size_t)j * sbn] : 0.0f;
		__syncthreads();
		for (k = 0; k < TILE; k++)
			acc += as[ty][k] * bs[k][tx];
		__syncthreads();
	}
	if (i < M && j < N)
		C[(size_t)i * N + j] = acc;
}

#define GELU_K 0.7978845608f
#define GELU_C 0.044715f

/* z += b (kept for backward); a = gelu(z) */
__global__ void bias_gelu(float *z, const float *b, float *a, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n) {
		float v = z[i] + b[i % D];

		z[i] = v;
		a[i] = 0.5f * v * (1.0f + tanhf(GELU_K * (v + GELU_C * v * v * v)));
	}
}

/* dz = da * gelu'(z) */
__global__ void gelu_back(const float *da, const float *z, float *dz, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n) {
		float v = z[i];
		float t = tanhf(GELU_K * (v + GELU_C * v * v * v));
		float d = 0.5f * (1.0f + t) +
			  0.5f * v * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_C * v * v);

		dz[i] = da[i] * d;
	}
}

/* db[j] = sum over the batch of dz[i][j], in row order */
__global__ void bias_grad(const float *dz, float *db)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	float s = 0;
	int i;

	if (j >= D)
		return;
	for (i = 0; i < B; i++)
		s += dz[i * D + j];
	db[j] = s;
}

/*
 * MSE against the targets: dy = (y - t) / B, and the rank's loss summed
 * over the run (*loss += 0.5 |y - t|^2 / B). One block of 256, fixed tree.
 */
__global__ void loss_grad(const float *y, const float *t, float *dy, float *loss, int n)
{
	__shared__ float red[256];
	float s = 0;
	int i;

	for (i = threadIdx.x; i < n; i += blockDim.x) {
		float d = y[i] - t[i];

		dy[i] = d * (1.0f / B);
		s += d * d;
	}
	ex_block_sum(red, s);
	if (threadIdx.x == 0)
		*loss += 0.5f * red[0] * (1.0f / B);
}

/* p -= step * g, step = lr / ranks (g is the sum over the ranks) */
__global__ void sgd(float *p, const float *g, int n, float step)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		p[i] -= step * g[i];
}

/* ------------------------------------------------------------------------ */
/* the model and one training step */

struct net {
	float *params, *grads;  /* NL * NP each: layer l at l * NP (W, then b) */
	float *z[NL];           /* layer l's pre-activation (bias added), B x D */
	float *a[NL];           /* layer l's output gelu(z), B x D */
	float *da[2];           /* gradient w.r.t. layer l's output: da[l & 1] */
	float *dz;              /* gradient w.r.t. a pre-activation */
	float *loss;            /* the rank's loss summed over the run */
	nccl_comm comm;
	int rank, ranks;
	int sync_rank;          /* --sync-on-rank: this rank waits inside the step */
};

static void mm(const float *A, int sam, int sak, const float *Bm, int sbk, int sbn, float *C,
	       int M, int N, int K, cudaStream_t s)
{
	dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE), block(TILE, TILE);

	gemm<<<grid, block, 0, s>>>(A, sam, sak, Bm, sbk, sbn, C, M, N, K);
}

/* one step on batch x with targets t: every launch goes to s */
static void step(struct net *m, cudaStream_t s, const float *x, const float *t)
{
	const int n = B * D, nb = (B * D + 255) / 256;
	int l;

	for (l = 0; l < NL; l++) {
		const float *in = l ? m->a[l - 1] : x;
		const float *w = m->params + (size_t)l * NP;

		mm(in, D, 1, w, D, 1, m->z[l], B, D, D, s);              /* z = in . W */
		bias_gelu<<<nb, 256, 0, s>>>(m->z[l], w + D * D, m->a[l], n);
	}
	if (m->rank == m->sync_rank && cudaStreamSynchronize(s) != cudaSuccess)
		(void)cudaGetLastError();  /* under a capture: invalidated, the runtime runs it again */
	loss_grad<<<1, 256, 0, s>>>(m->a[NL - 1], t, m->da[(NL - 1) & 1], m->loss, n);
	for (l = NL - 1; l >= 0; l--) {
		const float *in = l ? m->a[l - 1] : x;
		float *w = m->params + (size_t)l * NP, *g = m->grads + (size_t)l * NP;

		gelu_back<<<nb, 256, 0, s>>>(m->da[l & 1], m->z[l], m->dz, n);
		mm(in, 1, D, m->dz, D, 1, g, D, D, B, s);                /* dW = in^T . dz */
		bias_grad<<<(D + 127) / 128, 128, 0, s>>>(m->dz, g + D * D);
		if (l)                                                   /* d in = dz . W^T */
			mm(m->dz, D, 1, w, 1, D, m->da[(l - 1) & 1], B, D, D, s);
		NC(nc.all_reduce(g, g, NP, NCCL_FLOAT32, NCCL_SUM, m->comm, s));
		sgd<<<(NP + 255) / 256, 256, 0, s>>>(w, g, NP, LR / m->ranks);
	}
}

static float *dalloc(size_t n)
{
	float *p;

	CK(cudaMalloc(&p, n * sizeof(float)));
	return p;
}

/* ------------------------------------------------------------------------ */
/* the ranks' agreement (kp_rt_set_agree): all-reduce min of one int */

struct agree {
	nccl_comm comm;
	cudaStream_t s;         /* a side stream: the region's stream may be mid-step */
	int *dev, *host;        /* host: pinned */
};

static int agree_min(void *ctx, int ok)
{
	struct agree *g = (struct agree *)ctx;

	*g->host = ok;
	if (cudaMemcpyAsync(g->dev, g->host, sizeof(int), cudaMemcpyHostToDevice, g->s) ||
	    nc.all_reduce(g->dev, g->dev, 1, NCCL_INT32, NCCL_MIN, g->comm, g->s) != NCCL_SUCCESS ||
	    cudaMemcpyAsync(g->host, g->dev, sizeof(int), cudaMemcpyDeviceToHost, g->s) ||
	    cudaStreamSynchronize(g->s))
		return -1;
	return *g->host;
}

/* ------------------------------------------------------------------------ */
/* the command line and the ranks */

struct opts {
	struct ex_args a;
	int ranks;              /* --ranks: fork this many; 0: launcher or one rank */
	int warmup;             /* steps before the timed ones */
	int sync_rank;          /* --sync-on-rank; -1: none */
};

static void usage(const char *prog)
{
	fprintf(stderr, "usage: %s eager|runtime [PLAN]|graph|device [--ranks N] [--steps N] "
		"[--warmup N] [--sync-on-rank R]\n", prog);
	exit(64);
}

static int num_arg(const char *prog, const char *s, int min)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*end || end == s || v < min || v > 1 << 20)
		usage(prog);
	return (int)v;
}

static void parse(int argc, char **argv, struct opts *o)
{
	int i;

	memset(o, 0, sizeof(*o));
	o->a.steps = 1000;
	o->warmup = 20;
	o->sync_rank = -1;
	if (argc < 2)
		usage(argv[0]);
	if (!strcmp(argv[1], "device")) {
		char *dev[] = { argv[0], argv[1], NULL };

		ex_parse(2, dev, &o->a, 0);   /* prints the GPU and exits */
	}
	if (!strcmp(argv[1], "eager"))
		o->a.mode = EX_EAGER;
	else if (!strcmp(argv[1], "runtime"))
		o->a.mode = EX_RUNTIME;
	else if (!strcmp(argv[1], "graph"))
		o->a.mode = EX_GRAPH;
	else
		usage(argv[0]);
	for (i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--steps") && i + 1 < argc)
			o->a.steps = num_arg(argv[0], argv[++i], 1);
		else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
			o->warmup = num_arg(argv[0], argv[++i], 0);
		else if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
			o->ranks = num_arg(argv[0], argv[++i], 1);
		else if (!strcmp(argv[i], "--sync-on-rank") && i + 1 < argc)
			o->sync_rank = num_arg(argv[0], argv[++i], 0);
		else if (argv[i][0] != '-' && !o->a.plan && o->a.mode == EX_RUNTIME)
			o->a.plan = argv[i];
		else
			usage(argv[0]);
	}
	if (o->warmup >= o->a.steps) {
		fprintf(stderr, "ex_ddp: --warmup %d leaves no timed step of %d\n", o->warmup,
			o->a.steps);
		exit(64);
	}
	if (o->sync_rank >= 0 && o->a.mode == EX_GRAPH) {
		fprintf(stderr, "ex_ddp: --sync-on-rank cannot be captured by hand (graph mode); "
			"it is for eager and runtime\n");
		exit(64);
	}
}

/* where the NCCL unique id comes from */
struct idsrc {
	int rd, wr;             /* --ranks: the pipe (rank 0 writes ranks - 1 copies) */
	const char *file;       /* launcher: EX_DDP_ID_FILE */
};

static int full_io(int fd, void *buf, size_t n, int wr)
{
	char *p = (char *)buf;

	while (n) {
		ssize_t k = wr ? write(fd, p, n) : read(fd, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static void id_share(const struct idsrc *src, int rank, int ranks, nccl_id *id)
{
	int i;

	if (ranks == 1) {
		NC(nc.get_unique_id(id));
		return;
	}
	if (src->file) {
		char tmp[4096];
		FILE *f;

		if (rank == 0) {
			NC(nc.get_unique_id(id));
			snprintf(tmp, sizeof(tmp), "%s.%d.tmp", src->file, (int)getpid());
			if (!(f = fopen(tmp, "wb")) || fwrite(id, sizeof(*id), 1, f) != 1 ||
			    fclose(f) || rename(tmp, src->file)) {
				fprintf(stderr, "ex_ddp: cannot write the NCCL id to %s: %s\n",
					src->file, strerror(errno));
				exit(1);
			}
			return;
		}
		for (i = 0; i < 12000; i++) {   /* up to 120 s for rank 0 */
			if ((f = fopen(src->file, "rb"))) {
				size_t k = fread(id, sizeof(*id), 1, f);

				fclose(f);
				if (k == 1)
					return;
			}
			usleep(10000);
		}
		fprintf(stderr, "ex_ddp: rank %d: no NCCL id in %s after 120 s\n", rank, src->file);
		exit(1);
	}
	if (rank == 0) {
		NC(nc.get_unique_id(id));
		for (i = 1; i < ranks; i++) {     /* 128 bytes: each write is atomic */
			if (full_io(src->wr, id, sizeof(*id), 1)) {
				fprintf(stderr, "ex_ddp: cannot pass the NCCL id: %s\n", strerror(errno));
				exit(1);
			}
		}
		return;
	}
	if (full_io(src->rd, id, sizeof(*id), 0)) {
		fprintf(stderr, "ex_ddp: rank %d: no NCCL id from rank 0 (it failed?)\n", rank);
		exit(1);
	}
}

/* ------------------------------------------------------------------------ */
/* one rank */

static int rank_main(const struct opts *o, int rank, int ranks, int dev,
		     const struct idsrc *src)
{
	const struct ex_args *a = &o->a;
	struct net m;
	struct agree ag;
	cudaStream_t s;
	float *inputs, *targets, *xs = NULL, *ts = NULL;
	cudaGraph_t g = NULL;
	cudaGraphExec_t ge = NULL;
	nccl_id id;
	kp_rt *rt;
	int64_t t0 = 0, t1;
	uint64_t h;
	float loss;
	int ndev, l, t;

	setvbuf(stdout, NULL, _IOLBF, 0);   /* one write per line: ranks share the pipe */
	CK(cudaGetDeviceCount(&ndev));
	if (dev >= ndev) {
		fprintf(stderr, "ex_ddp: rank %d wants GPU %d, %d visible (skip)\n", rank, dev, ndev);
		return 2;
	}
	CK(cudaSetDevice(dev));
	id_share(src, rank, ranks, &id);
	memset(&m, 0, sizeof(m));
	m.rank = rank;
	m.ranks = ranks;
	m.sync_rank = o->sync_rank;
	NC(nc.comm_init_rank(&m.comm, ranks, id, rank));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

	/* the same weights on every rank, each rank's own data */
	m.params = dalloc((size_t)NL * NP);
	m.grads = dalloc((size_t)NL * NP);
	for (l = 0; l < NL; l++) {
		ex_fill(m.params + (size_t)l * NP, (size_t)D * D, 10 + l, 0.15f, 0);
		ex_fill(m.params + (size_t)l * NP + D * D, D, 100 + l, 0.05f, 0);
		m.z[l] = dalloc(B * D);
		m.a[l] = dalloc(B * D);
	}
	m.da[0] = dalloc(B * D);
	m.da[1] = dalloc(B * D);
	m.dz = dalloc(B * D);
	m.loss = dalloc(1);
	inputs = dalloc((size_t)NIN * B * D);
	targets = dalloc((size_t)NIN * B * D);
	ex_fill(inputs, (size_t)NIN * B * D, 1000 + rank, 1.0f, 0);
	ex_fill(targets, (size_t)NIN * B * D, 2000 + rank, 0.5f, 0.2f);
	CK(cudaMemset(m.grads, 0, (size_t)NL * NP * sizeof(float)));
	CK(cudaMemset(m.loss, 0, sizeof(float)));

	/* the agreement's stream and buffers; NCCL connects before any capture */
	memset(&ag, 0, sizeof(ag));
	ag.comm = m.comm;
	CK(cudaStreamCreateWithFlags(&ag.s, cudaStreamNonBlocking));
	CK(cudaMalloc(&ag.dev, sizeof(int)));
	CK(cudaMallocHost(&ag.host, sizeof(int)));
	CK(cudaDeviceSynchronize());
	NC(nc.all_reduce(m.grads, m.grads, NP, NCCL_FLOAT32, NCCL_SUM, m.comm, s));   /* zeros */
	CK(cudaStreamSynchronize(s));
	if (agree_min(&ag, 1) != 1) {
		fprintf(stderr, "ex_ddp: rank %d: the all-reduce of one int failed\n", rank);
		return 1;
	}

	rt = ex_open_rt(a);
	if (rt)
		kp_rt_set_agree(rt, agree_min, &ag);
	for (t = 0; t < a->steps; t++) {
		const float *x = inputs + (size_t)(t % NIN) * B * D;
		const float *y = targets + (size_t)(t % NIN) * B * D;

		if (t == o->warmup) {
			CK(cudaStreamSynchronize(s));
			t0 = ex_now_ns();
		}
		if (a->mode == EX_EAGER) {
			step(&m, s, x, y);
		} else if (a->mode == EX_RUNTIME) {
			kp_region r;

			do {
				if (kp_region_begin(rt, &r, "ddp.step", 0, s))
					step(&m, s, x, y);
				kp_rt_bind(rt, &r, 0, x, B * D * sizeof(float), 0);
				kp_rt_bind(rt, &r, 1, y, B * D * sizeof(float), 0);
			} while (kp_region_end(rt, &r) > 0);
		} else {
			if (!ge) {
				xs = dalloc(B * D);
				ts = dalloc(B * D);
				CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
				step(&m, s, xs, ts);
				CK(cudaStreamEndCapture(s, &g));
				CK(cudaGraphInstantiate(&ge, g, 0));
			}
			CK(cudaMemcpyAsync(xs, x, B * D * sizeof(float), cudaMemcpyDeviceToDevice, s));
			CK(cudaMemcpyAsync(ts, y, B * D * sizeof(float), cudaMemcpyDeviceToDevice, s));
			CK(cudaGraphLaunch(ge, s));
		}
	}
	CK(cudaStreamSynchronize(s));
	t1 = ex_now_ns();
	CK(cudaGetLastError());
	CK(cudaMemcpy(&loss, m.loss, sizeof(float), cudaMemcpyDeviceToHost));
	h = ex_dev_hash(m.params, (size_t)NL * NP * sizeof(float), 0xcbf29ce484222325ULL);
	if (rt) {
		struct kp_rt_stats st;

		kp_rt_get_stats(rt, &st);
		printf("STATS ddp rank %d calls %llu replays %llu captures %llu eager %llu "
		       "agreements %llu would_break %llu capture_failed %llu\n", rank,
		       (unsigned long long)st.calls, (unsigned long long)st.replays,
		       (unsigned long long)st.captures, (unsigned long long)st.eager,
		       (unsigned long long)st.agreements,
		       (unsigned long long)st.eager_by_reason[KP_RT_R_WOULD_BREAK],
		       (unsigned long long)st.eager_by_reason[KP_RT_R_CAPTURE]);
	}
	if (ge)     /* 273 more steps on every rank together, after the hash */
		printf("BODY ddp rank %d replay_us_per_step %.3f\n", rank, ex_replay_us(ge, s));
	printf("RESULT ddp %s rank %d ranks %d steps %d us_per_step %.3f hash %016llx loss %.9g\n",
	       ex_mode_name[a->mode], rank, ranks, a->steps,
	       (t1 - t0) / 1e3 / (a->steps - o->warmup), (unsigned long long)h, loss);
	kp_rt_close(rt);
	if (ge) {
		cudaGraphExecDestroy(ge);
		cudaGraphDestroy(g);
	}
	CK(cudaDeviceSynchronize());
	nc.comm_destroy(m.comm);
	return 0;
}

static int env_int(const char *name, int def)
{
	const char *v = getenv(name);

	return v && *v ? atoi(v) : def;
}

/* --ranks N: fork the ranks, wait for them; one failing stops the others */
static int fork_ranks(const struct opts *o)
{
	pid_t pid[64];
	int done[64] = { 0 };
	struct idsrc src = { -1, -1, NULL };
	int fd[2], r, n = o->ranks, rc = 0, left;

	if (n > 64) {
		fprintf(stderr, "ex_ddp: --ranks %d: at most 64\n", n);
		return 64;
	}
	if (pipe(fd)) {
		perror("ex_ddp: pipe");
		return 1;
	}
	fflush(stdout);
	fflush(stderr);
	for (r = 0; r < n; r++) {
		pid[r] = fork();
		if (pid[r] < 0) {
			perror("ex_ddp: fork");
			n = r;
			rc = 1;
			break;
		}
		if (pid[r] == 0) {
			char v[16];

			/* the collector (kplan record) names each run's rank from these */
			snprintf(v, sizeof(v), "%d", r);
			setenv("RANK", v, 1);
			setenv("LOCAL_RANK", v, 1);
			snprintf(v, sizeof(v), "%d", n);
			setenv("WORLD_SIZE", v, 1);
			if (r == 0) {
				close(fd[0]);
				src.wr = fd[1];
			} else {
				close(fd[1]);
				src.rd = fd[0];
			}
			exit(rank_main(o, r, n, r, &src));
		}
	}
	close(fd[0]);
	close(fd[1]);
	for (left = n; left > 0; left--) {
		int st, code;
		pid_t p = wait(&st);

		if (p < 0)
			break;
		for (r = 0; r < n; r++)
			done[r] |= pid[r] == p;
		code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (code && !rc) {
			/* the others would wait for it in a collective forever */
			rc = code;
			for (r = 0; r < n; r++) {
				if (!done[r])
					kill(pid[r], SIGTERM);
			}
		}
	}
	return rc;
}

int main(int argc, char **argv)
{
	struct opts o;

	parse(argc, argv, &o);
	nccl_load();
	if (o.ranks)
		return fork_ranks(&o);
	if (getenv("RANK") && getenv("WORLD_SIZE")) {
		struct idsrc src = { -1, -1, getenv("EX_DDP_ID_FILE") };
		int rank = env_int("RANK", 0), ranks = env_int("WORLD_SIZE", 1);

		if (ranks < 1 || rank < 0 || rank >= ranks) {
			fprintf(stderr, "ex_ddp: RANK %d of WORLD_SIZE %d\n", rank, ranks);
			return 64;
		}
		if (ranks > 1 && (!src.file || !*src.file)) {
			fprintf(stderr, "ex_ddp: RANK and WORLD_SIZE set: EX_DDP_ID_FILE must name "
				"the file through which rank 0 passes the NCCL id\n");
			return 64;
		}
		return rank_main(&o, rank, ranks, env_int("LOCAL_RANK", rank), &src);
	}
	{
		struct idsrc src = { -1, -1, NULL };

		return rank_main(&o, 0, 1, 0, &src);
	}
}
