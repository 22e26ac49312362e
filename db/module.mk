# db/module.mk - the database: schema, open/validate/migrate, the writer,
# the typed read API (read.h), CSV, info. Built into libkp_db.a
# (HOST_MODULES in the top Makefile) and into the collector; over common/.

LAYERED += db
db_USES := common
