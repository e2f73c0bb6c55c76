/* iter.c — the CPU strided iterator (see iter.h).
 *
 * Invariants: building never allocates; the iterator is a plain value that
 * may be shared read-only by the threads of a parallel run. A run over the
 * linear range [begin, end) of the (reordered, coalesced) iteration space
 * touches exactly those elements, so chunks given to different threads are
 * disjoint in the output (the output has no stride-0 dims of size > 1 unless
 * the caller wrote into an expanded tensor, which callers reject).
 */
#include <string.h>

#include "od_parallel.h"
#include "iter.h"

/* Should dim `outer` move inside dim `inner`? Like TensorIterator: the first
 * operand (output first) whose strides differ and are both non-zero decides. */
static int should_swap(const od_cpu_iter *it, const int64_t (*st)[OD_CPU_ITER_MAX_OPS], int outer,
                       int inner)
{
    for (int k = 0; k < it->nops; k++) {
        int64_t so = st[outer][k], si = st[inner][k];
        if (so == 0 || si == 0)
            continue;
        if (so < si)
            return 1;
        if (so > si)
            return 0;
    }
    return 0;
}

od_status od_cpu_iter_build(od_cpu_iter *it, const int64_t *shape, int ndim, const od_cpu_operand *ops,
                            int nops, od_error *err)
{
    if (nops < 1 || nops > OD_CPU_ITER_MAX_OPS || ndim < 0 || ndim > OD_MAX_DIMS)
        return od_error_set(err, OD_EINTERNAL, "od_cpu_iter_build: %d operands, %d dims", nops, ndim);
    memset(it, 0, sizeof *it);
    it->nops = nops;
    for (int k = 0; k < nops; k++)
        it->data[k] = ops[k].data;

    /* Outer-to-inner dims with their byte strides, size-1 dims dropped. */
    int64_t sz[OD_MAX_DIMS];
    int64_t st[OD_MAX_DIMS][OD_CPU_ITER_MAX_OPS];
    int nd = 0;
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return od_error_set(err, OD_EINTERNAL, "od_cpu_iter_build: negative size");
        numel *= shape[d];
        for (int k = 0; k < nops; k++) {
            int j = d - (ndim - ops[k].ndim);
            int64_t s = 0;
            if (j >= 0) {
                if (ops[k].sizes[j] == shape[d])
                    s = ops[k].strides[j] * (int64_t)ops[k].elsize;
                else if (ops[k].sizes[j] != 1)
                    return od_error_set(err, OD_EINTERNAL,
                                        "od_cpu_iter_build: operand %d does not broadcast", k);
            }
            st[nd][k] = s;
        }
        sz[nd] = shape[d];
        if (shape[d] != 1)
            nd++;
    }
    for (int k = 0; k < nops; k++)
        if (ops[k].ndim > ndim)
            return od_error_set(err, OD_EINTERNAL, "od_cpu_iter_build: operand %d has too many dims", k);
    it->numel = numel;
    if (numel == 0) {
        it->ndim = 0;
        return OD_OK;
    }

    /* Stable insertion sort, outermost first: inner dims get the small strides. */
    for (int i = 1; i < nd; i++) {
        for (int j = i; j > 0 && should_swap(it, (const int64_t(*)[OD_CPU_ITER_MAX_OPS])st, j - 1, j);
             j--) {
            int64_t t = sz[j];
            sz[j] = sz[j - 1];
            sz[j - 1] = t;
            for (int k = 0; k < nops; k++) {
                t = st[j][k];
                st[j][k] = st[j - 1][k];
                st[j - 1][k] = t;
            }
        }
    }

    /* Coalesce from the innermost dim outwards; store innermost first. */
    int out = 0;
    for (int d = nd - 1; d >= 0; d--) {
        if (out > 0) {
            int prev = out - 1;
            int ok = 1;
            for (int k = 0; k < nops && ok; k++)
                ok = st[d][k] == it->strides[prev][k] * it->sizes[prev];
            if (ok) {
                it->sizes[prev] *= sz[d];
                continue;
            }
        }
        it->sizes[out] = sz[d];
        for (int k = 0; k < nops; k++)
            it->strides[out][k] = st[d][k];
        out++;
    }
    it->ndim = out;
    return OD_OK;
}

static void run_range(const od_cpu_iter *it, od_cpu_loop_fn fn, void *ctx, int64_t begin, int64_t end)
{
    char *ptr[OD_CPU_ITER_MAX_OPS];
    int64_t inner[OD_CPU_ITER_MAX_OPS] = {0};
    if (it->ndim == 0) { /* every dim had size 1: one element */
        for (int k = 0; k < it->nops; k++)
            ptr[k] = it->data[k];
        if (begin < end)
            fn(ctx, ptr, inner, 1);
        return;
    }
    int64_t idx[OD_MAX_DIMS];
    int64_t rem = begin;
    for (int d = 0; d < it->ndim; d++) {
        idx[d] = rem % it->sizes[d];
        rem /= it->sizes[d];
    }
    for (int k = 0; k < it->nops; k++)
        inner[k] = it->strides[0][k];
    int64_t pos = begin;
    while (pos < end) {
        for (int k = 0; k < it->nops; k++) {
            char *p = it->data[k];
            for (int d = 0; d < it->ndim; d++)
                p += idx[d] * it->strides[d][k];
            ptr[k] = p;
        }
        int64_t n = it->sizes[0] - idx[0];
        if (n > end - pos)
            n = end - pos;
        fn(ctx, ptr, inner, n);
        pos += n;
        idx[0] = 0;
        for (int d = 1; d < it->ndim; d++) {
            if (++idx[d] < it->sizes[d])
                break;
            idx[d] = 0;
        }
    }
}

typedef struct run_ctx {
    const od_cpu_iter *it;
    od_cpu_loop_fn fn;
    void *ctx;
} run_ctx;

static void run_chunk(void *vctx, int64_t begin, int64_t end)
{
    const run_ctx *rc = vctx;
    run_range(rc->it, rc->fn, rc->ctx, begin, end);
}

void od_cpu_iter_run(const od_cpu_iter *it, od_cpu_loop_fn fn, void *ctx, int64_t grain)
{
    if (it->numel == 0)
        return;
    if (grain <= 0 || it->numel <= grain) {
        run_range(it, fn, ctx, 0, it->numel);
        return;
    }
    run_ctx rc = {it, fn, ctx};
    if (od_parallel_for(it->numel, grain, run_chunk, &rc) != OD_OK)
        run_range(it, fn, ctx, 0, it->numel); /* only on a bad argument: never partially run */
}

od_value od_cpu_load_value(const void *p, od_dtype dt)
{
    if (dt == OD_BOOL)
        return od_bool(*(const bool *)p);
    if (od_dtype_is_floating(dt))
        return od_double(od_cpu_load_f64(p, dt));
    return od_int(od_cpu_load_i64(p, dt));
}

int64_t od_cpu_offset_of(const od_tensor *t, int64_t i)
{
    int64_t off = 0;
    for (int k = t->ndim - 1; k >= 0; k--) {
        off += (i % t->sizes[k]) * t->strides[k];
        i /= t->sizes[k];
    }
    return off;
}
