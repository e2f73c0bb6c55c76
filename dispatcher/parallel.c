/* parallel.c — the worker pool behind od_parallel_for (see od_parallel.h).
 *
 * Invariants:
 *  - pool.region is held for the whole of a parallel region, and by resize
 *    and shutdown. od_parallel_for only try-locks it: a caller that finds
 *    it held runs serially, so concurrent requests never queue on the pool
 *    or oversubscribe the cores.
 *  - A job is published under pool.m by bumping pool.gen. Workers
 *    0..wanted-1 must take part in it (the caller waits until `running`
 *    drops to 0, so the job's fields stay valid while any worker reads
 *    them); the other workers see the new generation and go back to sleep.
 *  - Chunks are handed out by an atomic counter, so each index of [0, n) is
 *    passed to fn exactly once whichever threads turn up first.
 *  - Workers block every signal (signals belong to the application's
 *    threads) and mark themselves as inside a region, so a nested
 *    od_parallel_for on a worker runs serially.
 *  - A worker that finishes a job, and a caller waiting for its workers,
 *    poll (yielding) for up to SPIN_NS before sleeping on the condition
 *    variable. On a machine of at most KEEP_OFF_MAX_CPUS CPUs the workers'
 *    affinity excludes the CPU of the last thread that opened a region.
 *  - After fork() the child starts with an empty pool (its workers do not
 *    exist there).
 *  - A thread with a deadline (od_set_deadline) has its loops cut into at
 *    least CANCEL_SLICES chunks per thread, and no chunk starts after the
 *    deadline: a cancelled loop stops within one chunk, and od_cancelled()
 *    tells the caller its results are incomplete.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "od_parallel.h"

#define MAX_THREADS 1024

typedef void (*range_fn)(void *ctx, int64_t begin, int64_t end);

static struct {
    pthread_mutex_t region;
    pthread_mutex_t m;
    pthread_cond_t wake, done;
    pthread_t *threads;
    int nworkers; /* running workers */
    cpu_set_t allowed; /* the CPUs the pool started on (affinity mask) */
    int away_from;     /* the CPU the workers are kept off (the last caller's), -1: none */
    int target;   /* workers asked for when they were started */
    bool stop;
    _Atomic uint64_t gen; /* written under m; atomic so a spinning worker may read it */
    uint64_t start_gen; /* gen when the workers were created: their first "seen" */
    /* the current job */
    range_fn fn;
    void *ctx;
    int64_t n, chunk, nchunks;
    uint64_t deadline; /* the caller's (0: none) */
    atomic_bool cancelled;
    atomic_int_fast64_t next;
    int wanted;
    atomic_int running; /* written under m; atomic so the spinning caller may read it */
} pool = {
    .region = PTHREAD_MUTEX_INITIALIZER,
    .m = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
};

static atomic_int configured_threads; /* 0: default */
static _Thread_local bool in_region;

/* ---- deadlines ---- */

#define CANCEL_SLICES 16
static _Thread_local uint64_t t_deadline; /* 0: none */
static _Thread_local bool t_cancelled;
static atomic_bool g_cancel_all;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool past(uint64_t deadline)
{
    if (!deadline)
        return false;
    if (atomic_load_explicit(&g_cancel_all, memory_order_relaxed))
        return true;
    return deadline != UINT64_MAX && mono_ns() >= deadline;
}

void od_set_deadline(uint64_t deadline_ns)
{
    t_deadline = deadline_ns;
    t_cancelled = false;
}

bool od_cancelled(void)
{
    if (!t_cancelled && past(t_deadline))
        t_cancelled = true;
    return t_cancelled;
}

void od_cancel_all(void) { atomic_store(&g_cancel_all, true); }

/* fn over [0, n) on this thread; in slices that each check the deadline
 * when there is one. */
static void run_serial(range_fn fn, void *ctx, int64_t n, int64_t grain)
{
    if (!t_deadline) {
        fn(ctx, 0, n);
        return;
    }
    int64_t chunk = n / CANCEL_SLICES + 1;
    if (chunk < grain)
        chunk = grain;
    for (int64_t b = 0; b < n; b += chunk) {
        if (od_cancelled())
            return;
        fn(ctx, b, n - b > chunk ? b + chunk : n);
    }
}

static int default_threads(void)
{
    static atomic_int cached;
    int n = atomic_load(&cached);
    if (n > 0)
        return n;
    const char *env = getenv("OD_NUM_THREADS");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == '\0' && v >= 1)
            n = v > MAX_THREADS ? MAX_THREADS : (int)v;
    }
    if (n <= 0) {
        /* Cores this process may run on (cpusets, taskset), else online ones. */
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof set, &set) == 0)
            n = CPU_COUNT(&set);
        if (n <= 0)
            n = (int)sysconf(_SC_NPROCESSORS_ONLN);
        if (n <= 0)
            n = 1;
        if (n > MAX_THREADS)
            n = MAX_THREADS;
    }
    atomic_store(&cached, n);
    return n;
}

