/* sort.c — CPU sort, sort.stable, topk, kthvalue, median, nanmedian (whole
 * tensor and along a dim) and mode.
 *
 * Invariants:
 *  - od_shape_scan / od_scan_parse (kernels/shape_scan.c) validate every
 *    argument first; od_scan_check_dtype then refuses what ATen's CPU
 *    dispatch refuses. Outputs come from od_alloc_outputs (contiguous).
 *  - Each line along dim is gathered into (key, index) pairs and ordered by
 *    kernels/od_sort_algo.h (ATen 1.13's CPU algorithms replayed, so equal
 *    keys come out in torch's order); values are then copied byte for byte
 *    from self at the chosen indices, so NaN payloads and -0.0 survive.
 *  - Lines are split across the worker pool; each task owns its scratch.
 *  - The float lines of sort, topk and kthvalue are keyed by
 *    od_sort_key_f32 / _f64 (keyed): integer keys that compare as ATen's
 *    comparators compare the floats, so the algorithms take the same steps.
 *    The selections (median, nanmedian, mode) keep the doubles: they test
 *    for NaN and (mode) compare with a plain <.
 *  - median and nanmedian lines of RS_MIN_N elements or more are not
 *    replayed but radix-selected (rs_select): their answer is fixed by the
 *    order, except the zero median() leaves among zeros of both signs, and
 *    that line is replayed. median() writes ATen's quiet NaN for any NaN.
 *    Shorter lines of median.dim and nanmedian.dim are radix-selected in
 *    one task (short_select), by the same order.
 *  - One line of 65536 pairs or more of sort or mode is std::sort-ed by
 *    the pool's threads together (ps_sort: its ranges are independent).
 *  - mode of a line whose keys all differ is its smallest key, found
 *    without a replay (mode_distinct).
 *  - topk's heap is offered exactly the pairs that beat its top, in line
 *    order; a contiguous float32 line finds them with AVX-512 compares of
 *    16 keys at a time (topk_next_f32_512), the rest one by one.
 */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_parallel.h"
#include "od_shape.h"
#include "od_sort_algo.h"

#define SORT_GRAIN 16384 /* keys per parallel task, at least */

typedef struct sort_ctx {
    int op;          /* OD_SORT_OP_* */
    bool fl, desc, sorted;
    bool keyed;      /* float keys as od_sort_key_* (fl then false for the algorithms) */
    int64_t n, on, inner, k;
    size_t es;
    od_dtype dt;
    const char *x;   /* self, contiguous */
    const void *keys; /* self as double or int64, contiguous; or self itself, float32 (f32) */
    bool f32;
    char *v;
    int64_t *ix;
    int oom;         /* set (atomically) by a task whose scratch failed */
} sort_ctx;

static inline od_sort_elem pair_at(const sort_ctx *c, int64_t base, int64_t k)
{
    od_sort_elem e;
    int64_t at = base + k * c->inner;
    if (c->f32 && c->keyed)
        e.k.i = od_sort_key_f32(((const float *)c->keys)[at]);
    else if (c->f32) /* widened here: exact, as the double copy would be */
        e.k.d = ((const float *)c->keys)[at];
    else if (c->fl && c->keyed)
        e.k.i = od_sort_key_f64(((const double *)c->keys)[at]);
    else if (c->fl)
        e.k.d = ((const double *)c->keys)[at];
    else
        e.k.i = ((const int64_t *)c->keys)[at];
    e.idx = k;
    return e;
}

/* od_sort_line with desc and fl as constants where the keys are integers
 * (od_sort_algo.h inlines everything, so each call compiles its own
 * comparisons). */
static int64_t order_line(const sort_ctx *c, od_sort_elem *f, od_sort_elem *tmp)
{
    if (c->fl && !c->keyed)
        return od_sort_line(f, tmp, c->n, c->op, c->k, c->desc, c->sorted, true);
    if (c->desc)
        return od_sort_line(f, tmp, c->n, c->op, c->k, true, c->sorted, false);
    return od_sort_line(f, tmp, c->n, c->op, c->k, false, c->sorted, false);
}

