/* workers.c — the call workers: a bounded FIFO of jobs and the threads
 * that run them, so kernels never run on libmicrohttpd's I/O threads.
 *
 * Invariants:
 *  - A job is a function and its argument (a suspended request); each job
 *    submitted is run exactly once, by one worker, even during shutdown
 *    (then with od_workers_stopping() true, so it can answer at once).
 *  - The queue holds at most `cap` jobs; od_workers_submit refuses the
 *    next one instead of growing.
 *  - od_workers_stop runs every queued job, then joins the threads: after
 *    it returns no job is running and none is left.
 *  - Idle workers wait on their own condition variable, listed in `idle`
 *    (a stack, under m); a submit wakes the one that went idle last. Why:
 *    a condvar signal wakes the longest waiter, so one client's calls in
 *    sequence ran on alternating threads, and a fresh caller of OpenBLAS
 *    often landed on the CPU where OpenBLAS's own worker was still polling
 *    from the last call; the two then took turns on one CPU (addmv
 *    1000x1000: 140-150 us in about half the requests, 34-47 us in the
 *    others; one thread, one placement: 38-47 us in every request).
 *  - A worker is in `idle` exactly when its `waiting` flag is set; only
 *    submit and stop clear the flag, and they pop it from `idle` as they do.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>

#include "od_server.h"

typedef struct job {
    void (*fn)(void *arg);
    void *arg;
} job;

typedef struct worker {
    pthread_t thread;
    pthread_cond_t cv;
    bool waiting; /* in W.idle */
} worker;

static struct {
    pthread_mutex_t m;
    job *q;
    size_t cap, head, len;
    bool stopping;
    worker *w;
    int n;
    int *idle; /* indices into w, the last to go idle on top */
    int n_idle;
    long running;
} W = {.m = PTHREAD_MUTEX_INITIALIZER};

/* Under m: wakes the worker that went idle last, if any. */
static void wake_one(void)
{
    if (W.n_idle == 0)
        return;
    worker *k = &W.w[W.idle[--W.n_idle]];
    k->waiting = false;
    pthread_cond_signal(&k->cv);
}

static void *worker_main(void *arg)
{
    int self = (int)(intptr_t)arg;
    worker *me = &W.w[self];
    pthread_mutex_lock(&W.m);
    for (;;) {
        while (W.len == 0 && !W.stopping) {
            me->waiting = true;
            W.idle[W.n_idle++] = self;
            while (me->waiting) /* submit or stop clears it and pops us */
                pthread_cond_wait(&me->cv, &W.m);
        }
        if (W.len == 0) /* stopping and nothing left */
            break;
        job j = W.q[W.head];
        W.head = (W.head + 1) % W.cap;
        W.len--;
        W.running++;
        pthread_mutex_unlock(&W.m);
        j.fn(j.arg);
        pthread_mutex_lock(&W.m);
        W.running--;
    }
    pthread_mutex_unlock(&W.m);
    return NULL;
}

int od_workers_start(int n, size_t cap)
{
    W.q = calloc(cap ? cap : 1, sizeof *W.q);
    W.w = calloc((size_t)n, sizeof *W.w);
    W.idle = calloc((size_t)n, sizeof *W.idle);
    if (!W.q || !W.w || !W.idle) {
        free(W.q), free(W.w), free(W.idle);
        W.q = NULL, W.w = NULL, W.idle = NULL;
        return -1;
    }
    W.cap = cap ? cap : 1;
    /* signals belong to the main thread (sigwaitinfo): keep them off workers */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (W.n = 0; W.n < n; W.n++) {
        pthread_cond_init(&W.w[W.n].cv, NULL);
        if (pthread_create(&W.w[W.n].thread, NULL, worker_main, (void *)(intptr_t)W.n) != 0) {
            pthread_cond_destroy(&W.w[W.n].cv);
            break;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return W.n > 0 ? 0 : -1;
}

bool od_workers_submit(void (*fn)(void *arg), void *arg)
{
    pthread_mutex_lock(&W.m);
    bool ok = !W.stopping && W.len < W.cap;
    if (ok) {
        W.q[(W.head + W.len) % W.cap] = (job){fn, arg};
        W.len++;
        wake_one();
    }
    pthread_mutex_unlock(&W.m);
    return ok;
}

bool od_workers_stopping(void)
{
    pthread_mutex_lock(&W.m);
    bool s = W.stopping;
    pthread_mutex_unlock(&W.m);
    return s;
}

void od_workers_load(long *queued, long *running)
{
    pthread_mutex_lock(&W.m);
    *queued = (long)W.len;
    *running = W.running;
    pthread_mutex_unlock(&W.m);
}

void od_workers_stop(void)
{
    pthread_mutex_lock(&W.m);
    W.stopping = true;
    while (W.n_idle > 0)
        wake_one();
    pthread_mutex_unlock(&W.m);
    for (int i = 0; i < W.n; i++) {
        pthread_join(W.w[i].thread, NULL);
        pthread_cond_destroy(&W.w[i].cv);
    }
    free(W.w);
    free(W.idle);
    free(W.q);
    W.w = NULL;
    W.idle = NULL;
    W.q = NULL;
    W.n = 0;
}
