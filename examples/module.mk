# examples/module.mk - the example workloads (nvcc; no GPU needed to build)
# and kplan-mkplan (hand-written plans, host C).

EX_NAMES := mlp decode solver ddp
EX_BINS := $(patsubst %,$(BUILD)/bin/ex_%,$(EX_NAMES))
# libraries beyond the runtime; ddp loads NCCL with dlopen (no NCCL to build it)
EX_LIBS_mlp := -lcublas
EX_LIBS_ddp := -ldl
# -cudart shared: one CUDA runtime in the process, the one libkplanrt uses too
EX_NVFLAGS := -O2 -std=c++17 -arch=sm_90 -Iinclude -Xcompiler -Wall -cudart shared

define ex_rule
$(BUILD)/bin/ex_$(1): examples/$(1)/$(1).cu examples/excommon.h include/kplan/runtime.h $(BUILD)/lib/libkplanrt.so
	@mkdir -p $$(dir $$@)
	$$(quiet) NVCC $$@
	$$(Q)$$(NVCC) $$(EX_NVFLAGS) -o $$@ $$< -L$$(BUILD)/lib -lkplanrt -L$$(CUDA_LIBDIR) $$(EX_LIBS_$(1)) \
		-Xlinker -rpath,'$$$$ORIGIN/../lib' -Xlinker -rpath,$$(CUDA_LIBDIR)
endef
$(foreach e,$(EX_NAMES),$(eval $(call ex_rule,$(e))))

$(BUILD)/bin/kplan-mkplan: $(BUILD)/obj/examples/mkplan.o $(HOST_ARCHIVES)
	@mkdir -p $(dir $@)
	$(quiet) LINK $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(HOST_ARCHIVES) $(HOST_LIBS)
ALL_OBJ += $(BUILD)/obj/examples/mkplan.o

# what an executable-graph update costs the next launches (runtime_check.sh)
$(BUILD)/bin/kplan-graph-update: tests/gpu/graph_update.cu
	@mkdir -p $(dir $@)
	$(quiet) NVCC $@
	$(Q)$(NVCC) -O2 -std=c++17 -arch=sm_90 -o $@ $< -L$(CUDA_LIBDIR)/stubs -lcuda \
		-Xlinker -rpath,$(CUDA_LIBDIR)

# The corpus (examples/corpus/): real-style programs, one pattern each, run
# record -> analyze -> plan -> apply by tests/gpu/corpus_check.sh. Built by
# `make corpus` and with the examples (about 1 s of nvcc each).
CORPUS_NAMES := legacy_launch cublaslt memset seed_lr per_thread side_streams \
	host_callback malloc_async warmup_only
CORPUS_BINS := $(patsubst %,$(BUILD)/bin/corpus_%,$(CORPUS_NAMES))
CORPUS_FLAGS_per_thread := --default-stream per-thread
CORPUS_LIBS_cublaslt := -lcublasLt

define corpus_rule
$(BUILD)/bin/corpus_$(1): examples/corpus/$(1).cu examples/corpus/corpus.h examples/excommon.h \
		include/kplan/runtime.h $(BUILD)/lib/libkplanrt.so
	@mkdir -p $$(dir $$@)
	$$(quiet) NVCC $$@
	$$(Q)$$(NVCC) $$(EX_NVFLAGS) $$(CORPUS_FLAGS_$(1)) -o $$@ $$< -L$$(BUILD)/lib -lkplanrt \
		-L$$(CUDA_LIBDIR) $$(CORPUS_LIBS_$(1)) \
		-Xlinker -rpath,'$$$$ORIGIN/../lib' -Xlinker -rpath,$$(CUDA_LIBDIR)
endef
$(foreach e,$(CORPUS_NAMES),$(eval $(call corpus_rule,$(e))))

.PHONY: corpus
corpus: $(CORPUS_BINS)

.PHONY: examples
examples: $(EX_BINS) $(BUILD)/bin/kplan-mkplan $(BUILD)/bin/kplan-graph-update $(CORPUS_BINS)

# The runtime's GPU end-to-end check (needs a GPU): examples eager / runtime /
# hand-written graph, bit-identical outputs, timings, safety checks, calibrate.
.PHONY: gpu-check-runtime
gpu-check-runtime: runtime examples
	bash tests/gpu/runtime_check.sh $(BUILD) $(BUILD)/gpu-check/runtime

# The corpus through the whole loop (needs a GPU; part of `make gpu-check`).
.PHONY: gpu-check-corpus
gpu-check-corpus: all runtime corpus
	bash tests/gpu/corpus_check.sh $(BUILD) $(BUILD)/gpu-check/corpus

# examples/ddp on two GPUs (NCCL loaded at run time): eager, graph and the plan
# from its recording on both ranks (not part of `make gpu-check`'s default list).
.PHONY: gpu-check-ddp
gpu-check-ddp: all runtime examples
	bash tests/gpu/ddp_check.sh $(BUILD) $(BUILD)/gpu-check/ddp