static inline void topk_offer(const sort_ctx *c, od_sort_elem *heap, od_sort_elem e)
{
    if (c->desc)
        od_sort_topk_offer(heap, c->k, true, false, e);
    else
        od_sort_topk_offer(heap, c->k, false, false, e);
}

/* The first i' in [i, n) whose od_sort_key_f32 beats thr (desc: above it,
 * else below), or n. The keys are built in int32 lanes as od_sort_key_f32
 * builds them one at a time. */
__attribute__((target("avx512f"))) static int64_t topk_next_f32_512(const float *x, int64_t i, int64_t n,
                                                                  int32_t thr, bool desc)
{
    const __m512i mag = _mm512_set1_epi32(INT32_MAX), inf = _mm512_set1_epi32(0x7f800000),
                  zero = _mm512_setzero_si512(), t = _mm512_set1_epi32(thr);
    for (; i + 16 <= n; i += 16) {
        __m512i b = _mm512_loadu_si512(x + i), u = _mm512_and_si512(b, mag);
        __m512i k = _mm512_xor_si512(b, _mm512_and_si512(_mm512_srai_epi32(b, 31), mag));
        k = _mm512_mask_mov_epi32(k, _mm512_cmpeq_epi32_mask(u, zero), zero); /* -0.0 ties 0.0 */
        k = _mm512_mask_mov_epi32(k, _mm512_cmpgt_epi32_mask(u, inf), mag);    /* every NaN on top */
        __mmask16 m = desc ? _mm512_cmpgt_epi32_mask(k, t) : _mm512_cmplt_epi32_mask(k, t);
        if (m)
            return i + __builtin_ctz(m);
    }
    for (; i < n; i++) {
        int64_t k = od_sort_key_f32(x[i]);
        if (desc ? k > thr : k < thr)
            break;
    }
    return i;
}

/* topk of one line through a heap of k: the pairs past the first k are
 * offered in order, skipping those that cannot beat the heap's top (the
 * offer would refuse them: the result is the same). topk's keys are always
 * integers (its float lines are keyed). */
static void topk_stream(const sort_ctx *c, int64_t base, od_sort_elem *heap, bool simd)
{
    for (int64_t k = 0; k < c->k; k++)
        heap[k] = pair_at(c, base, k);
    od_sort_topk_begin(heap, c->k, c->desc, false);
    if (simd) {
        const float *x = (const float *)c->keys + base;
        for (int64_t k = c->k; (k = topk_next_f32_512(x, k, c->n, (int32_t)heap[0].k.i, c->desc)) < c->n; k++)
            topk_offer(c, heap, pair_at(c, base, k));
    } else {
        for (int64_t k = c->k; k < c->n; k++)
            topk_offer(c, heap, pair_at(c, base, k));
    }
    od_sort_topk_end(heap, c->k, c->desc, false);
}

/* Element at of self as a double (float32 widened, exactly). */
static inline double key_d(const sort_ctx *c, int64_t at)
{
    return c->f32 ? ((const float *)c->keys)[at] : ((const double *)c->keys)[at];
}

/* A quiet NaN in dtype dt at dst: what ATen's median() writes for any NaN. */
static void put_nan(od_dtype dt, void *dst)
{
    od_value nan = od_double(NAN);
    char b8[8];
    od_cpu_scalar_to_dtype(&nan, dt, b8);
    memcpy(dst, b8, od_dtype_size(dt));
}

/* Line l's first element in self (*base) and in the outputs (*obase): the
 * line's elements lie inner apart from there. */
static inline void line_bases(const sort_ctx *c, int64_t l, int64_t *base, int64_t *obase)
{
    int64_t o = l / c->inner, j = l % c->inner;
    *base = o * c->n * c->inner + j;
    *obase = o * c->on * c->inner + j;
}

/* Writes output k of the line whose bases line_bases gave: the line's
 * element src, and its index. */
static inline void put_out(const sort_ctx *c, int64_t base, int64_t obase, int64_t k, int64_t src)
{
    int64_t at = obase + k * c->inner, from = base + src * c->inner;
    if (c->op == OD_SORT_OP_MEDIAN_ALL && c->fl && isnan(key_d(c, from)))
        put_nan(c->dt, c->v);
    else
        memcpy(c->v + (size_t)at * c->es, c->x + (size_t)from * c->es, c->es);
    c->ix[at] = src;
}

