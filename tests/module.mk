# tests/module.mk - reliability targets: fuzzing, valgrind, GPU stress.
#
#   make fuzz           build every libFuzzer harness and fuzz each target in
#                       turn for FUZZ_SECONDS (default 600), one at a time,
#                       niced; working corpora in tests/fuzz/corpus-work/
#                       (git-ignored), findings in tests/fuzz/corpus-work/
#                       <target>-artifacts/. FUZZ_TARGETS picks a subset.
#   make fuzz-smoke     run each harness over its committed seed corpus
#                       (tests/fuzz/corpus/<target>/) once: seconds, for CI;
#                       every past finding is kept there, so this is also the
#                       fuzzers' regression test.
#   make fuzz-build     only build the harnesses ($(BUILD)/fuzz/fuzz_<target>)
#   make fuzz-pipeline  the whole CLI over PIPELINE_COUNT generated traces
#                       (tests/fuzz/pipeline.sh); use a sanitizer BUILD
#   make valgrind       memcheck of the CLI on the bundled trace
#                       (tests/valgrind.sh; ~20 s; needs valgrind; not in
#                       `make test`)
#   make stress-gpu     build the GPU stress programs (nvcc, no GPU needed)
#   make stress-gpu-check  run them (tests/gpu/stress_check.sh; needs a GPU;
#                       part of `make gpu-check`)
#
# The harnesses are built with clang (`sh scripts/deps.sh clang` installs
# it) and -fsanitize=fuzzer,address,undefined. The library sources they need
# are compiled again with the same instrumentation into $(BUILD)/fuzz/obj/;
# the ordinary build is untouched.

FUZZ_CC ?= clang
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?= planfile chrome nsys catalog sig aten
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link \
	-Wall -Wextra -Wno-unused-parameter -MMD -MP -I.
