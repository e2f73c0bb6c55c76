/* bench_util.h — timing helpers shared by the bench_*.c programs (each is
 * its own binary, so everything here is static). */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "od_parallel.h"

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* This thread's CPU time: for single-threaded timings on a shared machine,
 * where wall time also counts other jobs' turns. */
static inline double cpu_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A standard normal float from a xorshift64 state (Box-Muller): the same
 * inputs on every run, no libc RNG state shared with the code measured. */
static inline double bench_uniform(uint64_t *st)
{
    *st ^= *st << 13;
    *st ^= *st >> 7;
    *st ^= *st << 17;
    return ((double)(*st >> 11) + 0.5) / 9007199254740992.0; /* (0, 1) */
}

static inline float bench_randn(uint64_t *st)
{
    double u = bench_uniform(st);
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * bench_uniform(st)));
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v). */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* memcpy ceiling in GB/s for a buffer of nbytes (read + write counted),
 * split across the same threads the kernels use, so a ratio compares like
 * with like. */
typedef struct copy_job {
    char *dst;
    const char *src;
    size_t chunk, nbytes;
} copy_job;

static inline void copy_part(void *ctx, int64_t begin, int64_t end)
{
    copy_job *j = ctx;
    for (int64_t i = begin; i < end; i++) {
        size_t off = (size_t)i * j->chunk;
        size_t len = off + j->chunk > j->nbytes ? j->nbytes - off : j->chunk;
        memcpy(j->dst + off, j->src + off, len);
    }
}

/* A warm pair of nbytes buffers for memcpy samples taken between a kernel's
 * own: a ceiling sampled right beside each kernel sample follows the host's
 * bursts as the kernel does (one taken minutes earlier does not). A sample
 * copies inner times back to back, where the caller passes its kernel
 * sample's call count: the first pass of either pays for the lines the other
 * left dirty in the cache (up to 64 MB here fits a large L3), so unequal
 * counts favoured the side with more passes (bench_ew compared 3 kernel
 * calls with 50 copies: sqrt at 53 % of memcpy, 95 % with 50 of each). */
typedef struct memcpy_ctx {
    copy_job job;
    int64_t nchunks;
    int inner;
} memcpy_ctx;

static inline void memcpy_open(memcpy_ctx *m, size_t nbytes, int inner)
{
    m->job = (copy_job){aligned_alloc(64, nbytes), aligned_alloc(64, nbytes), 64 * 1024, nbytes};
    memset((char *)m->job.src, 1, nbytes);
    memset(m->job.dst, 2, nbytes);
    m->nchunks = (int64_t)((nbytes + m->job.chunk - 1) / m->job.chunk);
    m->inner = inner;
}

/* One sample, GB/s counting reads plus writes. */
static inline double memcpy_sample(memcpy_ctx *m)
{
    double t0 = now_s();
    for (int i = 0; i < m->inner; i++) {
        od_parallel_for(m->nchunks, 4, copy_part, &m->job); /* >= 256 KiB per thread */
        __asm__ volatile("" ::"r"(m->job.dst) : "memory");
    }
    return 2.0 * (double)m->job.nbytes * m->inner / (now_s() - t0) / 1e9;
}

static inline void memcpy_close(memcpy_ctx *m)
{
    free((void *)m->job.src);
    free(m->job.dst);
}

#endif