/* ---- mode of a line of distinct keys ----
 * Every run of equal keys is then one pair long, and mode_kernel_impl's
 * scan keeps the first: std::sort's first pair, the smallest key. So such
 * a line needs no replay; a hash set of the keys finds out, stopping at the
 * first repeat (the replay then decides). A float line with a NaN is left
 * to the replay too (its < is no order there). 1000 float32 per line: a
 * set of 1000 keys in place of a 1000-pair introsort. */

/* the hash set's slots for a line of n: a power of two, 2n to 4n */
static int64_t mode_slots(int64_t n)
{
    int64_t s = 2;
    while (s < 2 * n)
        s *= 2;
    return s;
}

/* the equality mode's scan tests (-0.0 equals 0.0), as 64 bits */
static inline uint64_t mode_bits(const od_sort_elem *e, bool fl)
{
    if (!fl)
        return (uint64_t)e->k.i;
    double d = e->k.d == 0 ? 0.0 : e->k.d;
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    return b;
}

/* The position in f of the smallest key when all n keys differ, else -1.
 * tab: mode_slots(n) slots of scratch. */
static int64_t mode_distinct(const od_sort_elem *f, int64_t n, bool fl, int64_t *tab)
{
    int64_t slots = mode_slots(n), best = 0;
    int shift = 64 - __builtin_ctzll((uint64_t)slots);
    memset(tab, 0, (size_t)slots * sizeof *tab);
    for (int64_t i = 0; i < n; i++) {
        if (fl && isnan(f[i].k.d))
            return -1;
        uint64_t b = mode_bits(&f[i], fl);
        for (uint64_t h = (b * 0x9E3779B97F4A7C15ull) >> shift;; h = (h + 1) & (uint64_t)(slots - 1)) {
            if (!tab[h]) {
                tab[h] = i + 1;
                break;
            }
            if (mode_bits(&f[tab[h] - 1], fl) == b)
                return -1;
        }
        if (fl ? f[i].k.d < f[best].k.d : f[i].k.i < f[best].k.i)
            best = i;
    }
    return best;
}

/* Lines [begin, end), with scratch of their own: 2n pairs, or k for a topk
 * that streams the line through a heap (od_sort_algo.h's partial-sort case:
 * no line-sized copy to build and fault in). */
static int64_t short_select(const sort_ctx *c, int64_t base, uint64_t *w);

