# fusion/module.mk - fused kernels: the catalog format (fusion/FUSION.md) and
# its reader (catalog.h: catalog_read.c, catalog_expr.c), the generator
# of fused CUDA sources (generate.h: generate.c, generate_emit.c;
# plan_groups.c adds groups to a plan and writes their sources) and the
# catalog of the examples' kernels (fusion/catalog/).
#
# Built into libkp_fusion.a (HOST_MODULES in the top Makefile); `kplan plan
# --catalog` calls it to form fusion groups and writes their sources next to
# the plan. libkplanrt never links it: the runtime loads only what the plan
# names, through plan/ (planfile.h, fused_limits.h). The generator takes the
# graph-node cost from analyzer/cost.h to rank groups.

LAYERED += fusion
fusion_USES := plan analyzer common
