# plan/module.mk - the plan file format: what `kplan plan` writes and what
# libkplanrt reads, so it depends on common/ only (and libsodium, a system
# library, for the signatures of sign.c).
#
# planfile.{h,c} hold the model, reader, writer and checksum (spec:
# plan/FORMAT.md); fused_limits.h the limits of the header of the fused kernel sources a
# plan names (kpfuse-*.cu, fusion/FUSION.md); predict.{h,c} what a plan
# saves (the planner's run prediction, every "saves" figure kplan prints).
# The same sources are built
# twice: into libkp_plan.a (HOST_MODULES in the top Makefile) for the
# planner, fusion, the reports and the CLI, and -fPIC into libkplanrt
# (runtime/module.mk takes $(plan_SRC)).

LAYERED += plan
plan_USES := common