static void sort_lines(void *ctx, int64_t begin, int64_t end)
{
    sort_ctx *c = ctx;
    int64_t n = c->n;
    bool stream = c->op == OD_SORT_OP_TOPK && c->k > 0 && c->k * 64 <= n;
    bool simd = stream && c->f32 && c->keyed && c->inner == 1 && __builtin_cpu_supports("avx512f");
    od_sort_elem *buf = malloc((size_t)(stream ? c->k : 2 * n) * sizeof *buf);
    int64_t *tab = c->op == OD_SORT_OP_MODE ? malloc((size_t)mode_slots(n) * sizeof *tab) : NULL;
    if (!buf || (c->op == OD_SORT_OP_MODE && !tab)) {
        free(buf);
        free(tab);
        __atomic_store_n(&c->oom, 1, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t l = begin; l < end; l++) {
        int64_t base, obase, first = 0;
        line_bases(c, l, &base, &obase);
        int64_t at = c->op == OD_SORT_OP_MEDIAN || c->op == OD_SORT_OP_NANMEDIAN
                         ? short_select(c, base, (uint64_t *)buf) /* buf: 2n pairs, room for n keys */
                         : -1;
        if (at >= 0) {
            put_out(c, base, obase, 0, at);
            continue;
        }
        if (stream) {
            topk_stream(c, base, buf, simd);
        } else {
            for (int64_t k = 0; k < n; k++)
                buf[k] = pair_at(c, base, k);
            first = tab ? mode_distinct(buf, n, c->fl, tab) : -1;
            if (first < 0)
                first = order_line(c, buf, buf + n);
        }
        for (int64_t k = 0; k < c->on; k++)
            put_out(c, base, obase, k, buf[first + k].idx);
    }
    free(buf);
    free(tab);
}

/* ---- One long line of sort or mode: its std::sort on the pool ----
 * sa_std_sort's ranges sort independently (od_sort_algo.h), so a line of
 * PS_MIN_N pairs or more is sorted by the pool's threads together: each
 * takes a range from a shared stack; one of more than `task` pairs it
 * partitions (one introsort step) and pushes both parts, a smaller one it
 * sorts whole (introsort loop, then insertion sort). Only the first
 * partition runs alone. The pairs end where std::sort puts them, equal keys
 * included. ATen 1.13 sorts such a line on one thread. */
#define PS_MIN_N ((int64_t)1 << 16)

typedef struct od_sort_range {
    int64_t first, last;
    int depth;
} od_sort_range;

typedef struct ps_ctx {
    od_sort_elem *f;
    od_sort_cmp cmp;
    int64_t task;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    od_sort_range *stk; /* cap ranges: ps_cap's bound */
    int64_t nstk, pending; /* pending: ranges pushed and not yet done */
} ps_ctx;

/* Ranges ever on the stack at once, at most: the ranges partitioned are of
 * more than task pairs, disjoint at each of the depth + 1 levels, and each
 * pushes two. */
static int64_t ps_cap(int64_t n, int64_t task, int depth)
{
    return 2 * (n / task + 1) * (depth + 1) + 1;
}

/* c: a constant copy of p->cmp, so the comparisons compile for it */
static inline __attribute__((always_inline)) void ps_work(ps_ctx *p, const od_sort_cmp *c)
{
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->nstk == 0 && p->pending > 0)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->nstk == 0)
            break;
        od_sort_range r = p->stk[--p->nstk];
        pthread_mutex_unlock(&p->mu);
        int64_t cut = -1;
        if (r.last - r.first > p->task) {
            cut = sa_introsort_step(c, p->f, r.first, r.last, &r.depth);
        } else {
            sa_introsort_loop(c, p->f, r.first, r.last, r.depth);
            sa_insertion_sort(c, p->f, r.first, r.last);
        }
        pthread_mutex_lock(&p->mu);
        if (cut >= 0) {
            p->stk[p->nstk++] = (od_sort_range){cut, r.last, r.depth};
            p->stk[p->nstk++] = (od_sort_range){r.first, cut, r.depth};
            p->pending += 2;
        }
        if (--p->pending == 0 || cut >= 0)
            pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
}

/* the comparisons sort and mode use (order_line's) */
static void ps_run(void *ctx, int64_t b, int64_t e)
{
    ps_ctx *p = ctx;
    for (int64_t i = b; i < e; i++) {
        if (p->cmp.fl)
            ps_work(p, &(od_sort_cmp){true, false, true, false});
        else if (p->cmp.desc)
            ps_work(p, &(od_sort_cmp){false, true, false, false});
        else
            ps_work(p, &(od_sort_cmp){false, false, false, false});
    }
}

/* f[0..n) as std::sort leaves it, with c's comparison: sort's keyed pairs
 * (fl false) or mode's (raw; fl only without NaN). False without memory
 * for the stack (f untouched). */
static bool ps_sort(od_sort_elem *f, int64_t n, od_sort_cmp cmp)
{
    int threads = od_get_num_threads(), depth = sa_lg2(n) * 2;
    ps_ctx p = {.f = f, .cmp = cmp, .task = n / (16 * threads) > 16 ? n / (16 * threads) : 16, .nstk = 1,
                .pending = 1};
    p.stk = malloc((size_t)ps_cap(n, p.task, depth) * sizeof *p.stk);
    if (!p.stk)
        return false;
    p.stk[0] = (od_sort_range){0, n, depth};
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    od_status st = od_parallel_for(threads, 1, ps_run, &p);
    if (st) /* not reached (fn and n are valid): sort here */
        ps_run(&p, 0, 1);
    pthread_cond_destroy(&p.cv);
    pthread_mutex_destroy(&p.mu);
    free(p.stk);
    return true;
}

typedef struct ps_line {
    const sort_ctx *c;
    od_sort_elem *f; /* the line's n pairs */
    int64_t base, obase;
} ps_line;

