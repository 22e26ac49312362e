/* info.h - the summary `kplan info DB` prints. */
#ifndef KP_INFO_H
#define KP_INFO_H

#include <stdio.h>
#include "db.h"

/*
 * Print runs (source, GPU, versions, command, dropped records), and row
 * counts per table, to f.
 */
int kp_db_info(struct kp_db *db, FILE *f, struct kp_err *err);

#endif
