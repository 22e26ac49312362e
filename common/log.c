/* log.c - see log.h. */
#include "log.h"
#include "printable.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int level = -1;

static int env_level(void)
{
	const char *s = getenv("KPLAN_LOG");

	if (!s)
		return KP_LOG_WARN;
	if (!strcmp(s, "error"))
		return KP_LOG_ERROR;
	if (!strcmp(s, "info"))
		return KP_LOG_INFO;
	if (!strcmp(s, "debug"))
		return KP_LOG_DEBUG;
	return KP_LOG_WARN;
}

void kp_log_set_level(int l) { level = l; }

int kp_log_get_level(void)
{
	if (level < 0)
		level = env_level();
	return level;
}

void kp_log(int l, const char *fmt, ...)
{
	char buf[1024], shown[4 * sizeof(buf)];
	va_list ap;

	if (l > kp_log_get_level())
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	/* one line, whatever names from traces and plans it quotes */
	fprintf(stderr, "kplan: %s%s\n",
		l == KP_LOG_WARN ? "warning: " : l == KP_LOG_ERROR ? "error: " : "",
		kp_printable(shown, sizeof(shown), buf));
}

static int progress_open;

void kp_progress(const char *what, long long done, long long total)
{
	if (!isatty(STDERR_FILENO))
		return;
	if (total > 0)
		fprintf(stderr, "\r%s: %lld/%lld (%d%%)  ", what, done, total,
			(int)(100 * done / total));
	else
		fprintf(stderr, "\r%s: %lld  ", what, done);
	progress_open = 1;
}

void kp_progress_done(void)
{
	if (progress_open)
		fputc('\n', stderr);
	progress_open = 0;
}
