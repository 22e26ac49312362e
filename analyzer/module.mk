# analyzer/module.mk - the analysis of a run in the database: timeline, gaps,
# regions, capturability, the cost model, fusion candidates, the program's own
# graphs, library advice, the ranks of a job. It reads the trace tables and
# writes the kp_* tables of one database; it does not import traces (the
# import-then-analyze pipeline of `kplan validate` is validate/, above both).
#
# Built into libkp_analyzer.a (HOST_MODULES in the top Makefile).

LAYERED += analyzer
analyzer_USES := db common
