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
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "od_server.h"

typedef struct job {
    void (*fn)(void *arg);
    void *arg;
} job;

static struct {
    pthread_mutex_t m;
    pthread_cond_t cv;
    job *q;
    size_t cap, head, len;
    bool stopping;
    pthread_t *threads;
    int n;
    long running;
} W = {.m = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void *worker_main(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&W.m);
    for (;;) {
        while (W.len == 0 && !W.stopping)
            pthread_cond_wait(&W.cv, &W.m);
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
    W.threads = calloc((size_t)n, sizeof *W.threads);
    if (!W.q || !W.threads)
        return -1;
    W.cap = cap ? cap : 1;
    /* signals belong to the main thread (sigwaitinfo): keep them off workers */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (W.n = 0; W.n < n; W.n++)
        if (pthread_create(&W.threads[W.n], NULL, worker_main, NULL) != 0)
            break;
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
        pthread_cond_signal(&W.cv);
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
    pthread_cond_broadcast(&W.cv);
    pthread_mutex_unlock(&W.m);
    for (int i = 0; i < W.n; i++)
        pthread_join(W.threads[i], NULL);
    free(W.threads);
    free(W.q);
    W.threads = NULL;
    W.q = NULL;
    W.n = 0;
}
