"""Torch fusion groups shipped with a plan, end to end on a GPU (GPT-2 small,
fp16, one token; part of tests/gpu/torch_fusion_check.sh).

    PYTHONPATH=python python3 tests/gpu/torch_fusion_ship.py record
    PYTHONPATH=python python3 tests/gpu/torch_fusion_ship.py save PLAN
    PYTHONPATH=python python3 tests/gpu/torch_fusion_ship.py load PLAN [--tampered]

PLAN may be a bundle (kplan bundle) for load: the entry for this GPU and its
torch fusion groups, carried in the bundle.

record   run region "fwd" eagerly (no plan: NVTX ranges) for `kplan record`
save     fuse with fuse="exact" (kernels generated, NVRTC or the cache),
         check the logits against eager bit for bit, write the groups
         beside PLAN (kt.save_fusion)
load     a fresh process: open PLAN with the default fuse="plan" and
         verify=2; every chain must use a shipped group (no source
         generated: aten_gen.generate fails if called), no NVRTC compile
         (every kernel from the on-disk cache: the save process filled it),
         logits bit-identical to eager
--tampered  the plan's sources were changed after signing (run with
         KPLAN_RT_TRUST): no shipped group may be used, logits still equal

Policy "graph" (KPLAN_TORCH_POLICY to override): the region is captured
whatever the plan decided, so that the check does not depend on the
planner's verdict on this GPU. Prints one JSON line of stats; exit 0 when
every check holds.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))

import torch  # noqa: E402

import kplan.torch as kt  # noqa: E402
from kplan import aten_gen  # noqa: E402


def build():
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config()
    m = GPT2LMHeadModel(cfg).half().to("cuda").eval()
    g = torch.Generator(device="cpu").manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (1, 1), generator=g).to("cuda")
    return (lambda x: m(x, use_cache=False).logits), ids


def bits_equal(a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    v = torch.int16 if a.element_size() == 2 else torch.int32
    return bool((a.contiguous().view(v) == b.contiguous().view(v)).all())


def run(fwd, ids, n=8):
    region = kt.region("fwd")(fwd)
    outs = []
    with torch.no_grad():
        ref = fwd(ids)
        for _ in range(n):
            outs.append(region(ids))
    torch.cuda.synchronize()
    return ref, outs


def main(argv):
    if not argv or argv[0] not in ("record", "save", "load"):
        raise SystemExit(__doc__)
    fwd, ids = build()
    mode = argv[0]
    if mode == "record":
        kt.open("")
        run(fwd, ids, 20)
        kt.close()
        return 0
    plan = argv[1]
    policy = os.environ.get("KPLAN_TORCH_POLICY") or "graph"
    fails = []
    if mode == "save":
        kt.open(plan, policy=policy, fuse="exact")
    else:
        kt.open(plan, policy=policy, verify=2)

        def no_gen(*a, **k):
            raise AssertionError("a source was generated: the shipped groups were not used")
        aten_gen.generate = no_gen
    ref, outs = run(fwd, ids)
    s = kt.stats()
    fz = s.get("fusion") or {}
    if not all(bits_equal(ref, o) for o in outs):
        fails.append("logits differ from eager")
    if s["replays"] < 4:
        fails.append("only %d replays" % s["replays"])
    if mode == "save":
        if not fz.get("chains"):
            fails.append("nothing fused")
        if not fails:
            path = kt.save_fusion()
            print("torch_fusion_ship: %d groups written to %s" % (fz.get("groups_found", 0), path))
    elif "--tampered" in argv:
        if fz.get("shipped"):
            fails.append("%d chains used a tampered plan's sources" % fz["shipped"])
    else:
        if not fz.get("chains") or fz.get("shipped") != fz.get("chains"):
            fails.append("chains %s, of which shipped %s" % (fz.get("chains"), fz.get("shipped")))
        if fz.get("nvrtc"):
            fails.append("%d kernels compiled by NVRTC (the cache should have them)" % fz["nvrtc"])
        if fz.get("fallbacks"):
            fails.append("chains run op by op: %s" % fz["fallbacks"])
        if s["verified"] < 1 or s["failures"]:
            fails.append("verify: %d verified, failures %s" % (s["verified"], s["failures"]))
    print(json.dumps({"mode": mode, "replays": s["replays"], "verified": s["verified"],
                      "failures": s["failures"], "eager_by_reason": s["eager_by_reason"],
                      "fusion": fz}, sort_keys=True))
    kt.close()
    for f in fails:
        print("FAIL torch_fusion_ship %s: %s" % (mode, f))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
