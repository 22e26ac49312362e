// collector_graph.cu - the program builds its own CUDA graph by stream
// capture (NODES kernels), launches it REPLAYS times, each replay inside an
// NVTX range "step" (nvtx3, header-only), plus one eager launch after.
//
//   collector_graph NODES REPLAYS
#include <cstdio>
#include <cstdlib>
#include <nvtx3/nvToolsExt.h>

__global__ void node(float *p, int i)
{
	p[threadIdx.x] += (float)i;
}

int main(int argc, char **argv)
{
	int nodes = argc > 1 ? atoi(argv[1]) : 5, replays = argc > 2 ? atoi(argv[2]) : 20;
	cudaStream_t s;
	cudaGraph_t g;
	cudaGraphExec_t ge;
	float *p;

	cudaMalloc(&p, 128 * sizeof(float));
	cudaMemset(p, 0, 128 * sizeof(float));
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
	for (int i = 0; i < nodes; i++)
		node<<<1, 128, 0, s>>>(p, i);
	cudaStreamEndCapture(s, &g);
	if (cudaGraphInstantiate(&ge, g, 0) != cudaSuccess)
		return 1;
	nvtxDomainHandle_t dom = nvtxDomainCreateA("kplan-test");
	nvtxEventAttributes_t ea = {};
	ea.version = NVTX_VERSION;
	ea.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	ea.messageType = NVTX_MESSAGE_TYPE_ASCII;
	ea.message.ascii = "graph-ready";
	nvtxDomainMarkEx(dom, &ea);
	for (int r = 0; r < replays; r++) {
		nvtxRangePushA("step");
		cudaGraphLaunch(ge, s);
		cudaStreamSynchronize(s);
		nvtxRangePop();
	}
	node<<<1, 128, 0, s>>>(p, 99);
	cudaStreamSynchronize(s);
	cudaGraphExecDestroy(ge);
	cudaGraphDestroy(g);
	printf("nodes %d replays %d\n", nodes, replays);
	return 0;
}
