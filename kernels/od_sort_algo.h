/* od_sort_algo.h — the per-line sorting algorithms of sort, topk and
 * kthvalue of the CPU kernel (kernels/cpu/sort.c), and the OD_SORT_OP_*
 * codes the CUDA one (kernels/cuda/scan.cu) shares. The CUDA kernel sorts
 * with CUB's stable radix sort instead, as torch's CUDA kernels do, so the
 * backends agree on values and may part on the indices of equal keys (the
 * stable sort excepted), as torch's own CPU and CUDA kernels do. median,
 * nanmedian and mode run these functions themselves on the device (OD_HD,
 * a thread per line), so there the indices of ties agree too.
 *
 * Invariants:
 *  - A line is an array of (key, index) pairs: keys are int64 for integers
 *    and bool, double for floats (both exact, so the order is the dtype's).
 *    The CPU kernel keys the float lines of sort, topk and kthvalue by
 *    od_sort_key_f64 / _f32 instead (int64 keys, fl false): those keys
 *    order as ATen's comparators order the floats, so every comparison
 *    answers as it would on the doubles and the steps, ties included, are
 *    the same; an integer compare is cheaper than two isnan tests and a
 *    compare (1e6 rand floats, std::sort: 89 ms on doubles, 72 on keys).
 *  - Every function is forced inline (OD_SA_INLINE), so a caller that
 *    passes constant desc and fl gets the comparisons compiled for them
 *    (62 ms on the same line, against 72 with the flags tested per
 *    comparison).
 *  - The order of equal keys is part of the answer (indices), so each
 *    operator replays the algorithm ATen 1.13's CPU kernel runs, step for
 *    step: sort(stable=False) is libstdc++'s std::sort (introsort:
 *    median-of-3 unguarded partitions, heapsort past 2*log2(n) levels,
 *    insertion sort below 16); sort(stable=True) a stable merge sort (the
 *    stable order is unique); topk std::partial_sort when k * 64 <= n, else
 *    std::nth_element then std::sort of the first k - 1; kthvalue ATen's
 *    quick_select_template. NaN orders above every number (ATen's
 *    comparators).
 *  - No allocation, no recursion: callers pass the line (n pairs) and, for
 *    the stable sort, scratch of n more pairs; topk's partial sort can also
 *    be fed pair by pair into a heap of k (od_sort_topk_*).
 */
#ifndef OD_SORT_ALGO_H
#define OD_SORT_ALGO_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "od_half.h" /* OD_HD */

#ifdef __CUDACC__
#define OD_SA_INLINE __forceinline__
#else
#define OD_SA_INLINE inline __attribute__((always_inline))
#endif

typedef struct od_sort_elem {
    union {
        double d;
        int64_t i;
    } k;
    int64_t idx;
} od_sort_elem;

typedef struct od_sort_cmp {
    bool fl;   /* keys are doubles */
    bool desc; /* "less" means "greater, NaN first" */
    bool raw;  /* plain a < b on the keys (mode's lambda: NaN is unordered) */
    bool then_idx; /* equal keys order by index: a total order (median's) */
} od_sort_cmp;

/* The int64 key of a float for sort, topk and kthvalue: key(x) < key(y)
 * exactly when ATen's ascending comparator puts x before y, so -0.0 and 0.0
 * tie, every NaN ties with every other and comes after +inf; descending is
 * key(x) > key(y). The bits of a double order as signed integers for
 * positive values and backwards for negative ones: flipping the magnitude
 * bits of the negatives turns the order around there. */
static OD_SA_INLINE OD_HD int64_t od_sort_key_f64(double d)
{
    int64_t b;
    memcpy(&b, &d, sizeof b);
    if (d != d)
        return INT64_MAX;
    if (d == 0)
        return 0;
    return b < 0 ? b ^ INT64_MAX : b;
}

/* The same for a float32 line (within int32's range: int32 lanes compare
 * them too); the order is od_sort_key_f64's. Keys of the two kinds never
 * meet in one line. */