static void ps_gather(void *ctx, int64_t b, int64_t e)
{
    ps_line *L = ctx;
    for (int64_t k = b; k < e; k++)
        L->f[k] = pair_at(L->c, L->base, k);
}

static void ps_scatter(void *ctx, int64_t b, int64_t e)
{
    ps_line *L = ctx;
    for (int64_t k = b; k < e; k++)
        put_out(L->c, L->base, L->obase, k, L->f[k].idx);
}

/* Line l of sort or mode through ps_sort, its pairs gathered and (sort)
 * written out on the pool too. False where it does not apply or had no
 * memory (nothing written): sort_lines then runs it. */
static bool ps_line_run(sort_ctx *c, int64_t l)
{
    ps_line L = {.c = c};
    line_bases(c, l, &L.base, &L.obase);
    L.f = malloc((size_t)c->n * sizeof *L.f);
    if (!L.f)
        return false;
    bool ok = od_parallel_for(c->n, SORT_GRAIN, ps_gather, &L) == OD_OK;
    if (ok && od_cancelled()) { /* past the call's deadline: its answer is dropped */
        free(L.f);
        return true;
    }
    bool raw = c->op == OD_SORT_OP_MODE, fl = c->fl && !c->keyed;
    for (int64_t k = 0; ok && fl && k < c->n; k++)
        ok = !isnan(L.f[k].k.d); /* NaN is unordered for mode's <: no independent ranges */
    ok = ok && ps_sort(L.f, c->n, (od_sort_cmp){fl, !raw && c->desc, raw, false}); /* mode: ascending */
    if (ok && raw)
        put_out(c, L.base, L.obase, 0, L.f[od_sort_mode_pick(L.f, c->n, fl)].idx);
    else if (ok)
        ok = od_parallel_for(c->on, SORT_GRAIN, ps_scatter, &L) == OD_OK;
    free(L.f);
    return ok;
}

/* ---- Long median lines: a radix select ----
 * The answer of median and nanmedian (whole tensor or along a dim) is fixed
 * by the order alone, so a line of at least RS_MIN_N elements is not
 * replayed: the k-th smallest od_sort_key_* (-0.0 ties 0.0, every NaN on
 * top) is found 16 bits at a time from per-chunk histograms, the chunks in
 * parallel. median.dim's element is then the (k - below)-th of that key in
 * index order, as its "value, then index" order has it. median()'s value is
 * the key's only value, except for a zero key when both zeros are present:
 * which zero nth_element leaves is the algorithm's, so that line is
 * replayed. 1e6 float32: 11 ms replayed, one thread (torch 9 ms). */
#define RS_BITS 16
#define RS_BINS (1 << RS_BITS)
#define RS_MIN_N ((int64_t)1 << 16)
#define RS_MIN_CHUNK RS_MIN_N /* elements per chunk, at least: a chunk clears RS_BINS counts per pass */

enum { RS_F32, RS_F64, RS_I64 };

typedef struct rs_ctx {
    const sort_ctx *c;
    int kind;        /* RS_*: float32 read from x, else the 8-byte keys */
    int64_t base, nch;
    int shift;       /* this pass counts digit (key >> shift) & (RS_BINS - 1) */
    bool all;        /* of every key (the first pass), else of those whose */
    uint64_t prefix; /* key >> (shift + RS_BITS) is prefix */
    uint32_t *hist;  /* nch * RS_BINS */
} rs_ctx;

/* The key as an unsigned integer in the same order. */
static inline uint64_t rs_key(const sort_ctx *c, int kind, int64_t at)
{
    if (kind == RS_F32)
        return (uint32_t)od_sort_key_f32(((const float *)c->keys)[at]) ^ 0x80000000u;
    if (kind == RS_F64)
        return (uint64_t)od_sort_key_f64(((const double *)c->keys)[at]) ^ ((uint64_t)1 << 63);
    return (uint64_t)((const int64_t *)c->keys)[at] ^ ((uint64_t)1 << 63);
}

static inline void rs_range(const rs_ctx *r, int64_t ch, int64_t *lo, int64_t *hi)
{
    *lo = r->c->n * ch / r->nch;
    *hi = r->c->n * (ch + 1) / r->nch;
}

