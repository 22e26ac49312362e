/* watch_calls.c - see watch_calls.h; the facts are in common/cuda_api.def. */
#include "watch_calls.h"

#include "../common/cuda_api.h"
#include "../include/kplan/runtime.h"

int kp__rt_watch_breaker(const char *fn)
{
	int cls = kp_cuda_api_class(fn);

	return kp_cuda_api_breaks(cls) ? cls : KP_API_OTHER;
}

int kp__rt_watch_allowed(int cls, unsigned flags)
{
	return (flags & KP_RT_WATCH_ALLOW_ALLOC) &&
	       (cls == KP_API_ALLOC || cls == KP_API_FREE || cls == KP_API_EVENT_QUERY);
}

const char *kp__rt_watch_offence(int cls)
{
	switch (cls) {
	case KP_API_SYNC:
		return ": a capture cannot wait for the GPU: move it out of the region";
	case KP_API_QUERY:
	case KP_API_EVENT_QUERY:
		return ": a capture cannot query a stream or an event: move it out of the region";
	case KP_API_ALLOC:
	case KP_API_FREE:
		return ": allocate and free outside the region (or use cudaMallocAsync / "
		       "cudaFreeAsync on %s)";
	case KP_API_REGISTER:
		return ": register host memory before the region";
	case KP_API_COPY:
		return " is synchronous: use cudaMemcpyAsync on %s (with pinned host memory)";
	case KP_API_MEMSET:
		return " is synchronous: use cudaMemsetAsync on %s";
	case KP_API_STREAM_CALLBACK:
		return ": a capture cannot hold a stream callback: use cudaLaunchHostFunc on %s";
	case KP_API_LIMIT:
		return ": set device limits before the region";
	case KP_API_CAPTURE_BEGIN:
		return ": the body starts a stream capture of its own: capture it outside the "
		       "region";
	default:
		return ": a capture cannot hold it: move it out of the region";
	}
}
