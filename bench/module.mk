# bench/module.mk - CPU benchmarks (`make bench`); figures go to docs/PERFORMANCE.md.
BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(patsubst bench/%.c,$(BUILD)/bin/%,$(BENCH_SRC))
ALL_OBJ += $(patsubst %.c,$(BUILD)/obj/%.o,$(BENCH_SRC))

$(BUILD)/bin/bench_%: $(BUILD)/obj/bench/bench_%.o $(HOST_ARCHIVES)
	@mkdir -p $(dir $@)
	$(quiet) LINK $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(HOST_ARCHIVES) $(HOST_LIBS)

bench: $(BENCH_BIN)
	@for b in $(BENCH_BIN); do echo "== $$b"; $$b || exit 1; done
