/* rank.c - see rank.h. */
#include "rank.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

/* a whole number in [0, INT_MAX] from name, else -1 */
static int number(const char *(*get)(const char *), const char *name)
{
	const char *s = name ? get(name) : NULL;
	char *end;
	long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 0 || v > INT_MAX)
		return -1;
	return (int)v;
}

int kp_rank_from_env(const char *(*getenv_fn)(const char *name), struct kp_rank *out)
{
	static const struct { const char *rank, *local, *size; } launchers[] = {
		{ "RANK", "LOCAL_RANK", "WORLD_SIZE" },                      /* torchrun */
		{ "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
		  "OMPI_COMM_WORLD_SIZE" },                                  /* Open MPI */
		{ "PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE" },               /* MPICH, Hydra */
		{ "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS" },         /* Slurm */
	};
	size_t i;

	for (i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
		int r = number(getenv_fn, launchers[i].rank);

		if (r < 0)
			continue;
		out->rank = r;
		out->local_rank = number(getenv_fn, launchers[i].local);
		out->world_size = number(getenv_fn, launchers[i].size);
		if (out->world_size >= 0 && r >= out->world_size)
			out->world_size = -1;   /* inconsistent: say nothing */
		out->by = launchers[i].rank;
		return 1;
	}
	return 0;
}