static OD_SA_INLINE OD_HD int64_t od_sort_key_f32(float f)
{
    int32_t b;
    memcpy(&b, &f, sizeof b);
    if (f != f)
        return INT32_MAX;
    if (f == 0)
        return 0;
    return b < 0 ? b ^ INT32_MAX : b;
}

/* ATen's KeyValueCompAsc / KeyValueCompDesc (topk's and kthvalue's lambdas
 * are the same relations). */
static OD_SA_INLINE OD_HD bool sa_key_lt(const od_sort_cmp *c, const od_sort_elem *a, const od_sort_elem *b)
{
    if (c->fl && c->raw)
        return a->k.d < b->k.d;
    if (c->fl) {
        double x = a->k.d, y = b->k.d;
        return c->desc ? ((isnan(x) && !isnan(y)) || x > y) : ((!isnan(x) && isnan(y)) || x < y);
    }
    return c->desc ? a->k.i > b->k.i : a->k.i < b->k.i;
}

static OD_SA_INLINE OD_HD bool sa_lt(const od_sort_cmp *c, const od_sort_elem *a, const od_sort_elem *b)
{
    if (sa_key_lt(c, a, b))
        return true;
    return c->then_idx && !sa_key_lt(c, b, a) && a->idx < b->idx;
}

static OD_SA_INLINE OD_HD void sa_swp(od_sort_elem *a, od_sort_elem *b)
{
    od_sort_elem t = *a;
    *a = *b;
    *b = t;
}

/* ---- libstdc++ (GCC 12) algorithms, transcribed ---- */