/* One loop per kind (constant here, so rs_key's tests fold away). */
static inline void rs_count_kind(const rs_ctx *r, int kind, uint32_t *h, int64_t lo, int64_t hi)
{
    const sort_ctx *c = r->c;
    int shift = r->shift, ps = r->shift + RS_BITS;
    for (int64_t i = lo; i < hi; i++) {
        uint64_t k = rs_key(c, kind, r->base + i * c->inner);
        if (r->all || (k >> ps) == r->prefix)
            h[(k >> shift) & (RS_BINS - 1)]++;
    }
}

static void rs_count(void *ctx, int64_t b, int64_t e)
{
    const rs_ctx *r = ctx;
    for (int64_t ch = b; ch < e; ch++) {
        uint32_t *h = r->hist + ch * RS_BINS;
        int64_t lo, hi;
        rs_range(r, ch, &lo, &hi);
        memset(h, 0, RS_BINS * sizeof *h);
        if (r->kind == RS_F32)
            rs_count_kind(r, RS_F32, h, lo, hi);
        else if (r->kind == RS_F64)
            rs_count_kind(r, RS_F64, h, lo, hi);
        else
            rs_count_kind(r, RS_I64, h, lo, hi);
    }
}

/* The position of the t-th key (from 0, in index order) whose digits down
 * to the last pass's are prefix * RS_BINS + d: its count per chunk is that
 * pass's histogram at d. 0 if there is none (a cancelled pass). */
static int64_t rs_locate(const rs_ctx *r, uint64_t prefix, int d, int64_t t)
{
    for (int64_t ch = 0; ch < r->nch; ch++) {
        int64_t cnt = r->hist[ch * RS_BINS + d];
        if (t >= cnt) {
            t -= cnt;
            continue;
        }
        int64_t lo, hi;
        rs_range(r, ch, &lo, &hi);
        uint64_t want = (prefix << RS_BITS) | (uint64_t)d;
        for (int64_t i = lo; i < hi; i++)
            if (rs_key(r->c, r->kind, r->base + i * r->c->inner) >> r->shift == want && t-- == 0)
                return i;
        return 0;
    }
    return 0;
}

/* Bit 0: a 0.0 in the line, bit 1: a -0.0. */
static int rs_zero_signs(const sort_ctx *c, int64_t base)
{
    int seen = 0;
    for (int64_t i = 0; i < c->n && seen != 3; i++) {
        double v = key_d(c, base + i * c->inner);
        if (v == 0)
            seen |= signbit(v) ? 2 : 1;
    }
    return seen;
}

/* The position in the line at base of the element median or nanmedian
 * (c->op) chooses, or -1 where the line must be replayed (an all-NaN
 * nanmedian line, median()'s zero of both signs). hist: nch * RS_BINS. */
static int64_t rs_select(const sort_ctx *c, int64_t base, uint32_t *hist, int64_t nch)
{
    int kind = c->f32 ? RS_F32 : c->fl ? RS_F64 : RS_I64, width = kind == RS_F32 ? 32 : 64;
    rs_ctx r = {.c = c, .kind = kind, .base = base, .nch = nch, .hist = hist};
    int64_t n = c->n, below = 0, rank = 0;
    uint64_t prefix = 0;
    int d = 0;
    for (r.shift = width - RS_BITS; r.shift >= 0; r.shift -= RS_BITS) {
        r.all = r.shift == width - RS_BITS;
        r.prefix = prefix;
        if (od_parallel_for(nch, 1, rs_count, &r) || od_cancelled())
            return 0; /* the call is being cut short: its answer is not read */
        if (r.all) {
            int64_t nan = 0; /* the top bin holds exactly the NaNs' key */
            for (int64_t ch = 0; c->fl && ch < nch; ch++)
                nan += hist[ch * RS_BINS + RS_BINS - 1];
            bool skip = c->op == OD_SORT_OP_NANMEDIAN || c->op == OD_SORT_OP_NANMEDIAN_ALL;
            if (nan && !skip)
                return rs_locate(&r, 0, RS_BINS - 1, 0); /* the first NaN */
            if (nan == n)
                return -1;
            rank = skip ? (n - nan - 1) / 2 : (n - 1) / 2;
        }
        for (d = 0; d < RS_BINS; d++) {
            int64_t cnt = 0;
            for (int64_t ch = 0; ch < nch; ch++)
                cnt += hist[ch * RS_BINS + d];
            if (below + cnt > rank)
                break;
            below += cnt;
        }
        if (d == RS_BINS)
            return 0; /* counts short of the rank: only a cancelled pass leaves them so */
        if (r.shift > 0)
            prefix = (prefix << RS_BITS) | (uint64_t)d;
    }
    r.shift = 0;
    uint64_t zero = kind == RS_F32 ? 0x80000000u : (uint64_t)1 << 63;
    bool all = c->op == OD_SORT_OP_MEDIAN_ALL || c->op == OD_SORT_OP_NANMEDIAN_ALL;
    if (all && c->fl && ((prefix << RS_BITS) | (uint64_t)d) == zero && rs_zero_signs(c, base) == 3)
        return -1;
    return rs_locate(&r, prefix, d, rank - below);
}

