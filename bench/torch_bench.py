#!/usr/bin/env python3
"""torch_bench.py - kplan.torch against eager PyTorch, a hand-written
torch.cuda.graph and torch.compile(mode="reduce-overhead"), on a GPU.

    python3 bench/torch_bench.py --out DIR
        [--workloads gpt2,bert,resnet18,mlp,train] [--iters 100] [--warm 20]
        [--budget 230] [--compile-timeout 120] [--no-compile] [--record]

Workloads (random weights, built locally, no downloads):
  gpt2      GPT-2 small (GPT2Config(), 12 layers), fp16, batch 1, one token
            forward (--gpt2-seq, --gpt2-layers), logits
  bert      BERT-base (BertConfig()), fp16, batch 1, --bert-seq 128 tokens,
            last hidden state
  resnet18  torchvision resnet18(weights=None), fp32, batch 1, 224x224
  mlp       8 x Linear(1024, 1024) + ReLU, fp32, batch 32
  train     one training step of that MLP: zero_grad, forward, MSE loss,
            backward, SGD step; returns the loss (detached)

Variants:
  eager        the function as is
  graph        hand-written torch.cuda.graph: 3 warm-up calls on a side
               stream, capture, then per step copy the input into the static
               input, replay, return the static output
  compile      torch.compile(fn, mode="reduce-overhead") (CUDA graph trees),
               in a process of its own, time-boxed: "n/a" with the reason
               when it fails or does not finish in time
  kplan        @kplan.torch.region(..., static_outputs=True): what "graph"
               does, done by the package (same output aliasing as graph)
  kplan-clone  @kplan.torch.region(...): outputs cloned (the default)
  kplan-patch  @kplan.torch.region(..., static_outputs=True, patch_inputs=True):
               the graph pointed at each call's input instead of a copy
               (inference workloads only: the check at capture replays the
               graph twice more, which a training step must not do)
  kplan-plan   with --record: the region recorded with `kplan record`, a
               plan made with `kplan analyze` + `kplan plan`, then applied

Without --record kplan runs with policy "graph" (every region captured, no
plan needed). Each step is synchronised (torch.cuda.synchronize()), the
median over --iters steps is reported, after --warm steps. The variants of
one process are timed interleaved (each step runs every variant once, in a
random order drawn anew for every step), so drift of the GPU's clock or the
machine's load falls on all of them alike; kplan-plan is timed in a second
round beside eager and graph again, and its ratio to that round's graph is
reported. "first fast" is
the time from the variant's first call (its set-up included: the graph's
warm-up and capture, compile) to the end of the first step within 1.25x of
its median. Outputs are compared with eager's on an input no variant saw
before (training: three steps from the same initial weights, losses and
weights compared): "=" bit-identical, else the largest absolute difference.

Prints a table, writes DIR/torch_bench.csv, DIR/torch_bench.json and a log
per child process (DIR/<workload>-<part>.log). Each workload runs in a child
process (eager, graph, kplan variants) and compile in another one.
"""
import argparse
import csv
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
WORKLOADS = ("gpt2", "bert", "resnet18", "mlp", "train")
MAIN_VARIANTS = ("eager", "kplan", "kplan-clone", "kplan-patch", "graph")


def not_applicable(workload, variant):
    """Why a variant is left out of a workload, or None: patched inputs
    replay the graph on the caller's tensors, which a training step that
    updates its parameters in place cannot offer (side effects)."""
    if variant == "kplan-patch" and workload == "train":
        return "patch_inputs does not apply: the step updates its parameters in place"
    return None
FAST = 1.25


# ---------------------------------------------------------------------------
# child: one workload, some variants, one RESULT line each

class Workload(object):
    def __init__(self, name, fn, inputs, check_input, train=None):
        self.name = name
        self.fn = fn              # fn(*tensors) -> tensor
        self.inputs = inputs      # two input tuples, alternated step to step
        self.check_input = check_input
        self.train = train        # (reset(), params()) for the training step


