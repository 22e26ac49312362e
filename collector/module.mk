# collector/module.mk - libkplan_collect.so, the CUPTI injection library.
#
#   make BUILD=build collector     build $(BUILD)/lib/libkplan_collect.so
#
# The library runs inside someone else's process: built -fPIC with hidden
# visibility, exporting only InitializeInjection (version script), linked
# -Wl,--no-undefined against libcupti (rpath to $(CUDA_LIBDIR)) and
# libsqlite3. The db/ and common/ sources it needs are compiled again with
# -fPIC into $(BUILD)/obj/collector-pic/ (the host archives stay as they are).
# It is never built with sanitizers: it must load into uninstrumented hosts.
#
# For the CLI: COLLECTOR_LIB names the library (append it to `all` or to a
# packaging target); the CLI finds it at $ORIGIN/../lib/libkplan_collect.so
# or through KPLAN_COLLECTOR. The record decoding (decode.c, window.c) has
# no CUPTI calls and is linked into kplan-unit through UNIT_EXTRA_OBJ.

COLLECTOR_LIB := $(BUILD)/lib/libkplan_collect.so
LAYERED += collector
collector_USES := common db
COLLECTOR_PIC_DIR := $(BUILD)/obj/collector-pic
COLLECTOR_SRC := $(wildcard collector/*.c)
COLLECTOR_DEP_SRC := $(wildcard common/*.c) db/db.c db/writer.c
COLLECTOR_PIC_OBJ := $(patsubst %.c,$(COLLECTOR_PIC_DIR)/%.o,$(COLLECTOR_SRC) $(COLLECTOR_DEP_SRC)) \
	$(COLLECTOR_PIC_DIR)/db/schema_blob.o
COLLECTOR_CFLAGS := -std=c11 -D_GNU_SOURCE $(OPT) -g $(WARN) -MMD -MP -I. $(CUDA_INC) \
	-fPIC -fvisibility=hidden
ALL_OBJ += $(filter %.o,$(COLLECTOR_PIC_OBJ))

$(COLLECTOR_PIC_DIR)/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(quiet) CC $@
	$(Q)$(CC) $(COLLECTOR_CFLAGS) -c -o $@ $<

$(COLLECTOR_PIC_DIR)/db/schema_blob.o: db/schema_blob.S db/schema.sql | deps
	@mkdir -p $(dir $@)
	$(quiet) AS $@
	$(Q)$(CC) -fPIC -c -o $@ $<

$(BUILD)/obj/collector/collector.map: collector/module.mk
	@mkdir -p $(dir $@)
	@printf '{\n  global: InitializeInjection;\n  local: *;\n};\n' > $@

$(COLLECTOR_LIB): $(COLLECTOR_PIC_OBJ) $(BUILD)/obj/collector/collector.map
	@mkdir -p $(dir $@)
	$(quiet) LINK $@
	$(Q)$(CC) -shared -o $@ $(COLLECTOR_PIC_OBJ) \
		-Wl,--version-script=$(BUILD)/obj/collector/collector.map -Wl,--no-undefined \
		-L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcupti -lsqlite3 -ldl -lpthread -lm

.PHONY: collector
collector: $(COLLECTOR_LIB)

# Unit tests: decoding and window code without CUPTI (CUDA headers only).
COLLECTOR_UNIT_OBJ := $(BUILD)/obj/collector/decode.o $(BUILD)/obj/collector/window.o \
	$(BUILD)/obj/collector/rank.o
UNIT_EXTRA_OBJ += $(COLLECTOR_UNIT_OBJ)
ALL_OBJ += $(COLLECTOR_UNIT_OBJ)
$(COLLECTOR_UNIT_OBJ) $(BUILD)/obj/tests/unit/test_collector.o: CFLAGS += $(CUDA_INC)
# the CUPTI callback ids test_collector.c checks common/cuda_api.def against
$(BUILD)/obj/tests/unit/test_collector.o: CFLAGS += -DKP_CUPTI_INCLUDE='"$(CUDA_HOME)/include"'

# `kplan record` sets NVTX_INJECTION64_PATH to this toolkit's CUPTI unless
# the collector finds another one loaded.
$(BUILD)/obj/cli/cmd_record.o: CFLAGS += -DKP_CUPTI_LIB='"$(CUDA_LIBDIR)/libcupti.so"'

# kplan-unit runs `kplan record` in the CLI tests and needs the library.
unit: $(COLLECTOR_LIB)
# (the Makefile's kplan-unit rule expanded UNIT_EXTRA_OBJ before this file)
$(BUILD)/bin/kplan-unit: $(COLLECTOR_UNIT_OBJ)

# GPU checks (tests/gpu/collector_check.sh): the test programs are built
# with nvcc on any machine (no GPU needed); collector-gpu-check runs them.
COLLECTOR_NVCC_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
COLLECTOR_GPU_BIN := $(addprefix $(BUILD)/gpu/collector_,launch threads graph cublas)

$(BUILD)/gpu/collector_%: tests/gpu/collector_%.cu
	@mkdir -p $(dir $@)
	$(quiet) NVCC $@
	$(Q)$(NVCC) -O2 -std=c++17 $(COLLECTOR_NVCC_ARCH) -o $@ $< -lcublas -ldl \
		-Xlinker -rpath,$(CUDA_LIBDIR)

.PHONY: collector-gpu collector-gpu-check
collector-gpu: $(COLLECTOR_LIB) $(BUILD)/bin/kplan $(COLLECTOR_GPU_BIN)
collector-gpu-check: collector-gpu
	sh tests/gpu/collector_check.sh $(BUILD)

# Writer-path benchmark (bench/bench_collector.c): needs the decoder objects
# and the CUPTI headers, so it gets its own link rule.
$(BUILD)/obj/bench/bench_collector.o: CFLAGS += $(CUDA_INC)
$(BUILD)/bin/bench_collector: $(BUILD)/obj/bench/bench_collector.o $(COLLECTOR_UNIT_OBJ) $(HOST_ARCHIVES)
	@mkdir -p $(dir $@)
	$(quiet) LINK $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(COLLECTOR_UNIT_OBJ) $(HOST_ARCHIVES) $(HOST_LIBS)
