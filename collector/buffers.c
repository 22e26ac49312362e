/*
 * buffers.c - CUPTI's activity buffers: a small pool of them, and the bounded
 * queue that hands completed ones to the writer thread (KPLAN_MEM_MB; a
 * buffer that does not fit is dropped and its records counted).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static uint8_t *buf_get(void)
{
	uint8_t *p = NULL;

	pthread_mutex_lock(&kp__col.mu);
	if (kp__col.npool)
		p = kp__col.pool[--kp__col.npool];
	pthread_mutex_unlock(&kp__col.mu);
	if (!p)
		p = calloc(1, kp__col.buf_size);   /* zeroed (fresh pages: no stall) */
	return p;
}

/* Back to the pool, zeroed: CUPTI is told our buffers come zeroed so that
 * it does not zero them itself in the application's thread. */
void kp__col_buf_put(uint8_t *p)
{
	if (kp__col.zeroed_buffers)
		memset(p, 0, kp__col.buf_size);
	pthread_mutex_lock(&kp__col.mu);
	if (kp__col.npool < (int)(sizeof(kp__col.pool) / sizeof(kp__col.pool[0]))) {
		kp__col.pool[kp__col.npool++] = p;
		p = NULL;
	}
	pthread_mutex_unlock(&kp__col.mu);
	free(p);
}

int64_t kp__col_count_records(uint8_t *buf, size_t valid)
{
	CUpti_Activity *rec = NULL;
	int64_t n = 0;

	while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS)
		n++;
	return n;
}

void CUPTIAPI kp__col_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*max_records = 0;
	*buffer = buf_get();
	*size = *buffer ? kp__col.buf_size : 0;
}

void CUPTIAPI kp__col_buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
				      size_t size, size_t valid)
{
	size_t dropped = 0;
	int queued = 0;

	if (ctx && cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS
	    && dropped)
		atomic_fetch_add(&kp__col.drop_cupti, (long long)dropped);
	if (!buffer)
		return;
	if (valid) {
		pthread_mutex_lock(&kp__col.mu);
		if (kp__col.have_writer && !kp__col.stop && !atomic_load(&kp__col.db_failed) &&
		    kp__col.queued_bytes + size <= kp__col.mem_bytes) {
			if (kp__col.qlen == kp__col.qcap) {
				size_t cap = kp__col.qcap ? 2 * kp__col.qcap : 64, i;
				struct kp__qbuf *nq = malloc(cap * sizeof(*nq));

				if (nq) {
					for (i = 0; i < kp__col.qlen; i++)
						nq[i] = kp__col.q[(kp__col.qhead + i) % kp__col.qcap];
					free(kp__col.q);
					kp__col.q = nq;
					kp__col.qhead = 0;
					kp__col.qcap = cap;
				}
			}
			if (kp__col.qlen < kp__col.qcap) {
				kp__col.q[(kp__col.qhead + kp__col.qlen) % kp__col.qcap] = (struct kp__qbuf){ buffer, size, valid };
				kp__col.qlen++;
				kp__col.queued_bytes += size;
				queued = 1;
				pthread_cond_signal(&kp__col.cv);
			}
		}
		pthread_mutex_unlock(&kp__col.mu);
		if (!queued) {
			int64_t n = kp__col_count_records(buffer, valid);

			if (atomic_load(&kp__col.db_failed)) {
				atomic_fetch_add(&kp__col.drop_db_records, n);
			} else {
				atomic_fetch_add(&kp__col.drop_queue_records, n);
				atomic_fetch_add(&kp__col.drop_queue_buffers, 1);
			}
		}
	}
	if (!queued)
		kp__col_buf_put(buffer);
}
