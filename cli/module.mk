# cli/module.mk - the kplan program: one thin cmd_<verb>.c per subcommand
# over the host libraries (the link rule is in the top Makefile). It may
# include from every host library, and makes no SQLite call (check-layers).

LAYERED += cli
cli_USES := validate reports planner fusion analyzer plan importers db common
