# kplan - one non-recursive build.
#
#   make            build the CLI (build/bin/kplan), host libraries, libkplanrt,
#                   the collector and, where nvcc is found, kplan-calibrate
#   make test       install missing packages, build, run every CPU test
#   make asan       the same tests under AddressSanitizer + UBSan
#   make demo       run the main job on the bundled trace
#   make gpu-check  build and run the GPU end-to-end checks (needs a GPU)
#   make bench      CPU benchmarks (figures in docs/PERFORMANCE.md)
#   make install    PREFIX=/usr/local DESTDIR= (and uninstall; make deb)
#
# Variables: CUDA_HOME (default /usr/local/cuda), BUILD (output dir),
# WERROR=0 to relax warnings, SANITIZER=address,undefined.

CUDA_HOME ?= /usr/local/cuda
BUILD ?= build
WERROR ?= 1
SANITIZER ?=
OPT ?= -O2

CC ?= gcc
NVCC ?= $(CUDA_HOME)/bin/nvcc
HAVE_NVCC := $(shell command -v $(NVCC) 2>/dev/null)
# kplan-calibrate where nvcc is (built by all, installed by install)
CALIBRATE_BIN := $(if $(HAVE_NVCC),$(BUILD)/bin/kplan-calibrate)

# quiet by default; V=1 prints full commands
ifeq ($(V),1)
Q :=
quiet = @true
else
Q := @
quiet = @printf '  %-6s %s\n'
endif

WARN := -Wall -Wextra -Wshadow -Wno-unused-parameter -Wstrict-prototypes
ifeq ($(WERROR),1)
WARN += -Werror
endif
SANFLAGS := $(if $(SANITIZER),-fsanitize=$(SANITIZER) -fno-omit-frame-pointer -fno-sanitize-recover=all)
CFLAGS := -std=c11 -D_GNU_SOURCE $(OPT) -g $(WARN) $(SANFLAGS) -MMD -MP -I.
LDFLAGS := $(SANFLAGS)
# libcsv, yajl and libsodium (plan signatures, plan/sign.c) are linked
# statically so the binaries run where only libsqlite3 is installed (the GPU
# machines).
HOST_LIBS := -lsqlite3 -l:libcsv.a -l:libyajl_s.a -l:libsodium.a -lz -lm -lpthread

# CUDA pieces (collector, runtime, examples) find everything through CUDA_HOME.
CUDA_INC := -I$(CUDA_HOME)/include
CUDA_LIBDIR := $(CUDA_HOME)/lib64

.PHONY: all deps test asan demo gpu-check bench clean unit
all: $(BUILD)/bin/kplan

deps:
	@sh scripts/deps.sh $(DEPS_GROUPS)

# ---------------------------------------------------------------------------
# Host libraries, one static archive per module, in dependency order
# (a module may use the ones after it).
HOST_MODULES := validate reports planner fusion analyzer plan importers db common

