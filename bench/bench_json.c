/* bench_json.c — the JSON codec's number paths against libc, in one run.
 *
 * Issue 14 item 3: number scanning and float printing dominate a JSON call
 * with tensor data (64x64 mm: ~44 % and ~24 % of the server's time). This
 * times, on 2^20 random normal float32 values:
 *   - scanning the text numpy + json.dumps sends (each float32 widened to a
 *     double and printed as Python's repr: 16-17 significant digits) into
 *     float32 with od_scan_f32, against strtof on the same text;
 *   - scanning the shortest float32 text (what the server itself prints);
 *   - the same texts into float64 with od_scan_f64, against strtod;
 *   - printing float32 with od_fmt_f32 (shortest round trip), against
 *     snprintf("%.9g"), the shortest libc way to round-trip a float.
 * The scans go through od_scan_f32_run / od_scan_f64_run and the printing
 * through od_fmt_f32_items, the calls the JSON codec makes for tensor data.
 * Each row is the median of 7 passes over the whole set, in this thread's
 * CPU time (these machines are shared: wall time also counts the other
 * jobs' turns); ns per number, MB/s of text, and libc's time over ours.
 * Every result is checked against libc first (bit for bit), so a fast
 * wrong path cannot report a number.
 *
 * Usage: bench_json [--quick]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "od_proto.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

/* "x, y, z" with each number printed by fmt (f32 or f64 of the float). */
static char *make_text(const float *v, int n, int as_double, size_t *len)
{
    char *t = malloc((size_t)n * 34 + 1), *o = t;
    for (int i = 0; i < n; i++) {
        if (i) {
            *o++ = ',';
            *o++ = ' ';
        }
        o += as_double ? od_fmt_f64((double)v[i], o) : od_fmt_f32(v[i], o);
    }
    *o = '\0';
    *len = (size_t)(o - t);
    return t;
}

static volatile float sink_f;
static volatile double sink_d;

typedef enum { SCAN_F32, SCAN_F64, LIBC_F32, LIBC_F64 } scan_kind;

/* One pass over text: returns how many numbers it read. */
static int scan_pass(const char *t, size_t len, scan_kind k, float *of, double *od)
{
    const char *p = t, *end = t + len;
    if (k == SCAN_F32)
        return (int)od_scan_f32_run(&p, end, of, INT64_MAX);
    if (k == SCAN_F64)
        return (int)od_scan_f64_run(&p, end, od, INT64_MAX);
    int n = 0;
    while (p < end) {
        char *q;
        if (k == LIBC_F32)
            of[n] = strtof(p, &q);
        else
            od[n] = strtod(p, &q);
        p = q;
        n++;
        if (p < end)
            p += 2; /* ", " */
    }
    return n;
}

static double time_scan(const char *t, size_t len, scan_kind k, float *of, double *od, int reps)
{
    double s[16];
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_now_s();
        scan_pass(t, len, k, of, od);
        s[r] = cpu_now_s() - t0;
    }
    return median(s, reps);
}

static double time_print(const float *v, int n, char *buf, int libc, int reps)
{
    double s[16];
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_now_s();
        char *o = buf;
        if (libc) {
            for (int i = 0; i < n; i++)
                o += snprintf(o, 32, i ? ",%.9g" : "%.9g", (double)v[i]);
        } else {
            size_t done;
            o += od_fmt_f32_items(v, (size_t)n, false, o, &done);
        }
        s[r] = cpu_now_s() - t0;
        sink_f = (float)(o - buf);
    }
    return median(s, reps);
}

static void row(const char *what, double ours, double peer, int n, size_t bytes)
{
    printf("%-44s %7.1f ns %8.1f MB/s   libc %7.1f ns   libc/ours %5.2fx\n", what, ours / n * 1e9,
           (double)bytes / ours / 1e6, peer / n * 1e9, peer / ours);
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    int n = quick ? 1 << 16 : 1 << 20, reps = quick ? 3 : 7;
    float *v = malloc(sizeof(float) * (size_t)n), *of = malloc(sizeof(float) * (size_t)n);
    double *od = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++)
        v[i] = bench_randn(&rng_state);
    size_t len_d, len_f;
    char *text_d = make_text(v, n, 1, &len_d), *text_f = make_text(v, n, 0, &len_f);

    /* Correctness first: every scan equals libc bit for bit, every print
     * reads back to the same float. */
    const char *texts[2] = {text_d, text_f};
    size_t lens[2] = {len_d, len_f};
    float *ref_f = malloc(sizeof(float) * (size_t)n);
    double *ref_d = malloc(sizeof(double) * (size_t)n);
    for (int t = 0; t < 2; t++) {
        if (scan_pass(texts[t], lens[t], SCAN_F32, of, od) != n ||
            scan_pass(texts[t], lens[t], LIBC_F32, ref_f, od) != n ||
            memcmp(of, ref_f, sizeof(float) * (size_t)n)) {
            fprintf(stderr, "bench_json: od_scan_f32 differs from strtof\n");
            return 1;
        }
        if (scan_pass(texts[t], lens[t], SCAN_F64, of, od) != n ||
            scan_pass(texts[t], lens[t], LIBC_F64, of, ref_d) != n ||
            memcmp(od, ref_d, sizeof(double) * (size_t)n)) {
            fprintf(stderr, "bench_json: od_scan_f64 differs from strtod\n");
            return 1;
        }
    }
    if (memcmp(ref_f, v, sizeof(float) * (size_t)n)) {
        fprintf(stderr, "bench_json: printed floats do not read back\n");
        return 1;
    }

    printf("%d random normal float32 values; median of %d passes\n", n, reps);
    row("scan numpy tolist() text -> float32", time_scan(text_d, len_d, SCAN_F32, of, od, reps),
        time_scan(text_d, len_d, LIBC_F32, of, od, reps), n, len_d);
    row("scan shortest float32 text -> float32", time_scan(text_f, len_f, SCAN_F32, of, od, reps),
        time_scan(text_f, len_f, LIBC_F32, of, od, reps), n, len_f);
    row("scan numpy tolist() text -> float64", time_scan(text_d, len_d, SCAN_F64, of, od, reps),
        time_scan(text_d, len_d, LIBC_F64, of, od, reps), n, len_d);
    char *buf = malloc((size_t)n * (OD_FMT_F32_MAX + 1) + OD_FMT_F32_ROOM);
    row("print float32 items, shortest (vs %.9g)", time_print(v, n, buf, 0, reps),
        time_print(v, n, buf, 1, reps), n, len_f);
    sink_d = od[0];
    free(buf);
    free(v);
    free(of);
    free(od);
    free(ref_f);
    free(ref_d);
    free(text_d);
    free(text_f);
    return 0;
}
