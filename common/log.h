/*
 * log.h - leveled logging to stderr, prefixed "kplan: ".
 *
 * Level comes from KPLAN_LOG (error|warn|info|debug), default warn; the CLI
 * raises it with -v. KPLAN_LOG_TAG=WORD makes the prefix "kplan (WORD): ":
 * the unit tests set "expected", so the warnings they provoke on purpose
 * (a missing driver, a damaged source) read as such in a passing run.
 * Thread-safe: each message is one fprintf.
 */
#ifndef KP_LOG_H
#define KP_LOG_H

enum kp_log_level { KP_LOG_ERROR, KP_LOG_WARN, KP_LOG_INFO, KP_LOG_DEBUG };

void kp_log_set_level(int level);
int kp_log_get_level(void);
void kp_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define kp_warn(...) kp_log(KP_LOG_WARN, __VA_ARGS__)
#define kp_info(...) kp_log(KP_LOG_INFO, __VA_ARGS__)
#define kp_debug(...) kp_log(KP_LOG_DEBUG, __VA_ARGS__)

/*
 * Progress line for long work, on stderr only when it is a terminal:
 * "\r<what>: <done>/<total>". kp_progress_done() ends the line.
 */
void kp_progress(const char *what, long long done, long long total);
void kp_progress_done(void);

#endif
