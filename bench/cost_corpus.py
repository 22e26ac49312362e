#!/usr/bin/env python3
"""cost_corpus.py - generate the cost model's validation corpus on a GPU.

    python3 bench/cost_corpus.py --out DIR [--workloads a,b,...] [--steps 8]
        [--iters 50] [--graph-trace] [--plain]

For each workload (PyTorch models built locally with random weights, no
downloads): the eager step traced with the PyTorch profiler (each step in
record_function("step"), synchronised after it, as a training loop's
loss.item() would), and, without the profiler, the measured times of

  eager_ms        one eager step, synchronised (median of --iters)
  graph_ms        the same step's capturable body as one CUDA graph
                  (torch.cuda.graph), back-to-back replays timed with CUDA
                  events: the replay period (the fastest of 9 batches of 30)
  graph_sync_ms   one replay, synchronised (median of --iters)

A training step's loss.item() (a device-to-host copy and a sync) is in the
traced "step" but outside the graph: it is the region's edge.

Hugging Face models take another path while a stream is capturing (the
attention mask is kept and another attention kernel runs; the eager path's
`torch.all(mask == 1)` host sync is skipped), so the graph would not run the
eager trace's kernels. For them the traced and timed eager steps run with
torch.cuda.is_current_stream_capturing() answering True: the trace then
holds the kernels the graph holds. The kernels per step of the trace and
per replay of the graph are counted (nk_eager, nk_graph) to show it.

--plain records what a user records: the Hugging Face workloads (GPT-2
small fp16 one token and batch 8 x 128, BERT-base fp16 batch 1 x 128)
traced and timed eagerly WITHOUT the capture trick, torch.profiler around
eager steps, so the trace holds the eager path (the mask check's host sync,
the eager attention kernel), while graph_ms is the graph kplan.torch
captures (graph_step.kplan_path: the library's eager path where the eager
step does not synchronise, BERT, and its capture path, as under
torch.cuda.graph, where it does, GPT-2's mask check, or with
KPLAN_TORCH_LIB_PATH=graph). Traces are named
<workload>_plain.json.gz, the rows go to DIR/ground_truth_plain.csv (the
corpus's columns, ready to append to its ground_truth.csv), the graph's
kernels are counted (--graph-trace is on) and the host syncs per traced
step logged. bench/cost_corpus_plain.sh runs it.

Writes DIR/<workload>.json.gz (the profiler trace), with --graph-trace
DIR/<workload>.graph.json.gz (five profiled replays, for studying in-graph
kernel times; not kept in the repository), DIR/ground_truth.csv (one row
per workload: workload,eager_ms,graph_ms,graph_sync_ms,nk_eager,
nk_graph,device,torch) and DIR/cost_corpus.log. One workload failing is reported and the
others go on.
"""
import argparse
import contextlib
import csv
import gzip
import os
import shutil
import statistics
import sys
import time
import traceback

from graph_step import hand_written_graph  # bench/, beside this file

# name: (family, builder args)
WORKLOADS = [
    "r18_fp32_b1", "r18_fp16_b16", "r50_fp32_b1", "mnv3s_fp32_b1", "vit_fp16_b1",
    "bert_fp16_b1", "bert_fp32_b8", "gpt2_fp16_t1", "gpt2_fp32_b4", "llama_fp16_t1",
    "mlp_fp32_b32", "mlp_train", "r18_train_b8", "gpt2_train",
]
# --plain: eager traces made the way users make them (no capture trick)
WORKLOADS_PLAIN = ["gpt2_fp16_t1", "bert_fp16_b1", "gpt2_fp16_b8"]
GT_FIELDS = ["workload", "eager_ms", "graph_ms", "graph_sync_ms", "nk_eager", "nk_graph",
             "device", "torch", "label"]


def log(msg):
    print(msg, flush=True)


@contextlib.contextmanager
def capture_path(on):
    """Python callers see a capturing stream (Hugging Face's capture path)."""
    import torch
    if not on:
        yield
        return
    saved = torch.cuda.is_current_stream_capturing
    torch.cuda.is_current_stream_capturing = lambda: True
    try:
        yield
    finally:
        torch.cuda.is_current_stream_capturing = saved