/* ---- Short median.dim lines: a radix select of the keys ----
 * The same answer as rs_select's (median.dim and nanmedian.dim order by
 * value, then index: the element is the (rank - below)-th of the chosen key
 * in index order), without a replay of nth_element over (value, index)
 * pairs: the keys are copied to w and the rank-th is found a byte at a
 * time, the candidates compacted without a branch after each byte (a
 * quickselect's partitions mispredicted half their compares: 8.9 ms for
 * 1000 rows of 1000 float32, against 10.9 replayed and torch's 8.3). */

/* The rank-th smallest of the bits-bit keys w[0..m) (w overwritten). */
static uint64_t select_u64(uint64_t *w, int64_t m, int64_t rank, int bits)
{
    uint32_t h[256];
    for (int shift = bits - 8;; shift -= 8) {
        memset(h, 0, sizeof h);
        for (int64_t i = 0; i < m; i++)
            h[(w[i] >> shift) & 255]++;
        unsigned d = 0;
        while (rank >= h[d])
            rank -= h[d++];
        if (shift == 0 || h[d] == 1) { /* one candidate left, or the last byte: it is the key */
            for (int64_t i = 0;; i++)
                if (((w[i] >> shift) & 255) == d)
                    return w[i];
        }
        if (h[d] == m)
            continue; /* every candidate has this byte */
        int64_t k = 0;
        for (int64_t i = 0; i < m; i++) {
            uint64_t v = w[i];
            w[k] = v;
            k += ((v >> shift) & 255) == d;
        }
        m = k;
    }
}

/* The position in the line at base of the element median.dim or
 * nanmedian.dim chooses, or -1 to replay the line (all NaN). w: n keys. */
static int64_t short_select(const sort_ctx *c, int64_t base, uint64_t *w)
{
    int kind = c->f32 ? RS_F32 : c->fl ? RS_F64 : RS_I64, top = (kind == RS_F32 ? 32 : 64) - RS_BITS;
    bool skip = c->op == OD_SORT_OP_NANMEDIAN;
    int64_t n = c->n, m = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t k = rs_key(c, kind, base + i * c->inner);
        if (c->fl && k >> top == RS_BINS - 1) { /* a NaN (rs_select: the top bin holds exactly them) */
            if (!skip)
                return i; /* median.dim: the first NaN */
            continue;
        }
        w[m++] = k;
    }
    if (m == 0)
        return -1;
    int64_t rank = (m - 1) / 2, below = 0;
    uint64_t v = select_u64(w, m, rank, kind == RS_F32 ? 32 : 64);
    for (int64_t i = 0; i < n; i++)
        below += rs_key(c, kind, base + i * c->inner) < v;
    for (int64_t i = 0, t = rank - below; i < n; i++)
        if (rs_key(c, kind, base + i * c->inner) == v && t-- == 0)
            return i;
    return 0; /* not reached: v is the rank-th key (a wrong select shows here, not hidden by a replay) */
}

