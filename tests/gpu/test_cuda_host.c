/* test_cuda_host.c — the CUDA backend's checks that need no GPU (run by
 * `make test` on every machine through tools/gpu-tests.sh):
 *  - every CUDA kernel of ops.def is registered and shows in the tables;
 *  - without a device, allocation, factories, copies and kernels fail with
 *    OD_EUNAVAIL and the reason from cudaGetDeviceCount;
 *  - the shared per-element code the device runs: Philox against the
 *    Random123 known-answer vectors, the rand/randn transforms' ranges and
 *    moments, the elementwise iterator's broadcasting / coalescing (every
 *    (output, input) offset pair preserved), and the host gather / scatter
 *    of strided CPU tensors used by host<->device copies.
 */
#include "gpu_testutil.h"

#include "cuda_internal.h"
#include "od_cuda.h"
#include "od_math.h"

static void setup(void)
{
    seed_init();
    od_error e;
    cr_assert_eq(od_init(&e), OD_OK, "od_init: %s", e.message);
}

TestSuite(cuda_host, .init = setup);

/* ---- registration -------------------------------------------------------------------------- */

static const struct {
    od_opid id;
    const char *cuda;
} g_cols[] = {
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag) {OD_OPID_##id, #cuda},
#include "ops.def"
#undef OD_OP
};

Test(cuda_host, every_cuda_kernel_is_registered)
{
    int n = 0;
    for (size_t i = 0; i < sizeof g_cols / sizeof g_cols[0]; i++) {
        const od_op *op = od_builtin(g_cols[i].id);
        TCHECK(op, "built-in %d missing", (int)g_cols[i].id);
        od_provenance prov;
        const od_kernel *k = od_op_slot(op, OD_KEY_CUDA, &prov);
        if (strcmp(g_cols[i].cuda, "0") == 0)
            continue;
        n++;
        TCHECK(k && prov == OD_PROV_KERNEL, "%s: CUDA slot is not a [kernel]", od_op_name(op));
        TCHECK(strcmp(k->name, g_cols[i].cuda) == 0, "%s: CUDA kernel is %s, ops.def says %s",
               od_op_name(op), k->name, g_cols[i].cuda);
        TCHECK(strcmp(k->file, "kernels/ops.def") == 0 && k->line > 0, "%s: registration site %s:%d",
               od_op_name(op), k->file, k->line);
        char *dump = od_dump_table(op), want[128];
        snprintf(want, sizeof want, "CUDA: registered at kernels/ops.def:%d [kernel]", k->line);
        TCHECK(dump && strstr(dump, want), "%s: the dump does not show '%s':\n%s", od_op_name(op), want,
               dump ? dump : "(null)");
        free(dump);
    }
    TCHECK(n >= 60, "only %d CUDA kernels registered", n);
}

/* ---- without a device -------------------------------------------------------------------------- */

static bool skip_if_device(void)
{
    if (od_cuda_available(NULL, 0)) {
        cr_skip_test("a CUDA device is present; the no-device behaviour is not observable here");
        return true;
    }
    return false;
}

Test(cuda_host, no_device_reports_the_reason)
{
    if (skip_if_device())
        return;
    char why[512];
    TCHECK(!od_cuda_available(why, sizeof why), "available?");
    TCHECK(strncmp(why, "CUDA unavailable: ", 18) == 0, "reason: %s", why);
    TCHECK(strstr(why, "cudaGetDeviceCount"), "reason does not name the call: %s", why);
    TCHECK(od_cuda_device_count() == 0, "device count %d", od_cuda_device_count());
    od_cuda_info info;
    TCHECK(od_cuda_device_info(0, &info) == OD_EUNAVAIL, "device_info");
    od_cuda_alloc_info ai;
    TCHECK(od_cuda_alloc_stats(0, &ai) == OD_EUNAVAIL, "alloc_stats");
    od_cuda_empty_cache(); /* must be a no-op */

    /* Allocation through the runtime. */
    int64_t sz[2] = {3, 4};
    od_tensor *t = NULL;
    od_error e;
    od_error_clear(&e);
    od_status st = od_tensor_empty(sz, 2, OD_FLOAT32, TU_CUDA, &t, &e);
    TCHECK(st == OD_EUNAVAIL && !t, "empty on cuda: %s (%s)", od_status_code(st), e.message);
    TCHECK(strstr(e.message, why), "message '%s' lacks the reason '%s'", e.message, why);

    /* A factory through BackendSelect and a copy to the device. */
    od_error_clear(&e);
    st = od_zeros(sz, 2, OD_FLOAT32, TU_CUDA, &t, &e);
    TCHECK(st == OD_EUNAVAIL && !t, "zeros on cuda: %s (%s)", od_status_code(st), e.message);
    od_tensor *c = tu_rand(sz, 2, OD_FLOAT32, -1, 1);
    od_error_clear(&e);
    st = od_to_device(c, TU_CUDA, &t, &e);
    TCHECK(st == OD_EUNAVAIL && !t, "to(cuda): %s (%s)", od_status_code(st), e.message);
    od_tensor_release(c);
}