def trace_gz(path, n, label, body):
    """The PyTorch profiler's trace of n calls of body, each in
    record_function(label) and synchronised after it, gzipped at path."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            with record_function(label):
                body()
            torch.cuda.synchronize()
    plain = path[:-3]
    prof.export_chrome_trace(plain)
    with open(plain, "rb") as f, gzip.open(path, "wb", 9) as g:
        shutil.copyfileobj(f, g)
    os.remove(plain)


def kernels_per(path, label):
    """Median number of GPU ops (kernels, copies, memsets) launched inside
    each user annotation `label` of a profiler trace."""
    import json
    with gzip.open(path) as f:
        ev = json.load(f)["traceEvents"]
    rt = {}
    for e in ev:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "args" in e:
            rt[e["args"].get("correlation")] = e["ts"]
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
                   if e.get("cat") == "user_annotation" and e.get("name") == label)
    counts = [0] * len(spans)
    for e in ev:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        t = rt.get(e.get("args", {}).get("correlation"))
        if t is None:
            continue
        for i, (a, b) in enumerate(spans):
            if a <= t <= b:
                counts[i] += 1
                break
    return int(statistics.median(counts)) if counts else 0


def syncs_per(path, label):
    """Median number of cudaStreamSynchronize / cudaDeviceSynchronize calls
    inside each user annotation `label` of a profiler trace (the eager
    path's host waits; the sync after each step is outside it)."""
    import json
    with gzip.open(path) as f:
        ev = json.load(f)["traceEvents"]
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
                   if e.get("cat") == "user_annotation" and e.get("name") == label)
    counts = [0] * len(spans)
    for e in ev:
        if e.get("cat") != "cuda_runtime" or e.get("name") not in (
                "cudaStreamSynchronize", "cudaDeviceSynchronize"):
            continue
        for i, (a, b) in enumerate(spans):
            if a <= e["ts"] <= b:
                counts[i] += 1
                break
    return int(statistics.median(counts)) if counts else 0


def out_name(name, plain):
    """The workload's name in the corpus: <name>_plain for --plain."""
    return name + "_plain" if plain else name


def sgd_step(model, loss_fn, lr=1e-3):
    """One training step of model (SGD): fn(x, y) -> loss."""
    import torch
    opt = torch.optim.SGD(model.parameters(), lr=lr)

    def fn(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return fn


def build(name):
    """(fn, inputs, train, kind): fn(*inputs) is the capturable body; train
    tells whether the traced step also does loss.item()."""
    import torch
    torch.manual_seed(0)
    dev = "cuda"

    def rand(*shape, dtype=torch.float32):
        return torch.randn(*shape, device=dev).to(dtype)

    def ids(vocab, b, s):
        return torch.randint(0, vocab, (b, s), device=dev)

    if name.startswith(("r18", "r50", "mnv3s", "vit")):
        import torchvision
        m = {"r18": torchvision.models.resnet18, "r50": torchvision.models.resnet50,
             "mnv3s": torchvision.models.mobilenet_v3_small,
             "vit": torchvision.models.vit_b_16}[name.split("_")[0]]
        model = m(weights=None).to(dev)
        if name.endswith("_train_b8"):
            model.train()
            x, y = rand(8, 3, 224, 224), torch.randint(0, 1000, (8,), device=dev)
            return sgd_step(model, torch.nn.CrossEntropyLoss()), (x, y), True
        model.eval()
        dt = torch.float16 if "fp16" in name else torch.float32
        b = int(name.rsplit("_b", 1)[1])
        model = model.to(dt)
        x = rand(b, 3, 224, 224, dtype=dt)
        return (lambda x: model(x)), (x,), False
    if name.startswith("bert"):
        from transformers import BertConfig, BertModel
        cfg = BertConfig()
        dt = torch.float16 if "fp16" in name else torch.float32
        model = BertModel(cfg).to(dev, dt).eval()
        model.config.pad_token_id = None
        b, s = (1, 128) if name.endswith("b1") else (8, 64)
        return (lambda x: model(input_ids=x).last_hidden_state), (ids(cfg.vocab_size, b, s),), False
    if name.startswith("gpt2"):
        from transformers import GPT2Config, GPT2LMHeadModel
        if name == "gpt2_train":
            cfg = GPT2Config(n_layer=2)
            model = GPT2LMHeadModel(cfg).to(dev).train()
            opt = torch.optim.SGD(model.parameters(), lr=1e-4)
            x = ids(cfg.vocab_size, 4, 64)

            def fn(x):
                opt.zero_grad(set_to_none=True)
                loss = model(input_ids=x, labels=x, use_cache=False).loss
                loss.backward()
                opt.step()
                return loss
            return fn, (x,), True
        cfg = GPT2Config()
        dt = torch.float16 if "fp16" in name else torch.float32
        model = GPT2LMHeadModel(cfg).to(dev, dt).eval()
        b, s = {"t1": (1, 1), "b8": (8, 128)}.get(name.rsplit("_", 1)[1], (4, 32))
        return (lambda x: model(input_ids=x, use_cache=False).logits), \
            (ids(cfg.vocab_size, b, s),), False
    if name.startswith("llama"):
        from transformers import LlamaConfig, LlamaForCausalLM
        cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                          num_attention_heads=16, num_key_value_heads=16, vocab_size=32000,
                          max_position_embeddings=512)
        model = LlamaForCausalLM(cfg).to(dev, torch.float16).eval()
        return (lambda x: model(input_ids=x, use_cache=False).logits), \
            (ids(cfg.vocab_size, 1, 1),), False
    if name.startswith("mlp"):
        layers = []
        for _ in range(8):
            layers += [torch.nn.Linear(1024, 1024), torch.nn.ReLU()]
        model = torch.nn.Sequential(*layers[:-1]).to(dev)
        if name == "mlp_train":
            return sgd_step(model, torch.nn.MSELoss()), (rand(64, 1024), rand(64, 1024)), True
        model.eval()
        return (lambda x: model(x)), (rand(32, 1024),), False
    raise SystemExit("unknown workload %r" % name)


