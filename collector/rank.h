/*
 * rank.h - which rank of a multi-process job a recorded process is, from
 * the variables its launcher sets (collector/rank.c).
 *
 * torchrun sets RANK, LOCAL_RANK and WORLD_SIZE; Open MPI's mpirun
 * OMPI_COMM_WORLD_RANK, _LOCAL_RANK and _SIZE; MPICH and Hydra PMI_RANK and
 * PMI_SIZE (MPI_LOCALRANKID); Slurm SLURM_PROCID, SLURM_LOCALID and
 * SLURM_NTASKS. The first launcher whose rank variable is set is taken, in
 * that order, so a torchrun inside a Slurm allocation reports torchrun's
 * ranks.
 */
#ifndef KP_COLLECTOR_RANK_H
#define KP_COLLECTOR_RANK_H

struct kp_rank {
	int rank;          /* global rank, >= 0 */
	int local_rank;    /* on this host, -1 when the launcher does not say */
	int world_size;    /* ranks in the job, -1 when the launcher does not say */
	const char *by;    /* the variable the rank came from (static) */
};

/*
 * Fill *out from the environment getenv_fn reads (getenv in the collector,
 * a table in the tests). 1 when a rank was found, 0 when the process is
 * not a rank of a job we know (or the values are not whole numbers).
 */
int kp_rank_from_env(const char *(*getenv_fn)(const char *name), struct kp_rank *out);

#endif
