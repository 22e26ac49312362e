/* err.c - see err.h. */
#include "err.h"

#include <stdio.h>
#include <string.h>

int kp__err_vset(struct kp_err *err, int code, const char *where,
		 const char *fmt, va_list ap)
{
	if (!err)
		return code;
	err->code = code;
	err->where = where;
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	return code;
}

int kp__err_set(struct kp_err *err, int code, const char *where,
		const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kp__err_vset(err, code, where, fmt, ap);
	va_end(ap);
	return code;
}

void kp_err_prefix(struct kp_err *err, const char *fmt, ...)
{
	char pre[256], old[sizeof(err->msg)];
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(pre, sizeof(pre), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	/* truncation is fine: messages are capped */
	if (snprintf(err->msg, sizeof(err->msg), "%s: %.*s", pre,
		     (int)(sizeof(err->msg) - 1), old) < 0)
		err->msg[0] = '\0';
}

void kp_err_rename(struct kp_err *err, const char *from, const char *to)
{
	char old[sizeof(err->msg)];
	const char *at;

	if (!err || !*from || !(at = strstr(err->msg, from)))
		return;
	memcpy(old, err->msg, sizeof(old));
	at = old + (at - err->msg);
	if (snprintf(err->msg, sizeof(err->msg), "%.*s%s%s", (int)(at - old), old, to,
		     at + strlen(from)) < 0)
		err->msg[0] = '\0';
}

void kp_err_clear(struct kp_err *err)
{
	if (!err)
		return;
	err->code = KP_OK;
	err->msg[0] = '\0';
	err->where = NULL;
}

const char *kp_errcode_name(int code)
{
	switch (code) {
	case KP_OK: return "OK";
	case KP_EINVAL: return "EINVAL";
	case KP_ENOMEM: return "ENOMEM";
	case KP_EIO: return "EIO";
	case KP_EDB: return "EDB";
	case KP_EFORMAT: return "EFORMAT";
	case KP_EVERSION: return "EVERSION";
	case KP_ENOTFOUND: return "ENOTFOUND";
	case KP_EBUSY: return "EBUSY";
	case KP_ECUDA: return "ECUDA";
	case KP_ECUPTI: return "ECUPTI";
	case KP_EUNSUPPORTED: return "EUNSUPPORTED";
	case KP_EMISMATCH: return "EMISMATCH";
	}
	return "EUNKNOWN";
}