def replay_period_ms(g):
    """A graph's replay period in ms: the fastest of 9 batches of 30
    back-to-back replays, timed with CUDA events. The fastest, because a
    replay's period is fixed and what varies is disturbance (clocks
    ramping, the machine's other work)."""
    import torch
    per = []
    for _ in range(9):
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(30):
            g.replay()
        e1.record()
        e1.synchronize()
        per.append(e0.elapsed_time(e1) / 30)
    return min(per)


def one(name, a, rows):
    import torch
    t0 = time.time()
    fn, inputs, train = build(name)
    # the capture trick, except for --plain (the eager path, as users trace it)
    hf = name.startswith(("bert", "gpt2", "llama")) and not a.plain
    wname = out_name(name, a.plain)
    grad = torch.enable_grad() if train else torch.no_grad()
    with grad:
        def step():
            with capture_path(hf):
                out = fn(*inputs)
            if train:
                out.item()        # the edge: a DtoH copy and a sync
            return out
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        # eager, synchronised per step
        ts = []
        for _ in range(a.iters):
            s = time.perf_counter()
            step()
            torch.cuda.synchronize()
            ts.append(time.perf_counter() - s)
        eager_ms = statistics.median(ts) * 1e3
        # the trace
        path = os.path.join(a.out, wname + ".json.gz")
        trace_gz(path, a.steps, "step", step)
        nk_eager = kernels_per(path, "step")
        syncs = syncs_per(path, "step")
        # the graph: warm-up on a side stream, capture, replays
        # gstep keeps the static inputs; --plain: the graph kplan.torch captures
        gstep, g = hand_written_graph(fn, inputs, path="kplan" if a.plain else None)
        torch.cuda.synchronize()
        for _ in range(5):
            g.replay()
        torch.cuda.synchronize()
        ts = []
        for _ in range(a.iters):
            s = time.perf_counter()
            g.replay()
            torch.cuda.synchronize()
            ts.append(time.perf_counter() - s)
        graph_sync_ms = statistics.median(ts) * 1e3
        graph_ms = replay_period_ms(g)
        gpath_name = getattr(gstep, "path", None)
        nk_graph = 0
        if a.graph_trace:
            gpath = os.path.join(a.out, wname + ".graph.json.gz")
            trace_gz(gpath, 5, "replay", g.replay)
            nk_graph = kernels_per(gpath, "replay")
        del gstep, g
    rows.append({"workload": wname, "eager_ms": "%.4f" % eager_ms, "graph_ms": "%.4f" % graph_ms,
                 "graph_sync_ms": "%.4f" % graph_sync_ms, "nk_eager": nk_eager,
                 "nk_graph": nk_graph,
                 "device": torch.cuda.get_device_name(), "torch": torch.__version__})
    log("%-18s eager %8.3f ms  graph %8.3f ms (sync %8.3f)  %4.1fx  ops %d/%d  syncs %d"
        "  trace %6.0f kB  %.0f s%s" % (wname, eager_ms, graph_ms, graph_sync_ms,
                                        eager_ms / graph_ms, nk_eager, nk_graph, syncs,
                                        os.path.getsize(path) / 1024.0, time.time() - t0,
                                        "  path %s" % gpath_name if gpath_name else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--workloads", default=None,
                    help="comma-separated (default: all, or with --plain %s)"
                    % ",".join(WORKLOADS_PLAIN))
    ap.add_argument("--steps", type=int, default=8, help="traced steps per workload")
    ap.add_argument("--iters", type=int, default=50, help="timed steps per measurement")
    ap.add_argument("--graph-trace", action="store_true",
                    help="also trace five graph replays (DIR/<workload>.graph.json.gz)")
    ap.add_argument("--plain", action="store_true",
                    help="trace and time the eager steps without the capture trick "
                    "(<workload>_plain.json.gz, DIR/ground_truth_plain.csv)")
    a = ap.parse_args()
    if a.workloads is None:
        a.workloads = ",".join(WORKLOADS_PLAIN if a.plain else WORKLOADS)
    if a.plain:
        a.graph_trace = True   # the graph's kernel count is the evidence
    os.makedirs(a.out, exist_ok=True)
    import torch
    rows = []
    for name in a.workloads.split(","):
        try:
            one(name, a, rows)
        except Exception as exc:
            log("%-14s FAILED: %s" % (name, str(exc).strip().splitlines()[0] if str(exc).strip()
                                      else type(exc).__name__))
            traceback.print_exc(file=sys.stderr)
        torch.cuda.empty_cache()
    gt = "ground_truth_plain.csv" if a.plain else "ground_truth.csv"
    with open(os.path.join(a.out, gt), "w", newline="") as f:
        # --plain: the corpus's columns (label last), rows ready to append
        w = csv.DictWriter(f, fieldnames=GT_FIELDS if a.plain else GT_FIELDS[:-1],
                           extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)
    log("%d of %d workloads" % (len(rows), len(a.workloads.split(","))))
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
