#!/usr/bin/env python3
"""gen_traces.py - random PyTorch-profiler-style Chrome traces for the pipeline
fuzz (tests/fuzz/pipeline.sh): valid JSON with hostile values - zero,
negative and huge durations and timestamps, legal-but-extreme launch shapes,
duplicate or missing correlation ids, flows without events, kernels on
several devices and streams, blockers (syncs, mallocs), shuffled event order.

usage: gen_traces.py OUTDIR COUNT SEED
"""
import json, random, sys, os
out = sys.argv[1]; count = int(sys.argv[2]); seed = int(sys.argv[3])
random.seed(seed)
os.makedirs(out, exist_ok=True)
names = ["void k%d<float>(float*, int)" % i for i in range(6)] + ["gemm", "", "a" * 3000, "x\u00e9\u4e2d", "void f(int) [clone .cold]"]
def ts(): 
    r = random.random()
    if r < 0.05: return random.choice([0, -1.5, 1e15, 4446475346144.640, 1e-3])
    return round(random.uniform(1000, 1000 + random.choice([50, 500, 5000, 50000])), random.choice([0, 3, 6]))
def stepped(n):
    """Repeated steps of one kernel sequence, launch-bound (the GPU waits for
    the CPU), with perturbations: blockers, a changed launch shape, a missing
    or extra kernel, nested annotations, a second stream, odd names."""
    ev = []
    corr = 1
    m = random.choice([1, 2, 3, 5, 8, 20])
    seq = [(random.choice(names[:6] if random.random() < 0.9 else names),
            random.choice([[80, 1, 1], [1, 1, 1], [2147483647, 65535, 65535], [0, 1, 1]]),
            random.choice([[256, 1, 1], [1024, 1, 1], [0, 0, 0]]),
            random.choice([1, 2, 3, 0.5, 0, 500])) for _ in range(m)]
    steps = random.choice([1, 2, 5, 12, 40, 100])
    t = 1000.0
    label = random.choice(["step", "ProfilerStep#1", "decode", "%", "a]b", " sp ", "-", ""])
    for s_ in range(steps):
        t0 = t
        body = list(seq)
        r = random.random()
        if r < 0.1 and body: body.pop(random.randrange(len(body)))
        elif r < 0.2: body.append(body[0] if body else seq[0])
        elif r < 0.3 and body:
            k = random.randrange(len(body)); body[k] = (body[k][0], [7, 7, 7], body[k][2], body[k][3])
        for (nm, grid, block, dur) in body:
            api = "cudaLaunchKernel" if random.random() < 0.985 else random.choice(["cuLaunchKernel", "cudaStreamSynchronize", "cudaMalloc", "cudaFree", "cudaMemcpy", "cudaLaunchHostFunc", "cudaStreamWaitEvent"])
            stream = 7 if random.random() < 0.99 else 13
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": api, "pid": 400, "tid": 400, "ts": round(t, 3), "dur": 4, "args": {"correlation": corr}})
            kt = t + random.choice([4.5, 5, 6, 3])
            ev.append({"ph": "X", "cat": "kernel", "name": nm, "pid": 0, "tid": stream, "ts": round(kt, 3), "dur": dur,
                       "args": {"device": 0, "context": 1, "stream": stream, "correlation": corr, "registers per thread": 32, "shared memory": 0, "grid": grid, "block": block}})
            if random.random() < 0.05:
                ev.append({"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": stream, "ts": round(kt + dur + 0.1, 3), "dur": 0.5, "args": {"device": 0, "context": 1, "stream": stream, "correlation": corr, "bytes": 256}})
            ev.append({"ph": "s", "id": corr, "pid": 400, "tid": 400, "ts": round(t, 3), "cat": "ac2g", "name": "ac2g"})
            ev.append({"ph": "f", "id": corr, "pid": 0, "tid": stream, "ts": round(kt, 3), "cat": "ac2g", "name": "ac2g", "bp": "e"})
            corr += 1
            t += random.choice([5, 6, 8, 20])
        ev.append({"ph": "X", "cat": "user_annotation", "name": label, "pid": 400, "tid": 400, "ts": round(t0 - 1, 3), "dur": round(t - t0 + 2, 3)})
        if random.random() < 0.2:
            ev.append({"ph": "X", "cat": "user_annotation", "name": "inner", "pid": 400, "tid": 400, "ts": round(t0, 3), "dur": round((t - t0) / 2, 3)})
        ev.append({"ph": "X", "cat": "gpu_user_annotation", "name": label, "pid": 0, "tid": 7, "ts": round(t0 + 4, 3), "dur": round(t - t0, 3)})
        t += random.choice([10, 50, 1000])
    if random.random() < 0.2: random.shuffle(ev)
    doc = {"schemaVersion": 1, "traceEvents": ev, "cuda_driver_version": 13000, "cuda_runtime_version": 13000,
           "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "computeMajor": 9, "computeMinor": 0, "numSms": 132}]}
    json.dump(doc, open("%s/s%03d.json" % (out, n), "w"))

for n in range(count):
    if n % 2:
        stepped(n)
        continue
    ev = []
    corr = 1
    nk = random.choice([0, 1, 2, 5, 30, 200, 800])
    t = 1000.0
    steps = random.choice([0, 1, 3, 10])
    for s in range(steps):
        st = 1000 + s * 1000 + random.uniform(-50, 50)
        d = random.choice([900, 1000, 0, -5, 1e6])
        ev.append({"ph": "X", "cat": "user_annotation", "name": random.choice(["step", "step", "fwd", "ProfilerStep#%d" % s]), "pid": 400, "tid": random.choice([400, 401]), "ts": st, "dur": d})
        if random.random() < 0.7:
            ev.append({"ph": "X", "cat": "gpu_user_annotation", "name": "step", "pid": 0, "tid": 7, "ts": st + 5, "dur": d})
    for i in range(nk):
        t += random.choice([0.5, 2, 5, 20, 0, -1])
        stream = random.choice([7, 7, 7, 13, 0])
        c = corr if random.random() > 0.05 else random.choice([corr - 1, 0, 1])
        corr += 1
        api_t = t - random.choice([0, 1, 3, 10, -2])
        ev.append({"ph": "X", "cat": random.choice(["cuda_runtime"] * 8 + ["cuda_driver"]), "name": random.choice(["cudaLaunchKernel", "cuLaunchKernel", "cudaStreamSynchronize", "cudaMalloc", "cudaMemcpyAsync", "cudaGraphLaunch", "cudaEventRecord", "cudaStreamWaitEvent", "cudaFree", "cudaDeviceSynchronize"] if random.random() < 0.3 else ["cudaLaunchKernel"]), "pid": 400, "tid": random.choice([400, 401]), "ts": api_t, "dur": random.choice([3, 4, 0.5, 100])  , "args": {"correlation": c, "External id": i}})
        if random.random() < 0.1:
            ev.append({"ph": "X", "cat": random.choice(["gpu_memcpy", "gpu_memset"]), "name": random.choice(["Memcpy HtoD (Pageable -> Device)", "Memset (Device)", "Memcpy DtoH (Device -> Pinned)", "Memcpy weird"]), "pid": 0, "tid": stream, "ts": t, "dur": random.choice([1, 0, 5]), "args": {"device": 0, "context": 1, "stream": stream, "correlation": c, "bytes": random.choice([0, 4, 1 << 30])}})
            continue
        k = {"ph": "X", "cat": "kernel", "name": random.choice(names[:6]) if random.random() < 0.9 else random.choice(names), "pid": 0, "tid": stream, "ts": t, "dur": random.choice([1, 2, 0.5, 0, 40, 1000]),
             "args": {"device": random.choice([0, 0, 0, 1]), "context": 1, "stream": stream, "correlation": c, "registers per thread": random.choice([32, 0, 255]), "shared memory": random.choice([0, 1024, 1 << 20]),
                      "grid": random.choice([[1, 1, 1], [80, 2, 1], [0, 0, 0], [2147483647, 65535, 65535]]), "block": random.choice([[256, 1, 1], [1024, 1, 1], [32, 2, 1]])}}
        if random.random() < 0.03: del k["args"]["grid"]
        ev.append(k)
        if random.random() < 0.8:
            ev.append({"ph": "s", "id": c, "pid": 400, "tid": 400, "ts": api_t, "cat": "ac2g", "name": "ac2g"})
            ev.append({"ph": "f", "id": c, "pid": 0, "tid": stream, "ts": t, "cat": "ac2g", "name": "ac2g", "bp": "e"})
        t += k["dur"] if isinstance(k["dur"], (int, float)) else 0
        if random.random() < 0.05:
            ev.append({"ph": "X", "cat": "cuda_sync", "name": random.choice(["Stream Synchronize", "Event Sync", "Context Sync"]), "pid": 0, "tid": stream, "ts": t, "dur": 1, "args": {"device": 0, "context": 1, "stream": stream, "correlation": corr, "event": 0}})
    if random.random() < 0.3: random.shuffle(ev)
    doc = {"schemaVersion": 1, "traceEvents": ev}
    if random.random() < 0.7:
        doc["deviceProperties"] = [{"id": 0, "name": "NVIDIA H200", "computeMajor": 9, "computeMinor": 0, "numSms": 132}]
    json.dump(doc, open("%s/t%03d.json" % (out, n), "w"))