define module_rules
$(1)_SRC := $$(wildcard $(1)/*.c) $$(wildcard $(1)/*.S)
$(1)_OBJ := $$(patsubst %,$(BUILD)/obj/%.o,$$(basename $$($(1)_SRC)))
$(BUILD)/lib/libkp_$(1).a: $$($(1)_OBJ)
	@mkdir -p $$(dir $$@)
	@rm -f $$@
	$$(quiet) AR $$@
	$$(Q)ar rcs $$@ $$^
ALL_OBJ += $$($(1)_OBJ)
endef
$(foreach m,$(HOST_MODULES),$(eval $(call module_rules,$(m))))

HOST_ARCHIVES := $(foreach m,$(HOST_MODULES),$(BUILD)/lib/libkp_$(m).a)

$(BUILD)/obj/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(quiet) CC $@
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/obj/%.o: %.S | deps
	@mkdir -p $(dir $@)
	$(quiet) AS $@
	$(Q)$(CC) $(SANFLAGS) -c -o $@ $<

# the schema is embedded with .incbin
$(BUILD)/obj/db/schema_blob.o: db/schema.sql

# ---------------------------------------------------------------------------
# CLI
CLI_SRC := $(wildcard cli/*.c)
CLI_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(CLI_SRC))
ALL_OBJ += $(CLI_OBJ)

$(BUILD)/bin/kplan: $(CLI_OBJ) $(HOST_ARCHIVES)
	@mkdir -p $(dir $@)
	$(quiet) LINK $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(HOST_ARCHIVES) $(HOST_LIBS) -Wl,-rpath,'$$ORIGIN/../lib'

# ---------------------------------------------------------------------------
# Component makefiles (CUDA pieces, browser test, fuzzing, benchmarks) add
# their own targets (each GPU part also has its own check target, e.g.
# collector-gpu-check, to run one alone) and append to UNIT_EXTRA_OBJ. They
# are read before the unit-test rule so that its prerequisites see it all.
# plan/, fusion/ and planner/ come first: their archives are built above,
# their module.mk says what each may use (runtime/ takes $(plan_SRC)).
UNIT_EXTRA_OBJ :=
-include plan/module.mk fusion/module.mk planner/module.mk
-include analyzer/module.mk validate/module.mk
-include common/module.mk db/module.mk importers/module.mk cli/module.mk
-include collector/module.mk runtime/module.mk examples/module.mk
-include tests/module.mk bench/module.mk reports/module.mk
-include packaging/module.mk

all: $(COLLECTOR_LIB) $(BUILD)/lib/libkplanrt.so $(BUILD)/lib/libkplanrt.a
# kplan-calibrate (what `kplan calibrate` runs) needs nvcc to build, not a
# GPU; without nvcc the rest still builds and `kplan calibrate` says so.
all: $(CALIBRATE_BIN)

# Layers: a module.mk adds its folder to LAYERED and names in <dir>_USES the
# folders its sources may include from; check-layers (part of `make test`)
# fails on any other include, so that the dependencies run one way
# (docs/DESIGN.md, "Layout"), on files of one folder that call each other
# round a circle (scripts/check_cycles.py), on an SQLite call in cli/, and on
# a query of its own in a reader moved to db/read.h.
# The readers moved to db/read.h, which hold no SQL of their own.
READ_API_ONLY := importers/chrome_export.c reports/timeline.c

.PHONY: check-layers
check-layers:
	@sh scripts/check_layers.sh $(foreach d,$(LAYERED),'$(d) $($(d)_USES)')
	@python3 scripts/check_cycles.py $(HOST_MODULES) runtime collector cli
	@! grep -n 'sqlite3_' cli/*.c || { echo "check-layers: cli/ calls SQLite; ask db/ or the library that owns the table" >&2; exit 1; }
	@! grep -n 'sqlite3_\|kp_db_prepare\|kp_db_int(\|kp_db_exec(' $(READ_API_ONLY) || { echo "check-layers: $(READ_API_ONLY) read the database through db/read.h only" >&2; exit 1; }
	@! python3 scripts/check_cycles.py tests/fixtures/cycles 2>/dev/null || \
		{ echo "check-cycles: the known circle in tests/fixtures/cycles was not found" >&2; exit 1; }

# ---------------------------------------------------------------------------
# Unit tests (CUnit): one suite per module, listed in tests/unit/suites.h.
UNIT_SRC := $(wildcard tests/unit/*.c)
UNIT_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(UNIT_SRC))
ALL_OBJ += $(UNIT_OBJ)

$(BUILD)/bin/kplan-unit: $(UNIT_OBJ) $(UNIT_EXTRA_OBJ) $(HOST_ARCHIVES)
	@mkdir -p $(dir $@)
	$(quiet) LINK $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $(UNIT_OBJ) $(UNIT_EXTRA_OBJ) $(HOST_ARCHIVES) $(HOST_LIBS) -lcunit

# libkplanrt too: the precompile and bundle tests load it next to kplan (an
# older copy there would fail them; none at all skips them)
unit: $(BUILD)/bin/kplan-unit $(BUILD)/bin/kplan $(BUILD)/lib/libkplanrt.so
	KPLAN_BIN=$(abspath $(BUILD)/bin/kplan) KPLAN_SRC=$(CURDIR) $(BUILD)/bin/kplan-unit

# The Python package (python/kplan) with stand-ins for torch and libkplanrt:
# CPU only, no torch needed (tests/python).
# A sanitized libkplanrt cannot load into an uninstrumented python3 (ASan
# aborts it), so under SANITIZER the binding's tests look at build/lib.
.PHONY: python-test
python-test:
	@command -v python3 >/dev/null || { echo "python-test: python3 not found (apt-get install -y python3)" >&2; exit 1; }
	$(if $(SANITIZER),BUILD=build) PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$(CURDIR)/python \
		python3 -m unittest discover -s tests/python -t tests/python

test: deps
	@$(MAKE) --no-print-directory check-layers
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory python-test
	@$(MAKE) --no-print-directory check-exports
	@$(MAKE) --no-print-directory install-test
	@$(MAKE) --no-print-directory validate-corpus

# The cost model against the graph times measured on each GPU of the
# validation corpus (bench/cost_corpus/<gpu>/, bench/cost_corpus.py): CPU
# only, the traces and the measurements are in the repository. Eager traces
# made without the capture trick (WORKLOAD_plain.json.gz, from
# bench/cost_corpus_plain.sh) add the interval checks: every measured time
# inside its interval, and a workload beyond --max-error passes only inside
# an interval at most VALIDATE_WIDTH wide (hi/lo); each plain trace needs its
# ground_truth.csv row.
VALIDATE_LIMITS ?= --max-median 10 --max-error 20
VALIDATE_WIDTH ?= 1.7
.PHONY: validate-corpus
validate-corpus: $(BUILD)/bin/kplan
	@for d in bench/cost_corpus/*/; do \
		g=$$(basename $$d); lim="$(VALIDATE_LIMITS)"; plain=""; \
		for t in $$d*_plain.json.gz; do \
			[ -e "$$t" ] || continue; w=$$(basename $$t .json.gz); plain="$$plain $$w"; \
			grep -q "^$$w," $$d/ground_truth.csv \
				|| { echo "validate-corpus: $$g: $$w has no ground_truth.csv row"; exit 1; }; \
		done; \
		[ -z "$$plain" ] || lim="$$lim --min-coverage 100 --max-width $(VALIDATE_WIDTH)"; \
		$(BUILD)/bin/kplan validate $$d $$lim > $(BUILD)/validate-$$g.log 2>&1 \
			|| { cat $(BUILD)/validate-$$g.log; echo "validate-corpus: $$g failed"; exit 1; }; \
		echo "validate-corpus: $$g: $$(tail -1 $(BUILD)/validate-$$g.log)"; \
		echo "validate-corpus: $$g: plain eager traces:$${plain:- none (interval checks inactive)}"; \
	done

asan:
	@$(MAKE) --no-print-directory BUILD=build-asan SANITIZER=address,undefined OPT=-O1 test

demo: deps $(BUILD)/bin/kplan
	@sh scripts/demo.sh $(BUILD)/bin/kplan

# GPU end-to-end: build everything the checks need, then run them all
# (tests/gpu/gpu-check.sh). On a GPU machine without the build's Debian
# packages, build here with `make gpu-build` and run the script there.
.PHONY: gpu-build
gpu-build: all collector-gpu runtime examples stress-gpu corpus

gpu-check: gpu-build
	bash tests/gpu/gpu-check.sh $(BUILD) $(BUILD)/gpu-check

clean:
	rm -rf build build-asan demo-out

-include $(ALL_OBJ:.o=.d)
