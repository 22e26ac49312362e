/*
 * aten_show.c - kplan.torch's fusion groups (plan/aten_groups.h) as `kplan
 * show` and `kplan check` list them, for a plan (PLAN.aten) and for a
 * bundle entry (its plan-<hash>.aten in the bundle).
 */
#include <stdio.h>

#include "cli.h"

#include "../plan/aten_groups.h"

/* bytes as "24.0 KiB" (KiB up to a MiB, then MiB) */
static const char *kib(char *buf, size_t n, int64_t bytes)
{
	if (bytes < 1024 * 1024)
		snprintf(buf, n, "%.1f KiB", (double)bytes / 1024.0);
	else
		snprintf(buf, n, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
	return buf;
}

int kp_cli_show_aten_groups(const char *aten_path, uint64_t plan_hash, int heading)
{
	struct kp_aten_groups *g;
	struct kp_err err = {0};
	char t1[256], t2[256], t3[256], b[32], ops[1600];
	const char *in = heading ? "" : "  ";   /* inside a bundle entry's listing */
	int64_t total = 0;
	size_t i;
	int rc, known = 1;

	rc = kp_aten_groups_read(aten_path, &g, NULL, NULL, &err);
	if (rc == KP_ENOTFOUND)
		return 0;
	if (rc)
		return kp_cli_error(&err);
	for (i = 0; i < g->n_groups; i++) {
		known &= g->groups[i].gain_ns >= 0 && g->groups[i].per_call > 0;
		if (g->groups[i].gain_ns > 0 && g->groups[i].per_call > 0)
			total += g->groups[i].gain_ns * g->groups[i].per_call;
	}
	if (heading)
		printf("\n");
	printf("%storch fusion groups: %zu (%s)%s\n", in, g->n_groups,
	       kp_printable(t1, sizeof(t1), aten_path),
	       g->plan_hash == plan_hash ? "" : "; found with another plan: not used");
	if (known && g->n_groups)
		printf("%s  predicted gain %.1f us when each region runs once (cost model "
		       "defaults)\n", in, (double)total / 1e3);
	for (i = 0; i < g->n_groups; i++) {
		const struct kp_aten_group *u = &g->groups[i];

		printf("%s  %u  %s %s, %u written, %s, %s", in, u->id,
		       kp_printable(t1, sizeof(t1), u->region),
		       kp_printable(t2, sizeof(t2), u->shape), u->outputs,
		       u->exact ? "bit-exact" : "tolerant", kp_printable(t3, sizeof(t3), u->source));
		if (u->gain_ns >= 0)
			printf(", gain %.1f us per occurrence (%lld kernel%s, %s saved), %lld per "
			       "call\n", (double)u->gain_ns / 1e3, (long long)u->saved_kernels,
			       u->saved_kernels == 1 ? "" : "s", kib(b, sizeof(b), u->saved_bytes),
			       (long long)u->per_call);
		else
			printf(", gain not recorded (format 1)\n");
		printf("%s     %s\n", in, kp_printable(ops, sizeof(ops), u->ops));
	}
	kp_aten_groups_free(g);
	return 0;
}
