#!/bin/bash
# cost_corpus_plain.sh - the validation corpus's plain eager traces, on a GPU.
#
#   bench/cost_corpus_plain.sh [DIR]        (default: $OUT)
#
# Runs bench/cost_corpus.py --plain: GPT-2 small fp16 one token and batch
# 8 x 128 and BERT-base fp16 batch 1 x 128 (random weights from config
# classes, nothing downloaded), traced with torch.profiler around eager steps
# WITHOUT the capture trick, the way users trace, and timed eagerly and as
# one torch.cuda.graph. Writes DIR/<workload>_plain.json.gz (copy into
# bench/cost_corpus/<gpu>/), DIR/ground_truth_plain.csv (append its rows,
# without the header, to that corpus's ground_truth.csv),
# DIR/<workload>_plain.graph.json.gz (the graph's replays, for reading; not
# kept) and DIR/cost_corpus_plain.log. About a minute on one H100 or H200;
# stopped after 280 s.
set -u
D=${1:-${OUT:?usage: cost_corpus_plain.sh DIR (or set OUT)}}
cd "$(dirname "$0")/.." || exit 1
# kplan.torch: the graph is captured on the path kplan's capture takes
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$D"
nvidia-smi -L
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers",
transformers.__version__, torch.cuda.get_device_name())'
t0=$(date +%s)
timeout 280 python3 bench/cost_corpus.py --plain --out "$D" >"$D/cost_corpus_plain.log" 2>&1
rc=$?
cat "$D/cost_corpus_plain.log"
echo "cost_corpus.py --plain: exit $rc, $(( $(date +%s) - t0 )) s"
echo "--- $D/ground_truth_plain.csv"
cat "$D/ground_truth_plain.csv" 2>/dev/null
ls -l "$D"
exit $rc
