"""kplan.torch with and without fusion of pointwise ATen chains, against eager.

    PYTHONPATH=python python3 bench/torch_fusion.py [--workloads gpt2,mlp,bert] [--compile gpt2]

Workloads (random weights from transformers config classes, nothing
downloaded; fp16, batch 1, torch.no_grad):
  gpt2   GPT-2 small (GPT2Config(), 12 layers), one token, logits
  mlp    GPT-2's MLP block: c_fc, gelu_new (8 ATen ops), c_proj, residual; 128 tokens
  bert   BERT-base (BertConfig()), 128 tokens, last hidden state
  llama  Llama-style decoder (12 layers, d 1024, GQA), StaticCache decode, ms/token
  train  GPT-2 (4 layers) training step, batch 4 x 128, AdamW(capturable=True):
         fp32, a fresh model per variant, losses of 40 steps compared with eager's

Variants: eager; kplan (policy "graph", no fusion); kplan-fuse (fusion
"exact"); for the workloads named by --compile also
torch.compile(mode="reduce-overhead") (cudagraph_mark_step_begin before each step). Steps are
timed in a tight loop (one synchronize per --iters steps), variants
interleaved, --reps rounds, medians reported. Each variant's output is
compared with eager's bit for bit. The kernel cache starts empty (a fresh
KPLAN_CACHE_DIR): the first fused variant's NVRTC compiles (kernels, ms) are
the cold cost; then the first fast step (the calls until the graph is
captured) is timed with those kernels loaded. Prints a markdown table last.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "python"))

import torch  # noqa: E402

import kplan.torch as kt  # noqa: E402
from kplan import _rt, aten_fuse  # noqa: E402


def build(name, seq):
    dev = "cuda"
    g = torch.Generator(device="cpu").manual_seed(0)
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config()
        m = GPT2LMHeadModel(cfg).half().to(dev).eval()
        x = torch.randint(0, cfg.vocab_size, (1, 1), generator=g).to(dev)
        return (lambda ids: m(ids, use_cache=False).logits), (x,)
    if name == "bert":
        from transformers import BertConfig, BertModel
        cfg = BertConfig()
        m = BertModel(cfg).half().to(dev).eval()
        x = torch.randint(0, cfg.vocab_size, (1, seq), generator=g).to(dev)
        return (lambda ids: m(ids).last_hidden_state), (x,)
    if name == "mlp":
        from transformers import GPT2Config
        from transformers.models.gpt2.modeling_gpt2 import GPT2MLP
        cfg = GPT2Config()
        m = GPT2MLP(4 * cfg.n_embd, cfg).half().to(dev).eval()
        x = torch.randn(1, seq, cfg.n_embd, generator=g).half().to(dev)
        return (lambda h: h + m(h)), (x,)
    if name == "llama":
        return build_llama()
    raise SystemExit("unknown workload %s" % name)


def build_llama():
    """A Llama-style decoder (12 layers, d 1024, GQA 16/4 heads) decoding
    token by token with Hugging Face's StaticCache: the step is one token at
    cache_position; returns (step, args, decode) where decode(step, n)
    greedily decodes n tokens after an eager prefill and returns them."""
    from transformers import LlamaConfig, LlamaForCausalLM, StaticCache
    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=12,
                      num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                      max_position_embeddings=1024)
    m = LlamaForCausalLM(cfg).half().cuda().eval()
    try:
        cache = StaticCache(config=cfg, max_cache_len=256)
    except TypeError:
        cache = StaticCache(config=cfg, max_batch_size=1, max_cache_len=256, device="cuda",
                            dtype=torch.float16)
    prompt = torch.arange(1, 17, device="cuda")[None]

    def step(ids, pos):
        return m(ids, past_key_values=cache, cache_position=pos, position_ids=pos[None],
                 use_cache=True).logits

    def decode(stepf, n):
        cache.reset()
        with torch.no_grad():
            pos = torch.arange(prompt.shape[1], device="cuda")
            lg = m(prompt, past_key_values=cache, cache_position=pos, position_ids=pos[None],
                   use_cache=True).logits
            tok = lg[:, -1:].argmax(-1)
            out = [tok]
            p = torch.tensor([prompt.shape[1]], device="cuda")
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n - 1):
                tok = stepf(tok, p)[:, -1:].argmax(-1)
                out.append(tok)
                p = p + 1
            torch.cuda.synchronize()
            decode.last_s = time.perf_counter() - t0
        return torch.cat(out, 1)
    return step, decode


def bits_equal(a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    v = torch.int16 if a.element_size() == 2 else torch.int32
    return bool((a.contiguous().view(v) == b.contiguous().view(v)).all())


def ms_per_step(f, iters):
    """f() iters times in a tight loop, one synchronize at each end: ms per call."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        f()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e3