int od_get_num_threads(void)
{
    int n = atomic_load(&configured_threads);
    return n > 0 ? n : default_threads();
}

bool od_in_parallel_region(void) { return in_region; }

static void run_chunks(range_fn fn, void *ctx, int64_t n, int64_t chunk, int64_t nchunks,
                       uint64_t deadline)
{
    for (;;) {
        int64_t c = atomic_fetch_add_explicit(&pool.next, 1, memory_order_relaxed);
        if (c >= nchunks)
            return;
        if (deadline && past(deadline)) {
            atomic_store_explicit(&pool.cancelled, true, memory_order_relaxed);
            atomic_store_explicit(&pool.next, nchunks, memory_order_relaxed);
            return;
        }
        int64_t begin = c * chunk;
        int64_t end = n - begin > chunk ? begin + chunk : n;
        fn(ctx, begin, end);
    }
}

/* A worker (or the caller) that has just finished polls this long before it
 * sleeps on the condition variable: a kernel called in a loop publishes its
 * next region within microseconds, while waking a thread whose vCPU went idle
 * costs tens of microseconds (2-vCPU VM, 1e6-element sum in a loop: 55-60 us
 * sleeping at once, 23-40 us polling first). Bounded, so an idle server does
 * not burn a core. */
#define SPIN_NS 30000

/* Between polls the thread yields: when the thread it waits for was queued
 * on this same CPU, a pause-only spin would hold that CPU for the whole
 * SPIN_NS (the region then took 2-5x its serial time). */
static inline void spin_pause(unsigned i)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (i % 16 == 0)
        sched_yield();
}

/* Polls until *v != seen or SPIN_NS pass. */
static void spin_while_u64(_Atomic uint64_t *v, uint64_t seen)
{
    uint64_t t0 = mono_ns();
    for (unsigned i = 1; atomic_load_explicit(v, memory_order_relaxed) == seen; i++) {
        spin_pause(i);
        if (i % 16 == 0 && mono_ns() - t0 > SPIN_NS)
            return;
    }
}

static void spin_while_nonzero(atomic_int *v)
{
    uint64_t t0 = mono_ns();
    for (unsigned i = 1; atomic_load_explicit(v, memory_order_relaxed) != 0; i++) {
        spin_pause(i);
        if (i % 16 == 0 && mono_ns() - t0 > SPIN_NS)
            return;
    }
}

static void *worker_main(void *arg)
{
    int id = (int)(intptr_t)arg;
    in_region = true;
    pthread_mutex_lock(&pool.m);
    /* Not pool.gen: the first job may already be published by the time this
     * thread runs, and it must still take part in it. */
    uint64_t seen = pool.start_gen;
    for (;;) {
        if (!pool.stop && pool.gen == seen) {
            pthread_mutex_unlock(&pool.m);
            spin_while_u64(&pool.gen, seen); /* then the lock orders the job's fields */
            pthread_mutex_lock(&pool.m);
        }
        while (!pool.stop && pool.gen == seen)
            pthread_cond_wait(&pool.wake, &pool.m);
        if (pool.stop)
            break;
        seen = pool.gen;
        if (id >= pool.wanted)
            continue;
        range_fn fn = pool.fn;
        void *ctx = pool.ctx;
        int64_t n = pool.n, chunk = pool.chunk, nchunks = pool.nchunks;
        uint64_t deadline = pool.deadline;
        pthread_mutex_unlock(&pool.m);
        run_chunks(fn, ctx, n, chunk, nchunks, deadline);
        pthread_mutex_lock(&pool.m);
        if (--pool.running == 0)
            pthread_cond_signal(&pool.done);
    }
    pthread_mutex_unlock(&pool.m);
    return NULL;
}

static void atfork_child(void)
{
    /* The workers were not copied into this process: forget them (their
     * thread handles mean nothing here) and start from a clean state. */
    free(pool.threads);
    pool.threads = NULL;
    pool.nworkers = 0;
    pool.stop = false;
    pthread_mutex_init(&pool.region, NULL);
    pthread_mutex_init(&pool.m, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.done, NULL);
    in_region = false;
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }

/* Caller holds pool.region. Creates up to `want` workers; keeps however many
 * the system let it create. */
static void start_workers(int want)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_atfork);
    pool.target = want;
    pool.away_from = -1;
    if (sched_getaffinity(0, sizeof pool.allowed, &pool.allowed) != 0)
        CPU_ZERO(&pool.allowed);
    pool.threads = calloc((size_t)want, sizeof *pool.threads);
    if (!pool.threads)
        return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* inherited by the workers */
    pthread_mutex_lock(&pool.m);
    pool.start_gen = pool.gen;
    int made = 0;
    while (made < want &&
           pthread_create(&pool.threads[made], NULL, worker_main, (void *)(intptr_t)made) == 0)
        made++;
    pool.nworkers = made;
    pthread_mutex_unlock(&pool.m);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (made == 0) {
        free(pool.threads);
        pool.threads = NULL;
    }
}