def build(name, a):
    import torch
    torch.manual_seed(0)
    dev = "cuda"

    def ids(seed, vocab, seq):
        g = torch.Generator().manual_seed(seed)
        return torch.randint(0, vocab, (1, seq), generator=g).to(dev)

    def rand(seed, *shape, dtype=torch.float32):
        g = torch.Generator().manual_seed(seed)
        return torch.randn(*shape, generator=g).to(dev, dtype)

    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(n_layer=a.gpt2_layers)
        model = GPT2LMHeadModel(cfg).half().to(dev).eval()

        def fn(x):
            return model(input_ids=x, use_cache=False).logits
        mk = lambda s: (ids(s, cfg.vocab_size, a.gpt2_seq),)  # noqa: E731
    elif name == "bert":
        from transformers import BertConfig, BertModel
        cfg = BertConfig()
        model = BertModel(cfg).half().to(dev).eval()
        # no padding check on the ids (`pad_token_id in input_ids[...]` is a
        # host sync, which no CUDA graph can hold); the ids have no padding
        model.config.pad_token_id = None

        def fn(x):
            return model(input_ids=x).last_hidden_state
        mk = lambda s: (ids(s, cfg.vocab_size, a.bert_seq),)  # noqa: E731
    elif name == "resnet18":
        import torchvision
        model = torchvision.models.resnet18(weights=None).to(dev).eval()

        def fn(x):
            return model(x)
        mk = lambda s: (rand(s, 1, 3, 224, 224),)  # noqa: E731
    elif name in ("mlp", "train"):
        layers = []
        for _ in range(8):
            layers += [torch.nn.Linear(1024, 1024), torch.nn.ReLU()]
        model = torch.nn.Sequential(*layers[:-1]).to(dev)
        if name == "mlp":
            model.eval()

            def fn(x):
                return model(x)
            mk = lambda s: (rand(s, 32, 1024),)  # noqa: E731
        else:
            opt = torch.optim.SGD(model.parameters(), lr=1e-3)
            loss_fn = torch.nn.MSELoss()
            init = [p.detach().clone() for p in model.parameters()]

            def fn(x, y):
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(model(x), y)
                loss.backward()
                opt.step()
                return loss.detach()

            def reset():
                with torch.no_grad():
                    for p, p0 in zip(model.parameters(), init):
                        p.copy_(p0)

            def params():
                return torch.cat([p.detach().reshape(-1) for p in model.parameters()])
            mk = lambda s: (rand(s, 64, 1024), rand(s + 5000, 64, 1024))  # noqa: E731
            return Workload(name, fn, [mk(1), mk(2)], [mk(10 + i) for i in range(3)],
                            train=(reset, params))
    else:
        raise SystemExit("unknown workload %r" % name)
    return Workload(name, fn, [mk(1), mk(2)], mk(10))


def make_variant(variant, w, a, plan_path):
    """(step function, kplan region name or None). The kplan variants of one
    group share one runtime (opened by the first of them)."""
    import torch
    if variant == "eager":
        return w.fn, None
    if variant == "graph":
        from graph_step import hand_written_graph
        return hand_written_graph(w.fn, w.inputs[0])[0], None
    if variant == "compile":
        cfn = torch.compile(w.fn, mode="reduce-overhead")
        mark = getattr(torch.compiler, "cudagraph_mark_step_begin", None)

        def step(*xs):
            if mark is not None:
                mark()
            return cfn(*xs)
        return step, None
    if variant.startswith("kplan") or variant == "record":
        import kplan.torch as kt
        if variant == "record":
            kt.open("")
        elif variant == "kplan-plan":
            kt.open(plan_path)
        elif kt._current is None:
            kt.open("", policy="graph")
        # the plan names the region after the workload; the two graph-policy
        # variants share a runtime, so the clone variant has a name of its own
        name = {"kplan-clone": w.name + "_clone", "kplan-patch": w.name + "_patch"}.get(
            variant, w.name)
        step = kt.region(name, static_outputs=variant in ("kplan", "kplan-patch"),
                         patch_inputs=(variant == "kplan-patch"))(w.fn)
        return step, name
    raise SystemExit("unknown variant %r" % variant)


