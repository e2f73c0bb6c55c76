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

static inline double memcpy_gbs(int reps, size_t nbytes)
{
    char *src = aligned_alloc(64, nbytes), *dst = aligned_alloc(64, nbytes);
    memset(src, 1, nbytes);
    memset(dst, 2, nbytes);
    copy_job job = {dst, src, 64 * 1024, nbytes};
    int64_t nchunks = (int64_t)((nbytes + job.chunk - 1) / job.chunk);
    int inner = nbytes < (1u << 20) ? 2000 : nbytes < (64u << 20) ? 50 : 5;
    double samples[16];
    reps = reps > 16 ? 16 : reps;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        for (int i = 0; i < inner; i++) {
            od_parallel_for(nchunks, 4, copy_part, &job); /* >= 256 KiB per thread */
            __asm__ volatile("" ::"r"(dst) : "memory");
        }
        samples[r] = 2.0 * (double)nbytes * inner / (now_s() - t0) / 1e9;
    }
    free(src);
    free(dst);
    return median(samples, reps);
}

#endif
