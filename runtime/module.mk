# runtime/module.mk - libkplanrt (shared + static) and kplan-calibrate.
#
# The library is built -fPIC -fvisibility=hidden from the runtime sources,
# plan/ (it reads plans through plan/'s reader) and common/; it exports only
# kp_rt_*; libsodium is linked into the .so statically (a program linking
# libkplanrt.a adds -l:libsodium.a). Nothing of planner/ or fusion/ goes in: the limits of the fused
# sources a plan names come from plan/fused_limits.h. Its CUDA-free core
# (runtime/core.c) is also linked into kplan-unit, where
# tests/unit/test_runtime.c drives it with a fake backend; so are fused_load.c,
# fcache.c (the kernel cache's checks, tests/unit/test_fusion.c),
# gpatch.c (foreign-graph patching) and watch_calls.c (the calls the watch
# refuses by name, checked against the collector's and the analyzer's).

RT_SRC := runtime/core.c runtime/cuda_backend.c $(plan_SRC) $(wildcard common/*.c) \
	runtime/fused_load.c runtime/fcache.c runtime/fused_load_cuda.c runtime/watch.c \
	runtime/watch_calls.c runtime/gpatch.c runtime/kfuse.c
RT_PIC_OBJ := $(patsubst %.c,$(BUILD)/obj-pic/%.o,$(RT_SRC))
RT_CFLAGS := $(CFLAGS) -fPIC -fvisibility=hidden $(CUDA_INC)
# libsodium (plan signatures) goes in statically, its symbols kept local
# (--exclude-libs): the GPU machines have no libsodium, and the library
# exports kp_rt_* only.
RT_LIBS := -L$(CUDA_LIBDIR) -lcudart -l:libsodium.a -lpthread -ldl -Wl,--exclude-libs,ALL
ALL_OBJ += $(RT_PIC_OBJ)

# include/: the public header (kplan/runtime.h)
LAYERED += runtime
runtime_USES := plan common include

RT_UNIT_OBJ := $(BUILD)/obj/runtime/core.o $(BUILD)/obj/runtime/fused_load.o \
	$(BUILD)/obj/runtime/fcache.o $(BUILD)/obj/runtime/gpatch.o \
	$(BUILD)/obj/runtime/watch_calls.o
UNIT_EXTRA_OBJ += $(RT_UNIT_OBJ)
ALL_OBJ += $(RT_UNIT_OBJ)
# the top Makefile expanded kplan-unit's prerequisites before this file
$(BUILD)/bin/kplan-unit: $(RT_UNIT_OBJ)

$(BUILD)/obj-pic/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(quiet) CC-PIC $@
	$(Q)$(CC) $(RT_CFLAGS) -c -o $@ $<

# watch.c: CUPTI headers for types only; libcupti is dlopen'ed (found under
# CUDA_HOME when not on the loader's path), never linked
$(BUILD)/obj-pic/runtime/watch.o: RT_CFLAGS += -DKP_CUDA_HOME='"$(CUDA_HOME)"' \
	$(addprefix -I,$(wildcard $(CUDA_HOME)/extras/CUPTI/include))

# Versioned: the real file is libkplanrt.so.$(RT_VERSION) with soname
# libkplanrt.so.$(RT_SOVERSION); libkplanrt.so.$(RT_SOVERSION) and
# libkplanrt.so are copies of it (below), so that `-lkplanrt` from $(BUILD)/lib and
# the rpath $ORIGIN/../lib of the programs built here keep working. Bump
# RT_SOVERSION when kp_rt_* changes incompatibly; the exported list is checked
# by scripts/check_exports.sh (`make test`).
KP_VERSION := $(shell sed -n 's/^\#define KP_VERSION "\(.*\)"/\1/p' common/version.h)
RT_SOVERSION := 0
RT_VERSION := $(RT_SOVERSION).1.0
RT_SONAME := libkplanrt.so.$(RT_SOVERSION)
RT_REAL := $(BUILD)/lib/libkplanrt.so.$(RT_VERSION)

$(RT_REAL): $(RT_PIC_OBJ)
	@mkdir -p $(dir $@)
	$(quiet) LINK $@
	$(Q)$(CC) $(LDFLAGS) -shared -Wl,--no-undefined -Wl,-soname,$(RT_SONAME) \
		-o $@ $(RT_PIC_OBJ) $(RT_LIBS) -Wl,-rpath,$(CUDA_LIBDIR)

# In the build tree .so.$(RT_SOVERSION) and .so are copies, not links: a build
# copied to another machine (the GPU machines get build/ that way) may lose
# symbolic links, and the programs built here need the soname file. `make
# install` makes the usual links.
$(BUILD)/lib/libkplanrt.so: $(RT_REAL)
	$(Q)rm -f $(BUILD)/lib/$(RT_SONAME) $@
	$(Q)cp $(RT_REAL) $(BUILD)/lib/$(RT_SONAME)
	$(Q)cp $(RT_REAL) $@

$(BUILD)/lib/libkplanrt.a: $(RT_PIC_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@
	$(quiet) AR $@
	$(Q)ar rcs $@ $^

# The calibration program: the kplan CLI links no CUDA, it runs this.
$(BUILD)/bin/kplan-calibrate: runtime/calibrate.cu common/cost_quantities.h common/cost_quantities.def
	@mkdir -p $(dir $@)
	$(quiet) NVCC $@
	$(Q)$(NVCC) -O2 -std=c++17 -arch=sm_90 -o $@ runtime/calibrate.cu \
		-L$(CUDA_LIBDIR) -lcublas -lcupti -Xlinker -rpath,$(CUDA_LIBDIR)

.PHONY: runtime
runtime: $(BUILD)/lib/libkplanrt.so $(BUILD)/lib/libkplanrt.a $(BUILD)/bin/kplan-calibrate

# The watch's GPU check (tests/gpu/watch_check.sh; needs a GPU to run, not to
# build): each case runs a body under kp_rt_watch_begin/end and under the
# backend's own hooks, whose recorded launches it checks: so it links
# libkplanrt.a (the internal symbols are hidden in the .so). Shared cudart,
# as in the examples.
$(BUILD)/bin/kplan-watch-check: tests/gpu/watch_check.cu include/kplan/runtime.h runtime/rt_internal.h \
		$(BUILD)/lib/libkplanrt.a
	@mkdir -p $(dir $@)
	$(quiet) NVCC $@
	$(Q)$(NVCC) -O2 -std=c++17 -arch=sm_90 -I. -Iinclude -Xcompiler -Wall -cudart shared -o $@ $< \
		$(BUILD)/lib/libkplanrt.a -l:libsodium.a -ldl -lpthread \
		-Xlinker -rpath,$(CUDA_LIBDIR)

# Built with the runtime (so `make gpu-build` has it); `make watch-check`
# builds it and kplan-mkplan (for the plan the script writes), and
# `make gpu-check-watch` runs it.
runtime: $(BUILD)/bin/kplan-watch-check
.PHONY: watch-check gpu-check-watch
watch-check: $(BUILD)/bin/kplan-watch-check $(BUILD)/bin/kplan-mkplan
gpu-check-watch: watch-check
	bash tests/gpu/watch_check.sh $(BUILD) $(BUILD)/gpu-check/watch