/* A CUDA tensor over memory nobody may touch: the kernels must refuse before
 * reading it. */
static void no_free(void *ctx, void *data)
{
    (void)ctx;
    (void)data;
}

Test(cuda_host, no_device_kernels_fail_cleanly)
{
    if (skip_if_device())
        return;
    static char fake[4096];
    od_storage *sto = NULL;
    od_error e;
    OKCALL(od_storage_wrap(TU_CUDA, fake, sizeof fake, no_free, NULL, &sto, &e_));
    int64_t sz[2] = {4, 8};
    od_tensor *a = NULL;
    OKCALL(od_tensor_from_storage(sto, sz, 2, OD_FLOAT32, &a, &e_));
    od_storage_release(sto);
    TCHECK(od_ks_has(a->keys, OD_KEY_CUDA), "the wrapped tensor is not a CUDA tensor");
    od_tensor *out = NULL;
    od_error_clear(&e);
    od_status st = od_add(a, a, 1.0, &out, &e);
    TCHECK(st == OD_EUNAVAIL && !out, "add: %s (%s)", od_status_code(st), e.message);
    TCHECK(strstr(e.message, "CUDA unavailable"), "add: %s", e.message);
    od_error_clear(&e);
    st = od_sum(a, NULL, 0, false, &out, &e);
    TCHECK(st == OD_EUNAVAIL && !out, "sum: %s (%s)", od_status_code(st), e.message);
    od_tensor *at = NULL;
    OKCALL(od_tensor_t(a, &at, &e_));
    od_error_clear(&e);
    st = od_mm(a, at, &out, &e);
    TCHECK(st == OD_EUNAVAIL && !out, "mm: %s (%s)", od_status_code(st), e.message);
    od_tensor_release(at);
    od_tensor *cpu = NULL;
    od_error_clear(&e);
    st = od_to_device(a, TU_CPU, &cpu, &e);
    TCHECK(st == OD_EUNAVAIL && !cpu, "to(cpu): %s (%s)", od_status_code(st), e.message);
    od_tensor_release(a);
}

/* ---- Philox and the random transforms --------------------------------------------------------------- */