def run_group(variants, w, a, plan_path, ref):
    """Set the variants up, then time them interleaved: step i runs every
    variant once, in an order shuffled from step to step, so that the GPU's
    clock and the machine's load drift over all of them alike."""
    import torch
    res, steps, times = {}, {}, {}
    for v in variants:
        res[v] = {"workload": w.name, "variant": v, "status": "ok"}
        t0 = time.perf_counter()
        try:
            steps[v] = make_variant(v, w, a, plan_path)
        except Exception as exc:  # report it and time the others
            lines = str(exc).strip().splitlines()
            res[v] = {"workload": w.name, "variant": v, "status": "n/a",
                      "reason": "%s: %s" % (type(exc).__name__, lines[0] if lines else "")}
            torch.cuda.synchronize()
            continue
        res[v]["setup_s"] = time.perf_counter() - t0
        times[v] = []
    live = [v for v in variants if v in steps]
    n = a.warm + a.iters
    order = random.Random(0)
    for i in range(n):
        # a new random order every step: no variant always follows the same
        # one (right after an eager step the GPU has idled for milliseconds)
        step_order = list(live)
        order.shuffle(step_order)
        for v in step_order:
            s = time.perf_counter()
            steps[v][0](*w.inputs[i % 2])
            torch.cuda.synchronize()
            times[v].append(time.perf_counter() - s)
    for v in live:
        r = res[v]
        steady = times[v][a.warm:]
        med = statistics.median(steady)
        q = sorted(steady)
        r.update(median_ms=med * 1e3, p10_ms=q[len(q) // 10] * 1e3,
                 p90_ms=q[(len(q) * 9) // 10] * 1e3)
        acc = r["setup_s"]
        for j, t in enumerate(times[v]):
            acc += t
            if t <= FAST * med:
                r.update(first_fast_s=acc, first_fast_step=j + 1)
                break
        if v != "record":
            got = outputs(steps[v][0], w)
            r["equal"] = all(bool(torch.equal(x, y)) for x, y in zip(got, ref))
            r["max_abs_diff"] = max(float((x.float() - y.float()).abs().max())
                                    if x.shape == y.shape else float("inf")
                                    for x, y in zip(got, ref))
    kp = [v for v in live if steps[v][1] is not None]
    if kp:
        import kplan.torch as kt
        s = kt.stats()
        rt = s.get("rt") or {}
        for v in kp:
            reg = s["regions"].get(steps[v][1], {})
            res[v]["kplan"] = {k: reg.get(k) for k in ("calls", "replays", "captures", "eager")}
            res[v]["kplan"].update(eager_by_reason=s["eager_by_reason"], failures=s["failures"],
                                   watched=s["watched"], unwatched=s["unwatched"],
                                   patched_inputs=s.get("patched_inputs"),
                                   rt_watched=rt.get("watched"))
            if v == "kplan-plan":
                info = kt.current().region_plan(w.name) if plan_path else None
                if info is not None:
                    res[v]["plan"] = "%s (%s), warmup %d, %d kernels" % (
                        info["decision"], info["reason"], info["warmup"], info["kernels"])
                else:
                    res[v]["plan"] = "the plan has no region %r" % w.name
        kt.close()
    return res


def outputs(step, w):
    """The variant's outputs on inputs no variant has seen (cloned at once:
    graph outputs are overwritten by the next call)."""
    import torch
    if w.train is None:
        return [step(*w.check_input).clone()]
    reset, params = w.train
    reset()
    losses = [step(*b).clone() for b in w.check_input]
    torch.cuda.synchronize()
    out = [torch.stack(losses), params()]
    reset()
    return out


def child(a):
    import torch
    w = build(a.child, a)
    if w.train is None:
        torch.set_grad_enabled(False)
    # common warm-up: lazy CUDA/cuBLAS/cuDNN set-up is paid before any variant
    for i in range(3):
        w.fn(*w.inputs[i % 2])
    torch.cuda.synchronize()
    ref = outputs(w.fn, w)
    dev = torch.cuda.get_device_name()
    # groups timed together: the graph-policy kplan variants share a runtime;
    # kplan-plan opens its own, so it is timed in a second group, again
    # beside eager and graph (their figures from the first group are kept)
    want = a.variants.split(",")
    groups = [[v for v in want if v != "kplan-plan"]]
    if "kplan-plan" in want:
        groups.append(["eager", "graph", "kplan-plan"])
    done = {}
    for gi, group in enumerate(groups):
        res = run_group(group, w, a, a.plan, ref)
        for v, r in res.items():
            if gi and v in done:
                done[v].setdefault("other_group_ms", r.get("median_ms"))
                continue
            if gi:
                # kplan-plan over the graph of its own group
                g = res.get("graph", {}).get("median_ms")
                e = res.get("eager", {}).get("median_ms")
                if g and r.get("median_ms"):
                    r["vs_graph_same_group"] = r["median_ms"] / g
                if e and r.get("median_ms"):
                    r["vs_eager_same_group"] = e / r["median_ms"]
            done[v] = r
    for v in want:
        r = done.get(v, {"workload": w.name, "variant": v, "status": "n/a",
                         "reason": "not run"})
        r["device"] = dev
        r["torch"] = torch.__version__
        print("RESULT " + json.dumps(r), flush=True)


# ---------------------------------------------------------------------------
# parent

def run_child(a, workload, variants, log, timeout, plan=None, wrap=None):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", workload,
           "--variants", ",".join(variants), "--iters", str(a.iters), "--warm", str(a.warm),
           "--gpt2-seq", str(a.gpt2_seq), "--gpt2-layers", str(a.gpt2_layers),
           "--bert-seq", str(a.bert_seq)]
    if plan:
        cmd += ["--plan", plan]
    if wrap:
        cmd = wrap + cmd
    out, why = "", None
    t0 = time.time()
    with open(log, "a") as lf:
        lf.write("$ %s\n" % " ".join(cmd))
        lf.flush()
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=lf, timeout=timeout,
                               universal_newlines=True, env=a.env)
            out = p.stdout
            if p.returncode:
                why = "exit status %d (see %s)" % (p.returncode, log)
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout or ""
            if isinstance(out, bytes):
                out = out.decode("utf-8", "replace")
            why = "did not finish in %d s" % timeout
        lf.write(out)
    results = {}
    for line in out.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            results[r["variant"]] = r
    for v in variants:
        if v not in results:
            results[v] = {"workload": workload, "variant": v, "status": "n/a",
                          "reason": why or "no result (see %s)" % log}
    return results, time.time() - t0


def record_plan(a, workload):
    """kplan record the region (no plan: eager, NVTX ranges), then analyze and
    plan. Returns (plan path or None, note)."""
    kplan = a.kplan_bin
    if not os.path.isfile(kplan):
        return None, "no %s (make)" % kplan
    db = os.path.join(a.out, workload + ".db")
    plan = os.path.join(a.out, workload + ".kplan")
    for f in (db, db + "-wal", db + "-shm", plan):
        if os.path.exists(f):
            os.remove(f)
    log = os.path.join(a.out, workload + "-record.log")
    # this GPU's launch costs, where analyze and plan look for them (optional)
    with open(log, "w") as lf:
        cmd = [kplan, "calibrate", "-o", db]
        lf.write("$ %s\n" % " ".join(cmd))
        lf.flush()
        subprocess.run(cmd, stdout=lf, stderr=lf, env=a.env)
    res, _ = run_child(a, workload, ["record"], log, 180,
                       wrap=[kplan, "record", "-o", db, "--"])
    if res["record"]["status"] != "ok":
        return None, "record: " + res["record"].get("reason", "failed")
    with open(log, "a") as lf:
        for cmd in ([kplan, "analyze", db], [kplan, "plan", db, "-o", plan]):
            lf.write("$ %s\n" % " ".join(cmd))
            lf.flush()
            r = subprocess.run(cmd, stdout=lf, stderr=lf, env=a.env)
            if r.returncode:
                return None, "%s exited %d (see %s)" % (cmd[1], r.returncode, log)
    return plan, "recorded"


def fmt(x, f="%.3f"):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f % x


def report(a, results, elapsed):
    variants = ["eager", "graph", "compile", "kplan", "kplan-clone", "kplan-patch"]
    if a.record:
        variants.append("kplan-plan")
    rows = []
    for wname in a.workloads:
        r = results.get(wname, {})
        eager = r.get("eager", {}).get("median_ms")
        graph = r.get("graph", {}).get("median_ms")
        for v in variants:
            why = not_applicable(wname, v)
            x = r.get(v, {"status": "skipped", "reason": why} if why
                      else {"status": "n/a", "reason": "not run"})
            med = x.get("median_ms") if x.get("status") == "ok" else None
            k = x.get("kplan") or {}
            rows.append({
                "workload": wname, "variant": v, "status": x.get("status"),
                "median_ms": med, "p10_ms": x.get("p10_ms"), "p90_ms": x.get("p90_ms"),
                # kplan-plan is timed in a group of its own, beside eager
                # again: its speed-up is over that eager run (the groups'
                # eager medians differ by up to 1.7x on these machines)
                "speedup_vs_eager": x.get("vs_eager_same_group") or (
                    eager / med if eager and med else None),
                "vs_graph": med / graph if graph and med else None,
                "first_fast_s": x.get("first_fast_s"), "first_fast_step": x.get("first_fast_step"),
                "setup_s": x.get("setup_s"),
                "equal_to_eager": x.get("equal"), "max_abs_diff": x.get("max_abs_diff"),
                "replays": k.get("replays"), "captures": k.get("captures"),
                "eager_calls": k.get("eager"),
                "eager_reasons": " ".join("%s=%d" % kv for kv in
                                          sorted((k.get("eager_by_reason") or {}).items())),
                "vs_graph_same_round": x.get("vs_graph_same_group"),
                "note": x.get("reason") or x.get("plan") or "",
                "device": x.get("device", ""), "torch": x.get("torch", ""),
            })
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "torch_bench.csv")
    with open(path, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        wr.writeheader()
        for row in rows:
            wr.writerow(row)
    with open(os.path.join(a.out, "torch_bench.json"), "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)

    dev = next((r["device"] for r in rows if r["device"]), "?")
    tv = next((r["torch"] for r in rows if r["torch"]), "?")
    print("device %s, torch %s, %d steps per variant after %d warm-up steps, %.0f s in all"
          % (dev, tv, a.iters, a.warm, elapsed))
    print()
    print("median ms per step (speedup vs eager); kplan/graph: kplan's time over the "
          "hand-written graph's")
    hdr = "%-9s" % "workload" + "".join("%19s" % v for v in variants) + "%13s" % "kplan/graph"
    print(hdr)
    for wname in a.workloads:
        line = "%-9s" % wname
        for v in variants:
            row = next(r for r in rows if r["workload"] == wname and r["variant"] == v)
            if row["median_ms"] is None:
                line += "%19s" % "n/a"
            else:
                line += "%19s" % ("%.3f (%.2fx)" % (row["median_ms"], row["speedup_vs_eager"] or 0))
        kp = next(r for r in rows if r["workload"] == wname and r["variant"] == "kplan")
        line += "%13s" % fmt(kp["vs_graph"])
        pt = next(r for r in rows if r["workload"] == wname and r["variant"] == "kplan-patch")
        if pt["vs_graph"]:
            line += "  (kplan-patch/graph %s)" % fmt(pt["vs_graph"])
        pp = [r for r in rows if r["workload"] == wname and r["variant"] == "kplan-plan"]
        if pp and pp[0]["vs_graph_same_round"]:
            line += "  (kplan-plan/graph %s)" % fmt(pp[0]["vs_graph_same_round"])
        print(line)
    print()
    print("time from the first call to the first fast step, s (step number); "
          "outputs vs eager: '=' identical, else max |diff|")
    print("%-9s" % "workload" + "".join("%19s" % v for v in variants))
    for wname in a.workloads:
        line = "%-9s" % wname
        line2 = "%-9s" % ""
        for v in variants:
            row = next(r for r in rows if r["workload"] == wname and r["variant"] == v)
            if row["status"] != "ok":
                line += "%19s" % "n/a"
                line2 += "%19s" % ""
                continue
            line += "%19s" % ("%s (%s)" % (fmt(row["first_fast_s"], "%.2f"),
                                          row["first_fast_step"] or "-"))
            eq = "=" if row["equal_to_eager"] else "%.3g" % (row["max_abs_diff"] or 0)
            line2 += "%19s" % ("out " + eq)
        print(line)
        print(line2)
    print()
    print("kplan: replays / captures / eager calls by reason")
    for row in rows:
        if row["variant"].startswith("kplan") and row["status"] == "ok":
            print("  %-9s %-12s replays %s captures %s eager %s%s" % (
                row["workload"], row["variant"], row["replays"], row["captures"],
                row["eager_calls"], " (%s)" % row["eager_reasons"] if row["eager_reasons"] else ""))
    notes = [r for r in rows if r["note"]]
    if notes:
        print()
        print("notes")
        for r in notes:
            print("  %-9s %-12s %s" % (r["workload"], r["variant"], r["note"]))
    print()
    print("wrote %s" % path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="torch-bench-out", help="output directory")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--iters", type=int, default=100, help="timed steps per variant")
    ap.add_argument("--warm", type=int, default=20, help="steps before the timed ones")
    ap.add_argument("--budget", type=float, default=230,
                    help="seconds for the whole run: compile runs get what is left")
    ap.add_argument("--compile-timeout", type=float, default=120,
                    help="seconds for one workload's compile process at most")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--record", action="store_true",
                    help="also record each workload with `kplan record`, plan it, apply the plan")
    ap.add_argument("--kplan-bin", default=os.path.join(REPO, "build", "bin", "kplan"))
    ap.add_argument("--gpt2-seq", type=int, default=1)
    ap.add_argument("--gpt2-layers", type=int, default=12)
    ap.add_argument("--bert-seq", type=int, default=128)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--variants", help=argparse.SUPPRESS)
    ap.add_argument("--plan", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        sys.path.insert(0, os.path.join(REPO, "python"))
        return child(a)

    t_start = time.time()
    a.workloads = [w for w in a.workloads.split(",") if w]
    for w in a.workloads:
        if w not in WORKLOADS:
            ap.error("unknown workload %r (%s)" % (w, ", ".join(WORKLOADS)))
    a.out = os.path.abspath(a.out)
    os.makedirs(a.out, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(REPO, "python")] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    lib = os.path.join(REPO, "build", "lib", "libkplanrt.so")
    if not env.get("KPLAN_RT_LIB") and os.path.isfile(lib):
        env["KPLAN_RT_LIB"] = lib
    if not env.get("KPLAN_RT_LIB"):
        print("note: no build/lib/libkplanrt.so (make): kplan runs without the C runtime "
              "(no capture watch, no NVTX ranges)", flush=True)
    a.env = env
    for w in a.workloads:
        for part in ("main", "compile", "record"):
            f = os.path.join(a.out, "%s-%s.log" % (w, part))
            if os.path.exists(f):
                os.remove(f)
    results = {}
    for w in a.workloads:
        plan = None
        variants = [v for v in MAIN_VARIANTS if not not_applicable(w, v)]
        if a.record:
            plan, note = record_plan(a, w)
            print("%s: record -> plan: %s" % (w, note if plan is None else plan), flush=True)
            variants.insert(3, "kplan-plan")
        res, dt = run_child(a, w, variants, os.path.join(a.out, w + "-main.log"), 240, plan=plan)
        if a.record and plan is None:
            res["kplan-plan"] = {"status": "n/a", "reason": note}
        results[w] = res
        print("%s: %s (%.0f s)" % (w, ", ".join(
            "%s %s" % (v, fmt(res[v].get("median_ms")) + " ms" if res[v]["status"] == "ok"
                       else "n/a") for v in variants), dt), flush=True)
    for w in a.workloads:
        if a.no_compile:
            results[w]["compile"] = {"status": "n/a", "reason": "--no-compile"}
            continue
        left = a.budget - (time.time() - t_start)
        timeout = min(a.compile_timeout, left)
        if timeout < 20:
            results[w]["compile"] = {"status": "n/a",
                                     "reason": "not run: the --budget of %.0f s was spent" % a.budget}
            continue
        res, dt = run_child(a, w, ["compile"], os.path.join(a.out, w + "-compile.log"),
                            int(timeout))
        results[w]["compile"] = res["compile"]
        print("%s: compile %s (%.0f s)" % (w, fmt(res["compile"].get("median_ms")) + " ms"
                                           if res["compile"]["status"] == "ok" else
                                           "n/a: " + res["compile"].get("reason", ""), dt),
              flush=True)
    print()
    report(a, results, time.time() - t_start)


if __name__ == "__main__":
    sys.exit(main())
