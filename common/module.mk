# common/module.mk - the leaf: errors, logging, containers, clocks, kernel
# names, the facts tables (cuda_api.def, cost_quantities.def), trusted file
# I/O. Built into libkp_common.a (HOST_MODULES in the top Makefile) and, as
# sources, into libkplanrt and the collector. It includes nothing of kplan's
# other folders.

LAYERED += common
common_USES :=
