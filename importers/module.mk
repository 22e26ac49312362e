# importers/module.mk - trace readers (PyTorch profiler / Kineto Chrome
# traces, Nsight Systems exports) into the database, and the Chrome-trace
# export. Built into libkp_importers.a (HOST_MODULES in the top Makefile);
# over db/ and common/ only: importing never analyzes.

LAYERED += importers
importers_USES := db common
