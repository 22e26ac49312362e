# validate/module.mk - `kplan validate`: the cost model against the measured
# graph times of a validation corpus (bench/cost_corpus/<gpu>/). Each
# workload's trace is imported (importers/), its GPU's calibration stored,
# the run analyzed (analyzer/) and the region's prediction read back: a
# pipeline over both, so it sits above them and the analyzer never imports.
#
# Built into libkp_validate.a (HOST_MODULES in the top Makefile) for the CLI.

LAYERED += validate
validate_USES := analyzer importers db common
