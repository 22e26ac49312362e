/*
 * err.h - kplan's error type.
 *
 * Library functions return 0 or a negative KP_E* code (or NULL) and fill a
 * caller-owned struct kp_err with the code, a lowercase one-line message and
 * the source location that raised it. Only the CLI prints errors and exits.
 */
#ifndef KP_ERR_H
#define KP_ERR_H

#include <stdarg.h>

enum kp_errcode {
	KP_OK = 0,
	KP_EINVAL = -1,       /* bad argument or option */
	KP_ENOMEM = -2,       /* allocation failed */
	KP_EIO = -3,          /* read/write/open failed */
	KP_EDB = -4,          /* sqlite reported an error */
	KP_EFORMAT = -5,      /* input is not what it claims (corrupt, truncated) */
	KP_EVERSION = -6,     /* input written by a newer/unknown version */
	KP_ENOTFOUND = -7,    /* named thing does not exist */
	KP_EBUSY = -8,        /* resource locked or in use */
	KP_ECUDA = -9,        /* CUDA runtime/driver error */
	KP_ECUPTI = -10,      /* CUPTI error */
	KP_EUNSUPPORTED = -11,/* valid but not supported */
	KP_EMISMATCH = -12,   /* input does not match expectation (plan vs GPU) */
};

struct kp_err {
	int code;          /* one of enum kp_errcode, 0 when no error */
	char msg[512];     /* lowercase, no trailing newline */
	const char *where; /* "file.c:123", static storage */
};

#define KP_STR_(x) #x
#define KP_STR(x) KP_STR_(x)
#define KP_WHERE __FILE__ ":" KP_STR(__LINE__)

/* Fill *err (may be NULL) and return code. printf-style message. */
int kp__err_set(struct kp_err *err, int code, const char *where,
		const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int kp__err_vset(struct kp_err *err, int code, const char *where,
		 const char *fmt, va_list ap);
#define kp_err_set(err, code, ...) kp__err_set((err), (code), KP_WHERE, __VA_ARGS__)

/* Prefix an existing message: "ctx: old message". Keeps code and where. */
void kp_err_prefix(struct kp_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Replace the first occurrence of from in the message with to (for errors
 * raised on a temporary file that the user knows by another name).
 */
void kp_err_rename(struct kp_err *err, const char *from, const char *to);

/* Clear an error back to KP_OK. */
void kp_err_clear(struct kp_err *err);

/* Short stable name of a code, e.g. "EFORMAT". */
const char *kp_errcode_name(int code);

#endif
