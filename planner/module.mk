# planner/module.mk - deciding what goes in a plan: planner.c turns the
# analyzer's tables (regions, blockers, fusion candidates) into a struct
# kp_plan, written through plan/, and keeps kp_plans; gpuinfo.c describes the
# local GPU for `kplan check`.
#
# Built into libkp_planner.a (HOST_MODULES in the top Makefile) for the CLI.
# It reads the analysis from the database, not through analyzer code, and
# calls no fusion code: `kplan plan --catalog` hands the plan and the graph
# regions' kernels to fusion/ afterwards.

LAYERED += planner
planner_USES := plan db common