/* Long median lines, one after another, each split across the pool. */
static void rs_lines(sort_ctx *c, int64_t lines)
{
    int64_t nch = od_get_num_threads();
    if (nch > c->n / RS_MIN_CHUNK)
        nch = c->n / RS_MIN_CHUNK;
    uint32_t *hist = malloc((size_t)nch * RS_BINS * sizeof *hist);
    if (!hist) {
        c->oom = 1;
        return;
    }
    for (int64_t l = 0; l < lines; l++) {
        int64_t base, obase;
        line_bases(c, l, &base, &obase);
        int64_t src = rs_select(c, base, hist, nch);
        if (src < 0)
            sort_lines(c, l, l + 1);
        else
            put_out(c, base, obase, 0, src);
    }
    free(hist);
}

od_status od_cpu_sort(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec[2];
    int nouts = 0;
    od_scan_info info;
    od_status st;
    if ((st = od_shape_scan(id, s, spec, &nouts, err)) || (st = od_scan_parse(id, s, &info, err)) ||
        (st = od_scan_check_dtype(id, s, &info, err)))
        return st;
    od_tensor *self = s->args[0].u.t, *outs[2] = {NULL, NULL}, *x = NULL, *keys = NULL;
    if ((st = od_alloc_outputs(s, spec, nouts, outs, err)))
        return st;
    int64_t n = info.size;
    int opc = od_sort_op_of(id, &info);
    /* Lines of the outputs: sort n per line, topk k, the selections 1. */
    int64_t on = opc == OD_SORT_OP_TOPK ? info.k : opc >= OD_SORT_OP_KTHVALUE ? 1 : n;
    if (self->ndim == 0)
        on = 1; /* ATen copies a 0-dim self, even for topk with k == 0 */
    if (od_tensor_numel(self) == 0 && nouts == 1) { /* median() of nothing: NaN as the dtype */
        put_nan(self->dtype, od_tensor_data(outs[0]));
        goto done;
    }
    if (od_tensor_numel(self) == 0 || on == 0)
        goto done;
    int64_t one_ix; /* median(), nanmedian(): the index chosen is not returned */
    bool fl = od_dtype_is_floating(self->dtype);
    bool f32 = self->dtype == OD_FLOAT32; /* keys read from x itself: no line-sized double copy */
    if ((st = od_cpu_to_dtype(self, self->dtype, &x, err)) ||
        (!f32 && (st = od_cpu_to_dtype(self, fl ? OD_FLOAT64 : OD_INT64, &keys, err))))
        goto fail;
    sort_ctx c = {.op = opc, .fl = fl, .desc = info.descending, .sorted = info.sorted,
                  .keyed = fl && opc < OD_SORT_OP_MEDIAN, .n = n, .on = on,
                  .inner = info.inner, .k = info.k, .es = od_dtype_size(self->dtype), .dt = self->dtype,
                  .x = od_tensor_data(x),
                  .keys = od_tensor_data(f32 ? x : keys), .f32 = f32, .v = od_tensor_data(outs[0]),
                  .ix = nouts == 2 ? (int64_t *)od_tensor_data(outs[1]) : &one_ix};
    bool one_long = info.outer * info.inner == 1 && n >= PS_MIN_N && od_get_num_threads() > 1;
    if (opc >= OD_SORT_OP_MEDIAN && opc != OD_SORT_OP_MODE && n >= RS_MIN_N)
        rs_lines(&c, info.outer * info.inner);
    else if (one_long && (opc == OD_SORT_OP_SORT || opc == OD_SORT_OP_MODE) && ps_line_run(&c, 0))
        ;
    else if ((st = od_parallel_for(info.outer * info.inner, SORT_GRAIN / n + 1, sort_lines, &c)))
        goto fail;
    if (c.oom) {
        st = od_error_set(err, OD_ENOMEM, "%s: out of memory for the sort's scratch", od_op_name(op));
        goto fail;
    }
done:
    od_tensor_release(x);
    od_tensor_release(keys);
    for (int i = 0; i < nouts; i++)
        s->rets[i] = od_tensor_v(outs[i]);
    s->nrets = nouts;
    return OD_OK;
fail:
    od_tensor_release(x);
    od_tensor_release(keys);
    for (int i = 0; i < nouts; i++)
        od_tensor_release(outs[i]);
    return st;
}