# what the harnesses link: readers and everything under them
FUZZ_LIB_SRC := $(wildcard common/*.c) $(wildcard db/*.c) $(wildcard importers/*.c) \
	$(plan_SRC) $(fusion_SRC) analyzer/cost.c
FUZZ_LIB_OBJ := $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(FUZZ_LIB_SRC)) $(FUZZ_DIR)/obj/db/schema_blob.o
FUZZ_BINS := $(addprefix $(FUZZ_DIR)/fuzz_,$(FUZZ_TARGETS))
FUZZ_WORK := tests/fuzz/corpus-work

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(quiet) FUZZCC $@
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<

$(FUZZ_DIR)/obj/db/schema_blob.o: db/schema_blob.S db/schema.sql
	@mkdir -p $(dir $@)
	$(quiet) FUZZAS $@
	$(Q)$(FUZZ_CC) -c -o $@ $<

$(FUZZ_DIR)/lib/libkp_fuzz.a: $(FUZZ_LIB_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@
	$(quiet) AR $@
	$(Q)ar rcs $@ $^

$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.o $(FUZZ_DIR)/lib/libkp_fuzz.a
	$(quiet) LINK $@
	$(Q)$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ $(HOST_LIBS)

-include $(FUZZ_LIB_OBJ:.o=.d) $(patsubst %,$(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.d,$(FUZZ_TARGETS))

.PHONY: fuzz fuzz-build fuzz-smoke valgrind stress-gpu stress-gpu-check
fuzz-build:
	@sh scripts/deps.sh clang
	@$(MAKE) --no-print-directory $(FUZZ_BINS)

# One target at a time: the machine's cores are shared. A finding stops the
# run (non-zero exit) with the input in $(FUZZ_WORK)/<target>-artifacts/.
fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
		mkdir -p $(FUZZ_WORK)/$$t $(FUZZ_WORK)/$$t-artifacts || exit 1; \
		dict=; [ -f tests/fuzz/$$t.dict ] && dict=-dict=tests/fuzz/$$t.dict; \
		echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
		nice -n 10 $(FUZZ_DIR)/fuzz_$$t $(FUZZ_WORK)/$$t tests/fuzz/corpus/$$t $$dict \
			-max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
			-max_len=65536 -print_final_stats=1 \
			-artifact_prefix=$(FUZZ_WORK)/$$t-artifacts/ \
			2> $(FUZZ_WORK)/$$t.log || { tail -40 $(FUZZ_WORK)/$$t.log; exit 1; }; \
		grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+.*DONE' \
			$(FUZZ_WORK)/$$t.log; \
	done

# Every seed once (file arguments: no mutation, no corpus writes).
fuzz-smoke: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
		n=$$(ls tests/fuzz/corpus/$$t | wc -l); \
		$(FUZZ_DIR)/fuzz_$$t tests/fuzz/corpus/$$t/* > $(FUZZ_DIR)/smoke-$$t.log 2>&1 \
			|| { tail -40 $(FUZZ_DIR)/smoke-$$t.log; exit 1; }; \
		echo "fuzz-smoke: $$t: $$n inputs ok"; \
	done

valgrind: $(BUILD)/bin/kplan
	@sh tests/valgrind.sh $(BUILD)

# GPU stress of the collector (tests/gpu/stress_collector.cu): built here
# with nvcc (no GPU needed), run by stress_check.sh on a GPU machine.
STRESS_NVCC_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
STRESS_GPU_BIN := $(BUILD)/gpu/stress_collector

$(STRESS_GPU_BIN): tests/gpu/stress_collector.cu
	@mkdir -p $(dir $@)
	$(quiet) NVCC $@
	$(Q)$(NVCC) -O2 -std=c++17 $(STRESS_NVCC_ARCH) -o $@ $< -lpthread \
		-Xlinker -rpath,$(CUDA_LIBDIR)

# the runtime under 8 threads (tests/gpu/stress_runtime.cu), linked like
# the examples: shared cudart, libkplanrt from $(BUILD)/lib
STRESS_RT_BIN := $(BUILD)/gpu/stress_runtime
$(STRESS_RT_BIN): tests/gpu/stress_runtime.cu include/kplan/runtime.h $(BUILD)/lib/libkplanrt.so
	@mkdir -p $(dir $@)
	$(quiet) NVCC $@
	$(Q)$(NVCC) -O2 -std=c++17 $(STRESS_NVCC_ARCH) -Iinclude -cudart shared -o $@ $< \
		-L$(BUILD)/lib -lkplanrt -lpthread -Xlinker -rpath,'$$ORIGIN/../lib' \
		-Xlinker -rpath,$(CUDA_LIBDIR)

stress-gpu: $(STRESS_GPU_BIN) $(STRESS_RT_BIN) $(BUILD)/bin/kplan $(BUILD)/bin/kplan-mkplan $(COLLECTOR_LIB)
stress-gpu-check: stress-gpu
	sh tests/gpu/stress_check.sh $(BUILD)

# keep the harness objects (make would delete them as intermediates)
.SECONDARY: $(patsubst %,$(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.o,$(FUZZ_TARGETS))

# tests/unit/test_reliability.c drives the collector's decoder with
# synthesized CUPTI records (CUDA headers only, no CUDA library).
$(BUILD)/obj/tests/unit/test_reliability.o: CFLAGS += $(CUDA_INC)

# The CLI over generated hostile-but-valid traces (tests/fuzz/pipeline.sh);
# use a sanitizer build: make BUILD=build-asan SANITIZER=address,undefined
# OPT=-O1 fuzz-pipeline. PIPELINE_COUNT traces from PIPELINE_SEED.
PIPELINE_COUNT ?= 300
PIPELINE_SEED ?= 1
.PHONY: fuzz-pipeline
fuzz-pipeline: $(BUILD)/bin/kplan
	@nice -n 10 sh tests/fuzz/pipeline.sh $(BUILD)/bin/kplan $(PIPELINE_COUNT) $(PIPELINE_SEED)
