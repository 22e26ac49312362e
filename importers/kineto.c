/* kineto.c - see kineto.h. */
#include "kineto.h"

#include <string.h>

static const char *const memcpy_kinds[] = {
	"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD",
	"HtoH", "PtoP",
};
static const char *const memory_kinds[] = {
	"Unknown", "Pageable", "Pinned", "Device", "Array", "Managed",
	"Device Static", "Managed Static",
};
static const char *const sync_names[] = {
	"Unknown Sync", "Event Sync", "Stream Wait Event", "Stream Sync", "Context Sync",
};

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

const char *kp__memcpy_kind_name(int kind)
{
	return kind >= 0 && kind < N_OF(memcpy_kinds) ? memcpy_kinds[kind] : "Unknown";
}

const char *kp__memory_kind_name(int kind)
{
	return kind >= 0 && kind < N_OF(memory_kinds) ? memory_kinds[kind] : "Unknown";
}

const char *kp__sync_name(int type)
{
	return type >= 0 && type < N_OF(sync_names) ? sync_names[type] : "Unknown Sync";
}

static int lookup(const char *const *tab, int n, const char *s, size_t len)
{
	int i;

	for (i = 0; i < n; i++) {
		if (strlen(tab[i]) == len && !memcmp(tab[i], s, len))
			return i;
	}
	return -1;
}

int kp__memcpy_kind_parse(const char *s, size_t len)
{
	return lookup(memcpy_kinds, N_OF(memcpy_kinds), s, len);
}

int kp__memory_kind_parse(const char *s, size_t len)
{
	return lookup(memory_kinds, N_OF(memory_kinds), s, len);
}

int kp__sync_parse(const char *name)
{
	return lookup(sync_names, N_OF(sync_names), name, strlen(name));
}

/* "(A -> B)" or "(A)" at p: fill kinds of A (and B). */
static int parse_paren(const char *p, int *a, int *b)
{
	const char *close, *arrow;
	int k;

	if (*p != '(' || !(close = strchr(p, ')')))
		return -1;
	p++;
	arrow = strstr(p, " -> ");
	if (arrow && arrow < close) {
		if (!b)
			return -1;
		if ((k = kp__memory_kind_parse(p, (size_t)(arrow - p))) >= 0)
			*a = k;
		p = arrow + 4;
		if ((k = kp__memory_kind_parse(p, (size_t)(close - p))) >= 0)
			*b = k;
		return 0;
	}
	if ((k = kp__memory_kind_parse(p, (size_t)(close - p))) >= 0)
		*a = k;
	return 0;
}

int kp__memcpy_name_parse(const char *name, int *copy_kind, int *src_kind, int *dst_kind)
{
	const char *p, *sp;
	int k;

	if (strncmp(name, "Memcpy ", 7))
		return -1;
	p = name + 7;
	sp = strchr(p, ' ');
	k = kp__memcpy_kind_parse(p, sp ? (size_t)(sp - p) : strlen(p));
	if (k >= 0)
		*copy_kind = k;
	if (!sp)
		return 0;
	return parse_paren(sp + 1, src_kind, dst_kind);
}

int kp__memset_name_parse(const char *name, int *mem_kind)
{
	if (strncmp(name, "Memset ", 7))
		return -1;
	return parse_paren(name + 7, mem_kind, NULL);
}

int kp__run_update(struct kp_db *db, int64_t run_id, const struct kp__run_update *u,
		   struct kp_err *err)
{
	sqlite3_stmt *st;
	int rc, i = 1;

	rc = kp_db_prepare(db,
		"UPDATE kp_runs SET pid = coalesce(?, pid), device_name = coalesce(?, device_name),"
		" compute_major = coalesce(?, compute_major), compute_minor = coalesce(?, compute_minor),"
		" sm_count = coalesce(?, sm_count), driver_version = coalesce(?, driver_version),"
		" runtime_version = coalesce(?, runtime_version),"
		" cupti_version = coalesce(?, cupti_version) WHERE runId = ?", &st, err);
	if (rc)
		return rc;
#define BIND_OPT(v) do { if (v) sqlite3_bind_int64(st, i, (v)); i++; } while (0)
	BIND_OPT(u->pid);
	if (u->device_name)
		sqlite3_bind_text(st, i, u->device_name, -1, SQLITE_TRANSIENT);
	i++;
	if (u->device_name) {
		/* compute 0.0 is meaningless, but 9.0 has minor 0: bind both with the name */
		sqlite3_bind_int(st, i++, u->compute_major);
		sqlite3_bind_int(st, i++, u->compute_minor);
	} else {
		i += 2;
	}
	BIND_OPT(u->sm_count);
	BIND_OPT(u->driver_version);
	BIND_OPT(u->runtime_version);
	BIND_OPT(u->cupti_version);
#undef BIND_OPT
	sqlite3_bind_int64(st, i, run_id);
	rc = sqlite3_step(st) == SQLITE_DONE ? 0 : kp_db_error(db, err, "updating run");
	sqlite3_finalize(st);
	if (rc || (!u->has_rank && !u->clock_base_ns))
		return rc;
	/* a rank of a job: its place in the job and its offset to the clock
	 * the ranks share (Kineto writes times relative to baseTimeNanoseconds) */
	rc = kp_db_prepare(db, "UPDATE kp_runs SET rank = ?1, world_size = ?2, clock_base_ns = ?3"
			   " WHERE runId = ?4", &st, err);
	if (rc)
		return rc;
	if (u->has_rank)
		sqlite3_bind_int(st, 1, u->rank);
	if (u->has_rank && u->world_size >= 0)
		sqlite3_bind_int(st, 2, u->world_size);
	if (u->clock_base_ns)
		sqlite3_bind_int64(st, 3, u->clock_base_ns);
	sqlite3_bind_int64(st, 4, run_id);
	rc = sqlite3_step(st) == SQLITE_DONE ? 0 : kp_db_error(db, err, "updating run");
	sqlite3_finalize(st);
	return rc;
}