Test(cuda_host, philox_known_answers)
{
    /* Random123's kat_vectors for philox4x32_10. */
    static const struct {
        uint32_t ctr[4], key[2], out[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
        {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
         {0xffffffffu, 0xffffffffu},
         {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
        {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
         {0xa4093822u, 0x299f31d0u},
         {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
    };
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        uint32_t out[4];
        od_math_philox4x32_raw(kat[i].ctr, kat[i].key, out);
        for (int j = 0; j < 4; j++)
            TCHECK(out[j] == kat[i].out[j], "vector %zu word %d: %08x != %08x", i, j, out[j],
                   kat[i].out[j]);
    }
    /* The (seed, counter) form is the raw form with the counter in words 0-1. */
    uint64_t seed = rng_next(), ctr = rng_next();
    uint32_t a[4], b[4];
    uint32_t c4[4] = {(uint32_t)ctr, (uint32_t)(ctr >> 32), 0, 0}, k2[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    od_math_philox4x32(seed, ctr, a);
    od_math_philox4x32_raw(c4, k2, b);
    TCHECK(memcmp(a, b, sizeof a) == 0, "philox4x32 != raw form");
}

Test(cuda_host, random_transforms)
{
    const int bits_of[4] = {8, 11, 24, 53};
    uint64_t seed = rng_next(), base = rng_next() >> 1;
    const int n = 200000;
    for (int b = 0; b < 4; b++) {
        double sum = 0, sum2 = 0;
        for (int i = 0; i < n; i++) {
            double u = od_math_random_f64(seed, base + (uint64_t)i, false, bits_of[b]);
            TCHECK(u >= 0 && u < 1, "uniform %g out of [0, 1) (bits %d)", u, bits_of[b]);
            double scaled = ldexp(u, bits_of[b] > 53 ? 53 : bits_of[b]);
            TCHECK(scaled == floor(scaled), "uniform %a is not a multiple of 2^-%d", u, bits_of[b]);
            sum += u;
            sum2 += u * u;
        }
        double mean = sum / n, var = sum2 / n - mean * mean;
        /* 6 sigma on the mean; the variance of U[0,1) is 1/12. */
        TCHECK(fabs(mean - 0.5) < 6 * sqrt(1.0 / 12 / n), "uniform mean %g (bits %d)", mean, bits_of[b]);
        TCHECK(fabs(var - 1.0 / 12) < 0.01, "uniform variance %g (bits %d)", var, bits_of[b]);
    }
    double sum = 0, sum2 = 0, sum4 = 0;
    for (int i = 0; i < n; i++) {
        double z = od_math_random_f64(seed, base + (uint64_t)i, true, 53);
        TCHECK(isfinite(z), "normal %g", z);
        sum += z;
        sum2 += z * z;
        sum4 += z * z * z * z;
    }
    double mean = sum / n, var = sum2 / n - mean * mean;
    TCHECK(fabs(mean) < 6 / sqrt((double)n), "normal mean %g", mean);
    TCHECK(fabs(var - 1) < 6 * sqrt(2.0 / n), "normal variance %g", var);
    TCHECK(fabs(sum4 / n - 3) < 0.1, "normal fourth moment %g", sum4 / n);
    /* Neighbouring counters give different numbers (no accidental reuse). */
    TCHECK(od_math_random_f64(seed, base, false, 53) != od_math_random_f64(seed, base + 1, false, 53),
           "counter ignored");
}

/* ---- the elementwise iterator ---------------------------------------------------------------------- */

typedef struct tuple4 {
    int64_t off[OD_CU_MAX_OPERANDS];
} tuple4;

static int cmp_tuple(const void *a, const void *b)
{
    return memcmp(a, b, sizeof(tuple4));
}

/* A random view of a fresh meta tensor: permuted, sliced with steps. */
static od_tensor *random_view(const int64_t *sizes, int ndim)
{
    int64_t big[OD_MAX_DIMS];
    int steps[OD_MAX_DIMS];
    for (int d = 0; d < ndim; d++) {
        steps[d] = (int)rng_int(1, 2);
        big[d] = sizes[d] * steps[d] + rng_int(0, 1);
    }
    int perm[OD_MAX_DIMS];
    for (int d = 0; d < ndim; d++)
        perm[d] = d;
    for (int d = ndim - 1; d > 0; d--) {
        int j = (int)rng_int(0, d);
        int t = perm[d];
        perm[d] = perm[j];
        perm[j] = t;
    }
    /* Allocate in permuted order, then permute back so the view has `sizes`. */
    int64_t alloc[OD_MAX_DIMS];
    for (int d = 0; d < ndim; d++)
        alloc[d] = big[perm[d]];
    od_tensor *base = NULL, *p = NULL, *v = NULL;
    od_device meta = {OD_DEV_META, 0};
    OKCALL(od_tensor_empty(alloc, ndim, OD_FLOAT32, meta, &base, &e_));
    int64_t inv[OD_MAX_DIMS];
    for (int d = 0; d < ndim; d++)
        inv[perm[d]] = d;
    OKCALL(od_tensor_permute(base, inv, ndim, &p, &e_));
    od_tensor_release(base);
    for (int d = 0; d < ndim; d++) {
        OKCALL(od_tensor_slice(p, d, 0, sizes[d] * steps[d], steps[d], &v, &e_));
        od_tensor_release(p);
        p = v;
    }
    return p;
}

Test(cuda_host, iterator_preserves_every_offset_pair)
{
    for (int iter = 0; iter < 300; iter++) {
        int ndim = (int)rng_int(0, 4);
        int64_t sizes[OD_MAX_DIMS];
        int64_t numel = 1;
        for (int d = 0; d < ndim; d++) {
            sizes[d] = rng_int(1, 4);
            numel *= sizes[d];
        }
        od_tensor *out = random_view(sizes, ndim);
        int nin = (int)rng_int(1, 3);
        od_tensor *in[3] = {NULL, NULL, NULL};
        for (int k = 0; k < nin; k++) {
            int drop = (int)rng_int(0, ndim); /* leading dims broadcast away */
            int64_t isz[OD_MAX_DIMS];
            for (int d = drop; d < ndim; d++)
                isz[d - drop] = rng_int(0, 2) == 0 ? 1 : sizes[d];
            in[k] = random_view(isz, ndim - drop);
        }
        od_cu_iter it;
        od_cu_iter_init(&it, out);
        for (int k = 0; k < nin; k++)
            OKCALL(od_cu_iter_add_tensor(&it, in[k], &e_));
        /* Expected pairs, from the original views. */
        tuple4 *want = calloc((size_t)numel, sizeof *want), *got = calloc((size_t)numel, sizeof *got);
        for (int64_t i = 0; i < numel; i++) {
            int64_t rem = i, idx[OD_MAX_DIMS];
            for (int d = ndim - 1; d >= 0; d--) {
                idx[d] = rem % sizes[d];
                rem /= sizes[d];
            }
            for (int d = 0; d < ndim; d++)
                want[i].off[0] += idx[d] * out->strides[d];
            for (int k = 0; k < nin; k++) {
                int lead = ndim - in[k]->ndim;
                for (int d = lead; d < ndim; d++)
                    if (in[k]->sizes[d - lead] != 1)
                        want[i].off[k + 1] += idx[d] * in[k]->strides[d - lead];
            }
        }
        od_cu_iter_coalesce(&it);
        TCHECK(it.numel == numel, "numel %" PRId64 " != %" PRId64, it.numel, numel);
        TCHECK(it.ndim <= (ndim > 0 ? ndim : 0), "coalescing grew the rank");
        for (int d = 0; d < it.ndim; d++)
            TCHECK(it.sizes[d] > 1, "a size-1 dim survived coalescing");
        for (int64_t i = 0; i < numel; i++) {
            int64_t rem = i;
            for (int d = it.ndim - 1; d >= 0; d--) {
                int64_t c = rem % it.sizes[d];
                rem /= it.sizes[d];
                for (int k = 0; k < it.nops; k++)
                    got[i].off[k] += c * it.op[k].strides[d];
            }
        }
        qsort(want, (size_t)numel, sizeof *want, cmp_tuple);
        qsort(got, (size_t)numel, sizeof *got, cmp_tuple);
        TCHECK(memcmp(want, got, (size_t)numel * sizeof *want) == 0,
               "iteration %d: coalesced iterator visits different offsets (ndim %d -> %d, %d inputs)", iter,
               ndim, it.ndim, nin);
        /* Coalescing must merge a fully contiguous case into one dim. */
        free(want);
        free(got);
        od_tensor_release(out);
        for (int k = 0; k < nin; k++)
            od_tensor_release(in[k]);
    }
    /* Contiguous operands of one shape: a single run. */
    int64_t sz[3] = {3, 5, 7};
    od_tensor *a = NULL, *b = NULL;
    od_device meta = {OD_DEV_META, 0};
    OKCALL(od_tensor_empty(sz, 3, OD_FLOAT32, meta, &a, &e_));
    OKCALL(od_tensor_empty(sz, 3, OD_FLOAT16, meta, &b, &e_));
    od_cu_iter it;
    od_cu_iter_init(&it, a);
    OKCALL(od_cu_iter_add_tensor(&it, b, &e_));
    od_value two = od_double(2.0);
    od_cu_iter_add_scalar(&it, &two);
    od_cu_iter_coalesce(&it);
    TCHECK(it.ndim == 1 && it.sizes[0] == 105 && it.op[0].strides[0] == 1 && it.op[1].strides[0] == 1,
           "contiguous operands did not merge: ndim %d", it.ndim);
    TCHECK(it.op[2].is_const && it.op[2].cd == 2.0 && it.op[2].ci == 2, "scalar operand");
    od_tensor_release(a);
    od_tensor_release(b);
}

Test(cuda_host, iterator_rejects_non_broadcastable)
{
    int64_t a_sz[2] = {3, 4}, b_sz[2] = {2, 4};
    od_tensor *a = NULL, *b = NULL;
    od_device meta = {OD_DEV_META, 0};
    OKCALL(od_tensor_empty(a_sz, 2, OD_FLOAT32, meta, &a, &e_));
    OKCALL(od_tensor_empty(b_sz, 2, OD_FLOAT32, meta, &b, &e_));
    od_cu_iter it;
    od_cu_iter_init(&it, a);
    od_error e;
    TCHECK(od_cu_iter_add_tensor(&it, b, &e) == OD_EINTERNAL, "[2,4] broadcast to [3,4]");
    od_tensor_release(a);
    od_tensor_release(b);
}

/* ---- host gather / scatter ---------------------------------------------------------------------------- */

/* A random strided CPU view of random data (int32 elements: exact compare). */
static od_tensor *random_cpu_view(int64_t *numel_out)
{
    int ndim = (int)rng_int(0, 4);
    int64_t sizes[OD_MAX_DIMS], big[OD_MAX_DIMS];
    int steps[OD_MAX_DIMS];
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        sizes[d] = rng_int(1, 6);
        steps[d] = (int)rng_int(1, 3);
        big[d] = sizes[d] * steps[d];
        numel *= sizes[d];
    }
    od_tensor *base = tu_rand(big, ndim, OD_INT32, -1000000, 1000000), *v = base, *w = NULL;
    for (int d = 0; d < ndim; d++) {
        OKCALL(od_tensor_slice(v, d, 0, big[d], steps[d], &w, &e_));
        od_tensor_release(v);
        v = w;
    }
    if (ndim >= 2 && rng_int(0, 1)) {
        int64_t d0 = rng_int(0, ndim - 1), d1 = rng_int(0, ndim - 1);
        OKCALL(od_tensor_transpose(v, d0, d1, &w, &e_));
        od_tensor_release(v);
        v = w;
    }
    *numel_out = numel;
    return v;
}

Test(cuda_host, host_gather_scatter)
{
    for (int iter = 0; iter < 200; iter++) {
        int64_t n;
        od_tensor *t = random_cpu_view(&n);
        od_cu_host_walk w;
        od_cu_host_walk_init(&w, t);
        int32_t *buf = calloc((size_t)n + 1, sizeof *buf);
        /* Gather in random chunks. */
        for (int64_t at = 0; at < n;) {
            int64_t cnt = rng_int(1, n - at);
            od_cu_host_xfer(&w, at, cnt, (char *)(buf + at), true);
            at += cnt;
        }
        for (int64_t i = 0; i < n; i++)
            TCHECK(buf[i] == (int32_t)tu_get(t, i), "gather: element %" PRId64 " %d != %d", i, buf[i],
                   (int32_t)tu_get(t, i));
        /* Scatter fresh values back in random chunks, read them in order. */
        for (int64_t i = 0; i < n; i++)
            buf[i] = (int32_t)rng_int(-1000, 1000);
        for (int64_t at = 0; at < n;) {
            int64_t cnt = rng_int(1, n - at);
            od_cu_host_xfer(&w, at, cnt, (char *)(buf + at), false);
            at += cnt;
        }
        for (int64_t i = 0; i < n; i++)
            TCHECK(buf[i] == (int32_t)tu_get(t, i), "scatter: element %" PRId64, i);
        free(buf);
        od_tensor_release(t);
    }
}
