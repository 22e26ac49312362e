# reports/module.mk - the report's browser test (`make test-browser`); the
# reports read the database, the analyzer's cost model and plans (plan/).
#
# Renders a report in headless Chromium (installed through
# `scripts/deps.sh chromium`) and checks the DOM and a screenshot; see
# tests/browser/report_render.sh. Not part of `make test`: the lead adds it
# to .ci/run.

LAYERED += reports
reports_USES := analyzer plan db common

# the page's script is embedded with .incbin
$(BUILD)/obj/reports/page_js.o: reports/page.js

.PHONY: test-browser
$(BUILD)/bin/pngcolors: tests/browser/pngcolors.c
	@mkdir -p $(dir $@)
	$(quiet) CC $@
	$(Q)$(CC) -std=c11 -O2 $(WARN) $(SANFLAGS) -o $@ $< -lz

test-browser: $(BUILD)/bin/kplan $(BUILD)/bin/bench_report $(BUILD)/bin/pngcolors
	@sh scripts/deps.sh chromium
	@sh tests/browser/report_render.sh $(BUILD)
