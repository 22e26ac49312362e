# examples/module.mk - the example workloads (nvcc; no GPU needed to build)
# and kplan-mkplan (hand-written plans, host C).

EX_NAMES := mlp decode solver
EX_BINS := $(patsubst %,$(BUILD)/bin/ex_%,$(EX_NAMES))
# -cudart shared: one CUDA runtime in the process, the one libkplanrt uses too
EX_NVFLAGS := -O2 -std=c++17 -arch=sm_90 -Iinclude -Xcompiler -Wall -cudart shared

define ex_rule
$(BUILD)/bin/ex_$(1): examples/$(1)/$(1).cu examples/excommon.h include/kplan/runtime.h $(BUILD)/lib/libkplanrt.so
	@mkdir -p $$(dir $$@)
	$$(quiet) NVCC $$@
	$$(Q)$$(NVCC) $$(EX_NVFLAGS) -o $$@ $$< -L$$(BUILD)/lib -lkplanrt -L$$(CUDA_LIBDIR) -lcublas \
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

.PHONY: examples
examples: $(EX_BINS) $(BUILD)/bin/kplan-mkplan $(BUILD)/bin/kplan-graph-update

# The runtime's GPU end-to-end check (needs a GPU): examples eager / runtime /
# hand-written graph, bit-identical outputs, timings, safety checks, calibrate.
.PHONY: gpu-check-runtime
gpu-check-runtime: runtime examples
	bash tests/gpu/runtime_check.sh $(BUILD) $(BUILD)/gpu-check/runtime
