/* od_parallel.h — one persistent worker pool for data-parallel loops.
 *
 * Invariants:
 *  - At most one parallel region runs at a time in the process. A caller that
 *    finds the pool busy (another server request holds it) runs its loop
 *    serially on its own thread instead of waiting: concurrent requests never
 *    oversubscribe the cores.
 *  - A call from inside a parallel region (a worker or the thread that opened
 *    the region) runs serially: no nested parallelism.
 *  - fn is called on disjoint [begin, end) chunks that together cover [0, n)
 *    exactly once; the calling thread runs a chunk itself. od_parallel_for
 *    returns only after every chunk has finished.
 *  - Workers are created lazily on the first parallel region and joined by
 *    od_parallel_shutdown() (also run by a destructor at exit).
 *  - After a region, workers (and the caller, while it waits for them) poll
 *    for at most 30 us before they sleep, yielding the CPU as they poll. On a
 *    machine of 2 to 8 CPUs the workers' affinity leaves out the CPU of the
 *    thread that last opened a region.
 *  - BLAS threading is not managed here; BLAS kernels read od_get_num_threads()
 *    and keep OpenBLAS's own workers off the caller's CPU by the same rule
 *    (od_keep_off_caller_cpu).
 */
#ifndef OD_PARALLEL_H
#define OD_PARALLEL_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "od_error.h"

/* Runs fn(ctx, begin, end) over [0, n) in chunks of at least grain elements
 * (grain < 1 counts as 1). Serial when n <= grain, inside a parallel region,
 * when the pool is busy, or with one thread. ctx: borrowed for the call.
 * Returns OD_EINVAL for a NULL fn or a negative n; n == 0 calls nothing. */
od_status od_parallel_for(int64_t n, int64_t grain, void (*fn)(void *ctx, int64_t begin, int64_t end),
                          void *ctx);

/* Threads a parallel region may use, the caller included: the value set by
 * od_set_num_threads, else the OD_NUM_THREADS environment variable, else the
 * number of online cores. Always >= 1. */
int od_get_num_threads(void);
/* n >= 1 sets the count; n <= 0 goes back to the default. The pool takes
 * the new size at its next region. */
void od_set_num_threads(int n);
/* True on a pool worker and on a thread inside its own parallel region. */
bool od_in_parallel_region(void);
/* A time budget for the calling thread's loops: deadline_ns on the
 * CLOCK_MONOTONIC clock, UINT64_MAX for none but still cancellable by
 * od_cancel_all, 0 to clear. With one set, od_parallel_for starts no chunk
 * after it (it cuts loops finer to make that prompt) and od_cancelled()
 * turns true; results of a cancelled loop are incomplete. Also clears the
 * cancelled state. */
void od_set_deadline(uint64_t deadline_ns);
/* True once the calling thread's deadline has passed (sticky until the next
 * od_set_deadline). Always false without a deadline. */
bool od_cancelled(void);
/* Every thread with a deadline counts as past it from now on (shutdown). */
void od_cancel_all(void);
/* For a pool of threads that poll for work between jobs (this one's,
 * OpenBLAS's): whether to move them off the calling thread's CPU now. True,
 * with *set = *allowed less the caller's CPU, on a machine of 2 to 8 allowed
 * CPUs when the caller's CPU is not *away_from (then set to it); the caller
 * then applies *set to its threads. *away_from starts at -1. Callers
 * serialize calls on one away_from. All pointers borrowed. */
bool od_keep_off_caller_cpu(const cpu_set_t *allowed, int *away_from, cpu_set_t *set);
/* Stops and joins the workers, waiting for a running region to end
 * (idempotent; the pool restarts on next use; a no-op inside a region). */
void od_parallel_shutdown(void);

/* *lowest = min(*lowest, k), atomically: chunks that meet a bad element
 * keep the lowest position, so the caller reports the one a serial loop
 * would have met first. */
static inline void od_atomic_min_i64(_Atomic int64_t *lowest, int64_t k)
{
    int64_t cur = atomic_load_explicit(lowest, memory_order_relaxed);
    while (k < cur && !atomic_compare_exchange_weak_explicit(lowest, &cur, k, memory_order_relaxed,
                                                             memory_order_relaxed))
        ;
}

#endif