static OD_SA_INLINE OD_HD void sa_push_heap(const od_sort_cmp *c, od_sort_elem *f, int64_t hole, int64_t top, od_sort_elem v)
{
    int64_t parent = (hole - 1) / 2;
    while (hole > top && sa_lt(c, &f[parent], &v)) {
        f[hole] = f[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    f[hole] = v;
}

static OD_SA_INLINE OD_HD void sa_adjust_heap(const od_sort_cmp *c, od_sort_elem *f, int64_t hole, int64_t len, od_sort_elem v)
{
    int64_t top = hole, child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (sa_lt(c, &f[child], &f[child - 1]))
            child--;
        f[hole] = f[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        f[hole] = f[child - 1];
        hole = child - 1;
    }
    sa_push_heap(c, f, hole, top, v);
}

static OD_SA_INLINE OD_HD void sa_make_heap(const od_sort_cmp *c, od_sort_elem *f, int64_t len)
{
    if (len < 2)
        return;
    for (int64_t parent = (len - 2) / 2;; parent--) {
        sa_adjust_heap(c, f, parent, len, f[parent]);
        if (parent == 0)
            return;
    }
}

/* __pop_heap(first, last, result): *result goes into the heap [0, len). */
static OD_SA_INLINE OD_HD void sa_pop_heap(const od_sort_cmp *c, od_sort_elem *f, int64_t len, od_sort_elem *result)
{
    od_sort_elem v = *result;
    *result = f[0];
    sa_adjust_heap(c, f, 0, len, v);
}

static OD_SA_INLINE OD_HD void sa_heap_select(const od_sort_cmp *c, od_sort_elem *f, int64_t middle, int64_t last)
{
    sa_make_heap(c, f, middle);
    for (int64_t i = middle; i < last; i++)
        if (sa_lt(c, &f[i], &f[0]))
            sa_pop_heap(c, f, middle, &f[i]);
}

static OD_SA_INLINE OD_HD void sa_sort_heap(const od_sort_cmp *c, od_sort_elem *f, int64_t len)
{
    while (len > 1) {
        len--;
        sa_pop_heap(c, f, len, &f[len]);
    }
}

static OD_SA_INLINE OD_HD void sa_partial_sort(const od_sort_cmp *c, od_sort_elem *f, int64_t middle, int64_t last)
{
    sa_heap_select(c, f, middle, last);
    sa_sort_heap(c, f, middle);
}

/* topk's sa_partial_sort (k * 64 <= n) without the rest of the line in
 * memory: sa_heap_select reads each pair past the heap once and writes
 * only the heap (what sa_pop_heap puts back at f[i] is never read again),
 * so the caller builds heap[0..k) from the line's first k pairs, calls
 * od_sort_topk_begin, offers every later pair in order, then calls
 * od_sort_topk_end: heap[0..k) is then what od_sort_line leaves in f[0..k). */
static OD_SA_INLINE OD_HD void od_sort_topk_begin(od_sort_elem *heap, int64_t k, bool desc, bool fl)
{
    od_sort_cmp c = {fl, desc, false, false};
    sa_make_heap(&c, heap, k);
}

static OD_SA_INLINE OD_HD void od_sort_topk_offer(od_sort_elem *heap, int64_t k, bool desc, bool fl, od_sort_elem e)
{
    od_sort_cmp c = {fl, desc, false, false};
    if (sa_lt(&c, &e, &heap[0]))
        sa_adjust_heap(&c, heap, 0, k, e); /* sa_pop_heap of e, whose slot is never read again */
}

static OD_SA_INLINE OD_HD void od_sort_topk_end(od_sort_elem *heap, int64_t k, bool desc, bool fl)
{
    od_sort_cmp c = {fl, desc, false, false};
    sa_sort_heap(&c, heap, k);
}

static OD_SA_INLINE OD_HD void sa_move_median_to_first(const od_sort_cmp *c, od_sort_elem *r, od_sort_elem *a, od_sort_elem *b, od_sort_elem *d)
{
    if (sa_lt(c, a, b)) {
        if (sa_lt(c, b, d))
            sa_swp(r, b);
        else if (sa_lt(c, a, d))
            sa_swp(r, d);
        else
            sa_swp(r, a);
    } else if (sa_lt(c, a, d)) {
        sa_swp(r, a);
    } else if (sa_lt(c, b, d)) {
        sa_swp(r, d);
    } else {
        sa_swp(r, b);
    }
}

static OD_SA_INLINE OD_HD int64_t sa_unguarded_partition(const od_sort_cmp *c, od_sort_elem *f, int64_t first, int64_t last, int64_t pivot)
{
    for (;;) {
        while (sa_lt(c, &f[first], &f[pivot]))
            first++;
        last--;
        while (sa_lt(c, &f[pivot], &f[last]))
            last--;
        if (!(first < last))
            return first;
        sa_swp(&f[first], &f[last]);
        first++;
    }
}

static OD_SA_INLINE OD_HD int64_t sa_partition_pivot(const od_sort_cmp *c, od_sort_elem *f, int64_t first, int64_t last)
{
    int64_t mid = first + (last - first) / 2;
    sa_move_median_to_first(c, &f[first], &f[first + 1], &f[mid], &f[last - 1]);
    return sa_unguarded_partition(c, f, first + 1, last, first);
}

static OD_SA_INLINE OD_HD void sa_unguarded_linear_insert(const od_sort_cmp *c, od_sort_elem *f, int64_t last)
{
    od_sort_elem v = f[last];
    int64_t next = last - 1;
    while (sa_lt(c, &v, &f[next])) {
        f[last] = f[next];
        last = next;
        next--;
    }
    f[last] = v;
}

static OD_SA_INLINE OD_HD void sa_insertion_sort(const od_sort_cmp *c, od_sort_elem *f, int64_t first, int64_t last)
{
    if (first == last)
        return;
    for (int64_t i = first + 1; i != last; i++) {
        if (sa_lt(c, &f[i], &f[first])) {
            od_sort_elem v = f[i];
            for (int64_t m = i; m > first; m--)
                f[m] = f[m - 1];
            f[first] = v;
        } else {
            sa_unguarded_linear_insert(c, f, i);
        }
    }
}

static OD_SA_INLINE OD_HD int sa_lg2(int64_t n)
{
    int r = 0;
    while (n > 1) {
        n >>= 1;
        r++;
    }
    return r;
}

/* One step of std::sort's __introsort_loop on f[first, last) (more than 16
 * pairs) with *depth levels left: heapsort the range when none are left
 * (returns -1: it is sorted), else partition it and return the cut; both
 * parts then go on with *depth, one less. */
static OD_SA_INLINE OD_HD int64_t sa_introsort_step(const od_sort_cmp *c, od_sort_elem *f, int64_t first, int64_t last,
                                                    int *depth)
{
    if (*depth == 0) {
        sa_partial_sort(c, f + first, last - first, last - first);
        return -1;
    }
    (*depth)--;
    return sa_partition_pivot(c, f, first, last);
}

/* __introsort_loop on f[first, last) with depth levels: its recursion on
 * the right part becomes an explicit stack (each range keeps its own depth
 * budget, so the result is the recursive one; it holds at most 2 * log2(n)
 * + 1 ranges). Ranges of 16 pairs or fewer are left for the final
 * insertion sort. */
static OD_SA_INLINE OD_HD void sa_introsort_loop(const od_sort_cmp *c, od_sort_elem *f, int64_t first, int64_t last,
                                                 int depth)
{
    struct {
        int64_t first, last;
        int depth;
    } stk[132];
    int sp = 0;
    stk[sp].first = first;
    stk[sp].last = last;
    stk[sp].depth = depth;
    sp++;
    while (sp > 0) {
        sp--;
        first = stk[sp].first, last = stk[sp].last;
        depth = stk[sp].depth;
        while (last - first > 16) {
            int64_t cut = sa_introsort_step(c, f, first, last, &depth);
            if (cut < 0)
                break;
            stk[sp].first = cut;
            stk[sp].last = last;
            stk[sp].depth = depth;
            sp++;
            last = cut;
        }
    }
}

/* std::sort: the introsort loop, then __final_insertion_sort (a guarded
 * insertion sort of the first 16, unguarded after: the arrangement is a
 * plain insertion sort's). Every pair of a range the loop leaves orders
 * neither before the ranges left of it nor after those right of it (the
 * partitions), so the final pass moves no pair out of its range:
 * sorting the ranges one by one, in any order, gives the same result
 * (cpu/sort.c's psort, given a strict weak order: no NaN with raw). */
static OD_SA_INLINE OD_HD void sa_std_sort(const od_sort_cmp *c, od_sort_elem *f, int64_t n)
{
    if (n <= 1)
        return;
    sa_introsort_loop(c, f, 0, n, sa_lg2(n) * 2);
    if (n > 16) {
        sa_insertion_sort(c, f, 0, 16);
        for (int64_t i = 16; i < n; i++)
            sa_unguarded_linear_insert(c, f, i);
    } else {
        sa_insertion_sort(c, f, 0, n);
    }
}

static OD_SA_INLINE OD_HD void sa_nth_element(const od_sort_cmp *c, od_sort_elem *f, int64_t nth, int64_t n)
{
    if (n == 0 || nth == n)
        return;
    int64_t first = 0, last = n;
    int depth = sa_lg2(n) * 2;
    while (last - first > 3) {
        if (depth == 0) {
            sa_heap_select(c, f + first, nth + 1 - first, last - first);
            sa_swp(&f[first], &f[nth]);
            return;
        }
        depth--;
        int64_t cut = sa_partition_pivot(c, f, first, last);
        if (cut <= nth)
            first = cut;
        else
            last = cut;
    }
    sa_insertion_sort(c, f, first, last);
}

/* Stable merge sort (std::stable_sort's result is the unique stable order,
 * so any stable algorithm gives it): runs of SA_RUN by insertion, then
 * bottom-up merges that alternate between f and tmp (a copy back at most
 * once, not after every pass). */
#define SA_RUN 32
static OD_SA_INLINE OD_HD void sa_merge_sort(const od_sort_cmp *c, od_sort_elem *f, od_sort_elem *tmp, int64_t n)
{
    for (int64_t lo = 0; lo < n; lo += SA_RUN) {
        int64_t hi = lo + SA_RUN < n ? lo + SA_RUN : n;
        for (int64_t i = lo + 1; i < hi; i++) {
            od_sort_elem v = f[i];
            int64_t m = i;
            for (; m > lo && sa_lt(c, &v, &f[m - 1]); m--)
                f[m] = f[m - 1];
            f[m] = v;
        }
    }
    od_sort_elem *src = f, *dst = tmp;
    for (int64_t w = SA_RUN; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                dst[k++] = sa_lt(c, &src[j], &src[i]) ? src[j++] : src[i++];
            while (i < mid)
                dst[k++] = src[i++];
            while (j < hi)
                dst[k++] = src[j++];
        }
        od_sort_elem *t = src;
        src = dst;
        dst = t;
    }
    if (src != f)
        for (int64_t m = 0; m < n; m++)
            f[m] = src[m];
}

/* ATen's quick_select_template (SortingUtils.h); c is its gt_or_nan. */
static OD_SA_INLINE OD_HD void sa_quick_select(const od_sort_cmp *c, od_sort_elem *a, int64_t n, int64_t k)
{
    int64_t L = 0, R = n - 1;
    for (;;) {
        if (R <= L)
            return;
        if (R == L + 1) {
            if (sa_lt(c, &a[L], &a[R]))
                sa_swp(&a[L], &a[R]);
            return;
        }
        int64_t P = L + (R - L) / 2;
        sa_swp(&a[P], &a[L + 1]);
        if (sa_lt(c, &a[L + 1], &a[R]))
            sa_swp(&a[L + 1], &a[R]);
        if (sa_lt(c, &a[L], &a[R]))
            sa_swp(&a[L], &a[R]);
        if (sa_lt(c, &a[L + 1], &a[L]))
            sa_swp(&a[L + 1], &a[L]);
        int64_t i = L + 1, j = R;
        od_sort_elem piv = a[L];
        for (;;) {
            do
                i++;
            while (sa_lt(c, &piv, &a[i]));
            do
                j--;
            while (sa_lt(c, &a[j], &piv));
            if (j < i)
                break;
            sa_swp(&a[i], &a[j]);
        }
        sa_swp(&a[L], &a[j]);
        if (j <= k)
            L = i;
        if (j >= k)
            R = j - 1;
    }
}


enum {
    OD_SORT_OP_SORT,
    OD_SORT_OP_SORT_STABLE,
    OD_SORT_OP_TOPK,
    OD_SORT_OP_KTHVALUE,
    OD_SORT_OP_MEDIAN,        /* median.dim */
    OD_SORT_OP_NANMEDIAN,     /* nanmedian.dim */
    OD_SORT_OP_MEDIAN_ALL,    /* median() */
    OD_SORT_OP_NANMEDIAN_ALL, /* nanmedian() */
    OD_SORT_OP_MODE
};

/* mode's choice in its sorted line: the last pair of the first longest run
 * of equal keys (mode_kernel_impl's scan) */
static OD_SA_INLINE OD_HD int64_t od_sort_mode_pick(const od_sort_elem *f, int64_t n, bool fl)
{
    int64_t best = 0, max_freq = 0, freq = 0;
    for (int64_t i = 0; i < n; i++) {
        freq++;
        bool end = i == n - 1 || (fl ? f[i].k.d != f[i + 1].k.d : f[i].k.i != f[i + 1].k.i);
        if (end) {
            if (freq > max_freq) {
                best = i;
                max_freq = freq;
            }
            freq = 0;
        }
    }
    return best;
}

/* median.dim / nanmedian.dim (ATen's median_with_indices_impl): the first NaN
 * for median; else std::nth_element on the indices with "value, then index"
 * as the order (NaN last for nanmedian). That order is total, so its k-th
 * element is one element whichever selection finds it (the stable sort's),
 * and sa_nth_element with then_idx finds it in O(n); an all-NaN nanmedian
 * line has no order among its elements, so libstdc++'s nth_element decides. median(), nanmedian()
 * (median_impl): nth_element on the values themselves, where -0.0 and 0.0
 * tie. mode (mode_kernel_impl): std::sort of (value, index) by value with
 * a plain <, then the last element of the first longest run of equal
 * values. Each returns the position in f of the element chosen. */
static OD_SA_INLINE OD_HD int64_t sa_select_line(od_sort_elem *f, int64_t n, int op, bool fl)
{
    od_sort_cmp asc = {fl, false, false, false}, by_idx = {fl, false, false, true};
    int64_t nan = 0, first_nan = -1;
    for (int64_t i = 0; fl && i < n; i++)
        if (isnan(f[i].k.d)) {
            if (first_nan < 0)
                first_nan = i;
            nan++;
        }
    switch (op) {
    case OD_SORT_OP_MEDIAN:
        if (first_nan >= 0)
            return first_nan;
        sa_nth_element(&by_idx, f, (n - 1) / 2, n);
        return (n - 1) / 2;
    case OD_SORT_OP_NANMEDIAN:
        if (nan == n) {
            sa_nth_element(&asc, f, 0, n);
            return 0;
        }
        sa_nth_element(&by_idx, f, (n - nan - 1) / 2, n);
        return (n - nan - 1) / 2;
    case OD_SORT_OP_MEDIAN_ALL:
    case OD_SORT_OP_NANMEDIAN_ALL: {
        if (op == OD_SORT_OP_MEDIAN_ALL && first_nan >= 0)
            return first_nan;
        int64_t k = op == OD_SORT_OP_MEDIAN_ALL ? (n - 1) / 2 : (n - nan - 1) / 2;
        sa_nth_element(&asc, f, k, n);
        return k;
    }
    default: { /* OD_SORT_OP_MODE */
        od_sort_cmp raw = {fl, false, true, false};
        sa_std_sort(&raw, f, n);
        return od_sort_mode_pick(f, n, fl);
    }
    }
}

/* Orders line f[0..n) as operator op does (k: topk's / kthvalue's k;
 * desc: sort's descending or topk's largest; sorted: topk's) and returns the
 * position of the first pair that goes out: kthvalue's k - 1, else 0.
 * tmp: n pairs of scratch for OD_SORT_OP_SORT_STABLE (else unused). */
static OD_SA_INLINE OD_HD int64_t od_sort_line(od_sort_elem *f, od_sort_elem *tmp, int64_t n, int op, int64_t k,
                                         bool desc, bool sorted, bool fl)
{
    od_sort_cmp c = {fl, desc, false, false};
    if (op >= OD_SORT_OP_MEDIAN)
        return sa_select_line(f, n, op, fl);
    if (op == OD_SORT_OP_SORT) {
        sa_std_sort(&c, f, n);
    } else if (op == OD_SORT_OP_SORT_STABLE) {
        sa_merge_sort(&c, f, tmp, n);
    } else if (op == OD_SORT_OP_TOPK) {
        if (k == 0) {
            return 0; /* ATen returns before it looks at the line */
        } else if (k * 64 <= n) {
            sa_partial_sort(&c, f, k, n);
        } else {
            sa_nth_element(&c, f, k - 1, n);
            if (sorted)
                sa_std_sort(&c, f, k - 1);
        }
    } else { /* kthvalue: gt_or_nan is (isnan(x) && !isnan(y)) || x > y */
        od_sort_cmp gt = {fl, true, false, false};
        sa_quick_select(&gt, f, n, k - 1);
        return k - 1;
    }
    return 0;
}

#endif
