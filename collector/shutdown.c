/*
 * shutdown.c - the collector's end: at exit, flush CUPTI and wait for the
 * writer; on SIGTERM/SIGINT with the default action, have the writer finish
 * the run before the process dies; in a forked child, record nothing.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "../common/log.h"

void kp__col_shutdown(void)
{
	struct timespec ts;

	if (!kp__col.started || getpid() != kp__col.pid || atomic_exchange(&kp__col.shutdown, 1))
		return;
	kp__col_final_flush();
	if (kp__col.thread_created) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 120;
		if (pthread_timedjoin_np(kp__col.writer, NULL, &ts))
			kp_warn("the writer did not finish within 120 s; %s may miss its last records",
				kp__col.out);
	}
	pthread_mutex_lock(&kp__col.mu);
	kp__col.have_writer = 0;
	pthread_mutex_unlock(&kp__col.mu);
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	struct sigaction *old = sig == SIGTERM ? &kp__col.old_term : &kp__col.old_int;

	if (old->sa_flags & SA_SIGINFO) {
		if (old->sa_sigaction) {
			old->sa_sigaction(sig, si, uc);
			return;
		}
	} else if (old->sa_handler == SIG_IGN) {
		return;
	} else if (old->sa_handler != SIG_DFL) {
		old->sa_handler(sig);
		return;
	}
	/*
	 * The default action ends the process: have the writer thread flush
	 * and finish the run first (this thread may have been interrupted
	 * inside CUDA or holding a lock, so it does no CUDA, CUPTI or SQLite
	 * work itself), waiting at most 20 s, then die by the signal.
	 */
	if (kp__col.started && getpid() == kp__col.pid && kp__col.thread_created &&
	    !atomic_exchange(&kp__col.shutdown, 1)) {
		struct timespec tick = { 0, 10 * 1000 * 1000 };
		int i;

		atomic_store(&kp__col.sig_flush, 1);
		for (i = 0; i < 2000 && !atomic_load(&kp__col.finished); i++)
			nanosleep(&tick, NULL);
	}
	sigaction(sig, old, NULL);
	raise(sig);
}

void kp__col_install_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, &kp__col.old_term);
	sigaction(SIGINT, &sa, &kp__col.old_int);
}

void kp__col_atfork_child(void)
{
	/* a forked child has no writer thread and must not flush our run */
	kp__col_forget_thread();
	kp__col.started = 0;
	kp__col.have_writer = 0;
}
