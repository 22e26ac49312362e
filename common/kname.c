/* kname.c - see kname.h. */
#include "kname.h"
#include "hash.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* Copy [b, e) into out as a string. */
static char *copy_span(const char *b, const char *e, char *out, size_t n)
{
	size_t len = (size_t)(e - b);

	if (len >= n)
		len = n - 1;
	memcpy(out, b, len);
	out[len] = '\0';
	return out;
}

/* Read a <source-name> length; returns chars consumed by the digits, 0 if none. */
static size_t read_len(const char *p, size_t *len)
{
	size_t i = 0, v = 0;

	while (isdigit((unsigned char)p[i]) && i < 6)
		v = v * 10 + (size_t)(p[i++] - '0');
	*len = v;
	return i;
}

/*
 * Skip one balanced group that starts after an opening 'I' (template args):
 * returns the pointer after its closing 'E', or NULL when malformed.
 * Source names are skipped by their length, since their text may hold 'E'.
 */
static const char *skip_group(const char *p)
{
	int depth = 1;
	size_t len, nd;

	while (*p && depth > 0) {
		if (isdigit((unsigned char)*p)) {
			nd = read_len(p, &len);
			if (strnlen(p + nd, len) < len)
				return NULL;
			p += nd + len;
			continue;
		}
		switch (*p) {
		case 'L':
			/* literal L<builtin type>[n]<digits>E: its digits are no length */
			if (islower((unsigned char)p[1])) {
				p += 2;
				if (*p == 'n')
					p++;
				while (isalnum((unsigned char)*p) && *p != 'E')
					p++;
				if (*p == 'E')
					p++;
				continue;
			}
			depth++;
			break;
		case 'I': case 'N': case 'X': case 'J':
			depth++;
			break;
		case 'E':
			depth--;
			break;
		case 'S': case 'T':
			/* S_, S<seq>_, T_, T<n>_, or two-letter St/Sa/Ss... */
			if (*p == 'S' && islower((unsigned char)p[1])) {
				p += 2;
				continue;
			}
			p++;
			while (*p && *p != '_' && (isdigit((unsigned char)*p) || isupper((unsigned char)*p)))
				p++;
			if (*p == '_')
				p++;
			continue;
		}
		p++;
	}
	return depth == 0 ? p : NULL;
}

/* Identifier of an Itanium-mangled name; NULL when not understood. */
static char *mangled_ident(const char *s, char *out, size_t n)
{
	const char *p = s + 2, *last = NULL;
	size_t last_len = 0, len, nd;

	if (*p == 'L')  /* internal linkage marker */
		p++;
	if (*p != 'N') {
		nd = read_len(p, &len);
		if (!nd || strnlen(p + nd, len) < len)
			return NULL;
		return copy_span(p + nd, p + nd + len, out, n);
	}
	p++;
	while (*p == 'r' || *p == 'V' || *p == 'K')
		p++;
	while (*p && *p != 'E') {
		if (isdigit((unsigned char)*p)) {
			nd = read_len(p, &len);
			if (strnlen(p + nd, len) < len)
				return NULL;
			last = p + nd;
			last_len = len;
			p += nd + len;
		} else if (*p == 'I') {
			p = skip_group(p + 1);
			if (!p)
				return NULL;
		} else if (*p == 'S') {
			if (islower((unsigned char)p[1])) {
				p += 2;
				continue;
			}
			p++;
			while (*p && *p != '_')
				p++;
			if (*p)
				p++;
		} else if (*p == 'L') {
			p++;  /* internal-linkage name inside a nested name */
		} else {
			return NULL;  /* ctor/dtor/operator names etc.: not kernels */
		}
	}
	if (!last || *p != 'E')
		return NULL;
	return copy_span(last, last + last_len, out, n);
}

char *kp_kernel_short_name(const char *name, char *out, size_t n)
{
	static const char anon[] = "(anonymous namespace)::";
	char buf[1024];
	const char *s = buf, *end, *p, *begin;
	size_t i = 0;

	if (!n)
		return out;
	/* drop "(anonymous namespace)::": its space and parenthesis mislead below */
	while (*name && i + 1 < sizeof(buf)) {
		if (!strncmp(name, anon, sizeof(anon) - 1)) {
			name += sizeof(anon) - 1;
			continue;
		}
		buf[i++] = *name++;
	}
	buf[i] = '\0';
	/* the qualified identifier ends at the first '<' or '(' */
	for (end = s; *end && *end != '<' && *end != '('; end++)
		;
	/* skip a return type: the last space before end */
	begin = s;
	for (p = s; p < end; p++) {
		if (*p == ' ')
			begin = p + 1;
	}
	/* drop namespace qualifiers */
	for (p = begin; p + 1 < end; p++) {
		if (p[0] == ':' && p[1] == ':')
			begin = p + 2;
	}
	if (end == begin)
		return copy_span(s, s + strlen(s), out, n);
	return copy_span(begin, end, out, n);
}

char *kp_kernel_ident(const char *name, char *out, size_t n)
{
	if (!n)
		return out;
	if (!name)
		name = "";
	if (name[0] == '_' && name[1] == 'Z' && mangled_ident(name, out, n))
		return out;
	if (name[0] == '_' && name[1] == 'Z')
		return copy_span(name, name + strlen(name), out, n);
	return kp_kernel_short_name(name, out, n);
}

uint64_t kp_kernel_sig(const char *name, const uint32_t grid[3],
		       const uint32_t block[3], uint32_t dynamic_smem)
{
	char ident[512], buf[640];
	int len;

	kp_kernel_ident(name, ident, sizeof(ident));
	len = snprintf(buf, sizeof(buf), "%s|%u,%u,%u|%u,%u,%u|%u", ident,
		       grid[0], grid[1], grid[2], block[0], block[1], block[2], dynamic_smem);
	if (len < 0)
		len = 0;
	if ((size_t)len >= sizeof(buf))
		len = sizeof(buf) - 1;
	return kp_hash64(buf, (size_t)len, KP_HASH_SEED);
}

uint64_t kp_fp_add(uint64_t fp, uint64_t kernel_sig)
{
	return kp_hash_mix(fp, kernel_sig);
}