/* Caller holds pool.region. */
static void stop_workers(void)
{
    if (!pool.threads)
        return;
    pthread_mutex_lock(&pool.m);
    pool.stop = true;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.m);
    for (int i = 0; i < pool.nworkers; i++)
        pthread_join(pool.threads[i], NULL);
    free(pool.threads);
    pool.threads = NULL;
    pthread_mutex_lock(&pool.m);
    pool.nworkers = 0;
    pool.stop = false;
    pthread_mutex_unlock(&pool.m);
}

/* Keeps a pool's workers off the calling thread's CPU on a small machine
 * (od_parallel.h). Left to the scheduler, on a 2-vCPU VM a worker woken by
 * the caller was often queued on the caller's own CPU while the other one
 * idled, and stayed there region after region: the loop ran at serial speed
 * plus the hand-offs (a 1e6-element sigmoid took 210 us with two threads, as
 * with one, instead of 110 us). A change of the caller's CPU costs one system
 * call per worker, so above KEEP_OFF_MAX_CPUS (where an idle CPU is easy for
 * the scheduler to find, and callers move more) the pool does not do it. */
#define KEEP_OFF_MAX_CPUS 8
bool od_keep_off_caller_cpu(const cpu_set_t *allowed, int *away_from, cpu_set_t *set)
{
    int ncpu = CPU_COUNT(allowed);
    if (ncpu < 2 || ncpu > KEEP_OFF_MAX_CPUS)
        return false;
    int cpu = sched_getcpu();
    if (cpu < 0 || cpu >= CPU_SETSIZE || cpu == *away_from || !CPU_ISSET(cpu, allowed))
        return false;
    *set = *allowed;
    CPU_CLR(cpu, set);
    *away_from = cpu;
    return true;
}

/* Caller holds pool.region. */
static void keep_workers_off_caller_cpu(void)
{
    cpu_set_t set;
    if (od_keep_off_caller_cpu(&pool.allowed, &pool.away_from, &set))
        for (int i = 0; i < pool.nworkers; i++)
            pthread_setaffinity_np(pool.threads[i], sizeof set, &set);
}

od_status od_parallel_for(int64_t n, int64_t grain, range_fn fn, void *ctx)
{
    if (!fn || n < 0)
        return OD_EINVAL;
    if (n == 0)
        return OD_OK;
    if (grain < 1)
        grain = 1;
    int threads = od_get_num_threads();
    int64_t useful = n / grain + (n % grain != 0); /* chunks of at least grain */
    if (useful < threads)
        threads = (int)useful;
    if (threads <= 1 || in_region || pthread_mutex_trylock(&pool.region) != 0) {
        run_serial(fn, ctx, n, grain);
        return OD_OK;
    }
    int need = od_get_num_threads() - 1;
    if (pool.threads && pool.target != need)
        stop_workers(); /* the thread count changed since the pool started */
    if (!pool.threads)
        start_workers(need);
    int wanted = threads - 1 < pool.nworkers ? threads - 1 : pool.nworkers;
    if (wanted <= 0) {
        pthread_mutex_unlock(&pool.region);
        run_serial(fn, ctx, n, grain);
        return OD_OK;
    }
    keep_workers_off_caller_cpu();
    int64_t slices = (int64_t)(wanted + 1) * (t_deadline ? CANCEL_SLICES : 1);
    int64_t chunk = n / slices + (n % slices != 0);
    if (chunk < grain && t_deadline)
        chunk = grain;
    pthread_mutex_lock(&pool.m);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.chunk = chunk;
    pool.nchunks = n / chunk + (n % chunk != 0);
    pool.deadline = t_deadline;
    atomic_store(&pool.cancelled, false);
    atomic_store(&pool.next, 0);
    pool.wanted = wanted;
    pool.running = wanted;
    pool.gen++;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.m);

    in_region = true;
    run_chunks(fn, ctx, n, chunk, pool.nchunks, pool.deadline);
    in_region = false;

    spin_while_nonzero(&pool.running); /* the lock below orders the workers' writes */
    pthread_mutex_lock(&pool.m);
    while (pool.running > 0)
        pthread_cond_wait(&pool.done, &pool.m);
    if (atomic_load(&pool.cancelled))
        t_cancelled = true;
    pthread_mutex_unlock(&pool.m);
    pthread_mutex_unlock(&pool.region);
    return OD_OK;
}

void od_set_num_threads(int n)
{
    if (n > MAX_THREADS)
        n = MAX_THREADS;
    /* The next region resizes the pool; nothing to wait for here. */
    atomic_store(&configured_threads, n > 0 ? n : 0);
}

void od_parallel_shutdown(void)
{
    if (in_region) /* the region's own lock is held by this thread */
        return;
    pthread_mutex_lock(&pool.region);
    stop_workers();
    pthread_mutex_unlock(&pool.region);
}

/* Join the workers at exit so leak checkers see no live threads. A region
 * still running on another thread at exit keeps its workers (try-lock). */
__attribute__((destructor)) static void parallel_at_exit(void)
{
    if (pthread_mutex_trylock(&pool.region) == 0) {
        stop_workers();
        pthread_mutex_unlock(&pool.region);
    }
}
