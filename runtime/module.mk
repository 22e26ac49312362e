# runtime/module.mk - libkplanrt (shared + static) and kplan-calibrate.
#
# The library is built -fPIC -fvisibility=hidden from the runtime sources,
# the plan reader (planner/planfile.c) and common/; it exports only kp_rt_*.
# Its CUDA-free core (runtime/core.c) is also linked into kplan-unit, where
# tests/unit/test_runtime.c drives it with a fake backend.

RT_SRC := runtime/core.c runtime/cuda_backend.c planner/planfile.c $(wildcard common/*.c) \
	runtime/fusion.c runtime/fusion_cuda.c
RT_PIC_OBJ := $(patsubst %.c,$(BUILD)/obj-pic/%.o,$(RT_SRC))
RT_CFLAGS := $(CFLAGS) -fPIC -fvisibility=hidden $(CUDA_INC)
RT_LIBS := -L$(CUDA_LIBDIR) -lcudart -lpthread
ALL_OBJ += $(RT_PIC_OBJ)

RT_UNIT_OBJ := $(BUILD)/obj/runtime/core.o $(BUILD)/obj/runtime/fusion.o
UNIT_EXTRA_OBJ += $(RT_UNIT_OBJ)
ALL_OBJ += $(RT_UNIT_OBJ)
# the top Makefile expanded kplan-unit's prerequisites before this file
$(BUILD)/bin/kplan-unit: $(RT_UNIT_OBJ)

$(BUILD)/obj-pic/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(quiet) CC-PIC $@
	$(Q)$(CC) $(RT_CFLAGS) -c -o $@ $<

$(BUILD)/lib/libkplanrt.so: $(RT_PIC_OBJ)
	@mkdir -p $(dir $@)
	$(quiet) LINK $@
	$(Q)$(CC) $(LDFLAGS) -shared -Wl,--no-undefined -Wl,-soname,libkplanrt.so \
		-o $@ $(RT_PIC_OBJ) $(RT_LIBS) -Wl,-rpath,$(CUDA_LIBDIR)

$(BUILD)/lib/libkplanrt.a: $(RT_PIC_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@
	$(quiet) AR $@
	$(Q)ar rcs $@ $^

# The calibration program: the kplan CLI links no CUDA, it runs this.
$(BUILD)/bin/kplan-calibrate: runtime/calibrate.cu analyzer/cost.h
	@mkdir -p $(dir $@)
	$(quiet) NVCC $@
	$(Q)$(NVCC) -O2 -std=c++17 -arch=sm_90 -o $@ runtime/calibrate.cu \
		-Xlinker -rpath,$(CUDA_LIBDIR)

.PHONY: runtime
runtime: $(BUILD)/lib/libkplanrt.so $(BUILD)/lib/libkplanrt.a $(BUILD)/bin/kplan-calibrate
