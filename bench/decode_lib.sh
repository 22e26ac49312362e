# decode_lib.sh - sourced by the decode benchmarks (decode_fusion.sh,
# decode_ab.sh, decode_skip.sh).

# decode_base_plan BIN DIR: DIR/base.kplan, a graph-only plan of decode's step
# for this GPU (kplan-mkplan, from the device line of BIN/ex_mlp)
decode_base_plan() {
	local bin=$1 dir=$2 dev f
	dev=$("$bin/ex_mlp" device) || { echo "no GPU: $dev" >&2; return 2; }
	read -r -a f <<<"$dev"
	"$bin/kplan-mkplan" --cc "${f[1]}" --cuda "${f[3]}" --driver "${f[5]}" --sm "${f[7]}" \
		--gpu "${dev#* gpu }" -o "$dir/base.kplan" \
		decode.step:graph:warmup=1:keys=8:kernels=100000
}

# decode_trace BIN PLAN TRACE: the kernels the runtime captures for PLAN, in
# the trace format `kplan plan --kernels` reads (EX_DECODE_* settings apply)
decode_trace() {
	rm -f "$3"
	KPLAN_FUSION_TRACE=$3 "$1/ex_decode" runtime "$2" --steps 3 >/dev/null 2>&1
}

# decode_env BUILD DIR: BIN and CAT for the benchmark, DIR created, NVRTC's
# CUBIN cache under it
decode_env() {
	BIN=$1/bin
	CAT=${DECODE_CAT:-fusion/catalog/examples.kpcat}
	mkdir -p "$2"
	export KPLAN_CACHE_DIR=$2/cache
}

# decode_setup BUILD DIR: decode_env, then DIR/base.kplan and the kernels it
# captures in DIR/trace.tsv
decode_setup() {
	decode_env "$1" "$2"
	decode_base_plan "$BIN" "$2" || return 2
	decode_trace "$BIN" "$2/base.kplan" "$2/trace.tsv"
}
