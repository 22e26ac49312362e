#!/bin/bash
# corpus.sh - the real-style program corpus, record -> analyze -> plan -> apply,
# each compared with eager (the figures at the top of docs/PERFORMANCE.md).
#
#   bash bench/corpus.sh [BUILD] [OUTDIR]
#
# Needs a GPU and `make gpu-build` (or `make all runtime corpus`). A thin name for
# tests/gpu/corpus_check.sh, which is also part `corpus` of `make gpu-check`;
# CORPUS_ONLY="cublaslt memset" runs a subset.
exec bash "$(dirname "$0")/../tests/gpu/corpus_check.sh" "${1:-build}" "${2:-/tmp/kplan-corpus}"
