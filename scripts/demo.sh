#!/bin/sh
# demo.sh - the README's main job on the bundled trace (no GPU needed).
set -eu
KPLAN=${1:-build/bin/kplan}
OUT=demo-out
TRACE=tests/fixtures/resnet18_b1.json.gz
mkdir -p "$OUT"
rm -f "$OUT/run.db" "$OUT/run.db-wal" "$OUT/run.db-shm"
"$KPLAN" import "$TRACE" -o "$OUT/run.db"
"$KPLAN" info "$OUT/run.db"