def runtime(fuse, cache=None):
    crt = _rt.Runtime.open(None, flags=_rt.KP_RT_CUDA)
    return kt.Runtime(crt, None, policy="graph", fuse=fuse)


def first_fast(fn, args, fuse):
    """Seconds from the first call until a call is served by a replay."""
    aten_fuse._kernels.clear()
    rt = runtime(fuse)
    reg = kt.Region(fn, "first-" + fuse)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        with torch.no_grad():
            rt._call(reg, args, {})
        if rt.c.replays:
            break
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    st = rt.stats()
    rt.close()
    return dt, st


def bench_llama(a, n=64):
    """ms per token decoding n tokens, and the tokens against eager's."""
    step, decode = build_llama()
    decode = getattr(decode, "__func__", decode)
    res = []
    ref = decode(step, n)
    variants = {"eager": step}
    rts = {}
    for v, fuse in (("kplan", "off"), ("kplan-fuse", "exact")):
        rt = rts[v] = runtime(fuse)
        reg = kt.Region(step, "llama-" + v)
        variants[v] = (lambda ids, p, rt=rt, reg=reg: rt._call(reg, (ids, p), {}))
    if "llama" in a.compile.split(","):
        cf = torch.compile(step, mode="reduce-overhead")

        def ro(ids, p, cf=cf):
            torch.compiler.cudagraph_mark_step_begin()
            return cf(ids, p)
        t0 = time.perf_counter()
        decode(ro, 8)
        print("llama: reduce-overhead compiled in %.1f s" % (time.perf_counter() - t0))
        variants["reduce-overhead"] = ro
    same = {v: bool((decode(f, n) == ref).all()) for v, f in variants.items()}
    times = {v: [] for v in variants}
    for _ in range(max(3, a.reps // 2)):
        for v, f in variants.items():
            decode(f, n)
            times[v].append(decode.last_s / (n - 1) * 1e3)
    print("llama fusion: %s" % rts["kplan-fuse"].stats()["fusion"])
    for v in variants:
        res.append(("llama decode (ms/token)", v, statistics.median(times[v]), min(times[v]),
                    max(times[v]), same[v]))
    for rt in rts.values():
        rt.close()
    return res


def build_train():
    """GPT-2 (4 layers, vocab 8192) training step with AdamW(capturable=True),
    batch 4 x 128, dropout 0 (bench/never_slower.py's gpt2_adamw_cap): (step,
    args) on a model made from seed 0, so every call gives the same initial
    weights."""
    import never_slower      # bench/, on the path as this script's folder
    return never_slower.gpt2_adamw(torch, True)


def bench_train(a, n_loss=40):
    """ms per training step (median of --reps blocks of --iters steps, after
    the 40 steps whose losses are compared with eager's bit for bit)."""
    res = []
    variants = [("eager", None), ("kplan", "off"), ("kplan-fuse", "exact")]
    if "train" in a.compile.split(","):
        variants.append(("reduce-overhead", "compile"))
    losses, times, stats = {}, {}, None
    for v, fuse in variants:
        step, args = build_train()
        rt = None
        if fuse in ("off", "exact"):
            rt = runtime(fuse)
            reg = kt.Region(step, "train-" + v)
            f = (lambda rt=rt, reg=reg: rt._call(reg, args, {}))
        elif fuse == "compile":
            cf = torch.compile(step, mode="reduce-overhead")

            def f(cf=cf):
                torch.compiler.cudagraph_mark_step_begin()
                return cf(*args)
        else:
            f = (lambda: step(*args))
        t0 = time.perf_counter()
        losses[v] = torch.stack([f().clone() for _ in range(n_loss)])
        torch.cuda.synchronize()
        if fuse == "compile":
            print("train: reduce-overhead's first %d steps (compile) %.1f s" % (
                n_loss, time.perf_counter() - t0))
        times[v] = [ms_per_step(f, a.iters) for _ in range(a.reps)]
        if rt is not None:
            if fuse == "exact":
                stats = rt.stats()
            rt.close()
    print("train fusion: %s" % (stats or {}).get("fusion"))
    ref = losses["eager"]
    for v, _ in variants:
        res.append(("gpt2 train step (4 layers)", v, statistics.median(times[v]), min(times[v]),
                    max(times[v]), bits_equal(ref, losses[v])))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default="gpt2,mlp")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--compile", default="",
                    help="workloads to also run with torch.compile(mode='reduce-overhead')")
    a = ap.parse_args()
    # an empty kernel cache: the first compile of each kernel is NVRTC's
    os.environ["KPLAN_CACHE_DIR"] = tempfile.mkdtemp(prefix="kplan-cache-")
    print("device: %s, torch %s, cuda %s, %s" % (torch.cuda.get_device_name(), torch.__version__,
                                                 torch.version.cuda,
                                                 time.strftime("%Y-%m-%d %H:%M UTC",
                                                               time.gmtime())))
    table = []
    for w in a.workloads.split(","):
        if w in ("llama", "train"):
            try:
                table += (bench_llama if w == "llama" else bench_train)(a)
            except Exception as e:  # noqa: BLE001
                print("%s: %s: %s" % (w, type(e).__name__, e))
            continue
        fn, args = build(w, a.seq)
        with torch.no_grad():
            ref = fn(*args).clone()
        variants = {"eager": lambda: fn(*args)}
        rts = {}
        for v, fuse in (("kplan", "off"), ("kplan-fuse", "exact")):
            rt = rts[v] = runtime(fuse)
            reg = kt.Region(fn, w + "-" + v)
            variants[v] = (lambda rt=rt, reg=reg: rt._call(reg, args, {}))
        if w in a.compile.split(","):
            t0 = time.perf_counter()
            cf = torch.compile(fn, mode="reduce-overhead")
            with torch.no_grad():
                for _ in range(3):
                    torch.compiler.cudagraph_mark_step_begin()
                    cf(*args)
            torch.cuda.synchronize()
            print("%s: reduce-overhead compiled in %.1f s" % (w, time.perf_counter() - t0))

            def ro(cf=cf):
                torch.compiler.cudagraph_mark_step_begin()
                return cf(*args)
            variants["reduce-overhead"] = ro
        same = {}
        with torch.no_grad():
            for v, f in variants.items():
                for _ in range(5):
                    out = f()
                torch.cuda.synchronize()
                same[v] = bits_equal(ref, out)
        times = {v: [] for v in variants}
        with torch.no_grad():
            for _ in range(a.reps):
                for v, f in variants.items():
                    times[v].append(ms_per_step(f, a.iters))
        fus = rts["kplan-fuse"].stats()["fusion"]
        for v in variants:
            med = statistics.median(times[v])
            table.append((w, v, med, min(times[v]), max(times[v]), same[v]))
        print("%s fusion: %s" % (w, fus))
        for rt in rts.values():
            rt.close()
        print("%s cold kernel cache: %d kernels compiled by NVRTC in %.0f ms" % (
            w, fus["nvrtc"], fus["compile_ms"]))
        # first fast step, the kernels loaded (NVRTC is the line above)
        t_off, _ = first_fast(fn, args, "off")
        t_fuse, _ = first_fast(fn, args, "exact")
        print("%s first fast step: no fusion %.3f s, fusion %.3f s (kernels loaded)" % (
            w, t_off, t_fuse))
    print("\n| workload | variant | ms/step median | min | max | bits = eager |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in table:
        print("| %s | %s | %.3f | %.3f | %.3f | %s |" % r)


if __name__ == "__main__":
    main()
