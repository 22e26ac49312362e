/*
 * cli.h - shared pieces of the kplan command-line front end.
 *
 * Each subcommand lives in cli/cmd_<name>.c as `int cmd_<name>(argc, argv)`
 * and is listed in the command table in cli/kplan.c. Subcommands parse
 * options, call library code, print, and return an exit code; only this
 * layer prints errors.
 */
#ifndef KP_CLI_H
#define KP_CLI_H

#include <stdint.h>

#include "../common/err.h"
#include "../common/printable.h"

/* Exit codes, documented in `kplan --help`. */
enum kp_exit {
	KP_EXIT_OK = 0,
	KP_EXIT_VERDICT = 1,  /* ran fine, answer is "no" (diff regressed, soft mismatch) */
	KP_EXIT_ERROR = 2,    /* bad input or failed operation */
	KP_EXIT_USAGE = 64,   /* bad command line */
};

struct kp_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;  /* one line for `kplan --help` */
	const char *usage;    /* full help for `kplan help CMD` / `CMD --help` */
};

/* The command table (cli/kplan.c). */
extern const struct kp_cmd kp_cmds[];
const struct kp_cmd *kp_cmd_find(const char *name);

/* Print "kplan: error: <msg>" and return KP_EXIT_ERROR. */
int kp_cli_error(const struct kp_err *err);
/* Print "kplan CMD: <msg>", a hint to see --help, return KP_EXIT_USAGE. */
int kp_cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print the command's usage text to stdout and return KP_EXIT_OK. */
int kp_cli_help(const char *cmd);
/* 1 when argv holds -h or --help before a "--". */
int kp_cli_wants_help(int argc, char **argv);

/*
 * Analyze run run_id (0: the newest) of the database at path when it has no
 * analysis results yet, saying so in one line on stderr (cli/analyze_first.c).
 * may_write = 0: refuse instead, naming the command to run. 0 when the run
 * is analyzed now (or has nothing to analyze: the caller's error says so).
 */
int kp_cli_analyze_first(const char *cmd, const char *path, int64_t run_id, int may_write,
			 struct kp_err *err);

/*
 * List the torch fusion groups in the file at aten_path (cli/aten_show.c):
 * each group's region, shape, numerics, source, predicted gain and how often
 * a call of its region runs it, its ops
 * on the next line; groups found with another plan than plan_hash are said
 * to be unused. heading: a blank line first and no indent (kplan show), else
 * indented (a bundle entry in kplan check). No file: prints nothing. 0, or
 * KP_EXIT_ERROR (printed) for a file that cannot be read.
 */
int kp_cli_show_aten_groups(const char *aten_path, uint64_t plan_hash, int heading);

/*
 * Each cmd_<name>.c defines the command and its help text:
 *   const char kp_usage_<name>[] = "usage: kplan <name> ...\n";
 *   KP_CMD(<name>) { ... }
 */
#define KP_CMD(name) int cmd_##name(int argc, char **argv)
#define KP_DECLARE_CMD(name) KP_CMD(name); extern const char kp_usage_##name[];
KP_DECLARE_CMD(record) KP_DECLARE_CMD(import) KP_DECLARE_CMD(analyze)
KP_DECLARE_CMD(plan) KP_DECLARE_CMD(report) KP_DECLARE_CMD(diff)
KP_DECLARE_CMD(show) KP_DECLARE_CMD(check) KP_DECLARE_CMD(calibrate) KP_DECLARE_CMD(validate)
KP_DECLARE_CMD(export) KP_DECLARE_CMD(info) KP_DECLARE_CMD(version)
KP_DECLARE_CMD(help) KP_DECLARE_CMD(keygen) KP_DECLARE_CMD(sign) KP_DECLARE_CMD(bundle)
KP_DECLARE_CMD(plans) KP_DECLARE_CMD(precompile)

#endif
