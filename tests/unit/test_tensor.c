/* test_tensor.c — the tensor runtime: devices, storage and the CPU allocator,
 * creation checks, the allocation limit, fp16/bf16 conversions, every view
 * against index arithmetic on fresh random data, view compatibility,
 * broadcasting, ownership, and od_parallel_for.
 *
 * References are computed here, independently of the code under test: a
 * view's element at a logical index is compared with the element of the
 * base tensor that the view's semantics name (row-major index arithmetic on
 * the base's flat data). Inputs are random; the seed is printed in every
 * failure message and can be replayed with OD_TEST_SEED=<seed>.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "od_half.h"
#include "od_parallel.h"
#include "od_tensor.h"


/* ---- randomness with a printed seed ---- */

static uint64_t g_seed, g_state;

static void seed_rng(void)
{
    const char *e = getenv("OD_TEST_SEED");
    if (e && *e) {
        g_seed = strtoull(e, NULL, 0);
    } else {
        FILE *f = fopen("/dev/urandom", "rb");
        if (!f || fread(&g_seed, sizeof g_seed, 1, f) != 1)
            g_seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
        if (f)
            fclose(f);
    }
    g_state = g_seed;
}

static uint64_t rnd(void) /* splitmix64 */
{
    uint64_t z = (g_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int64_t rint_in(int64_t lo, int64_t hi) /* inclusive */
{
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

static double rnd_double(void) { return (double)(rnd() >> 11) / 9007199254740992.0 * 200.0 - 100.0; }

#define CHECK(cond, fmt, ...) \
    cr_assert(cond, "[OD_TEST_SEED=%llu] " fmt, (unsigned long long)g_seed, ##__VA_ARGS__)

#define OK(call)                                                                         \
    do {                                                                                 \
        od_error e_;                                                                     \
        od_error_clear(&e_);                                                             \
        od_status st_ = (call);                                                          \
        (void)e_;                                                                        \
        CHECK(st_ == OD_OK, "%s failed: %s", #call, st_ == OD_OK ? "" : last_err.message); \
    } while (0)

static od_error last_err;
static const od_device CPU = {OD_DEV_CPU, 0};
static const od_device META = {OD_DEV_META, 0};

TestSuite(tensor, .init = seed_rng);
TestSuite(views, .init = seed_rng);
TestSuite(alloc, .init = seed_rng);
TestSuite(parallel, .init = seed_rng);
TestSuite(half, .init = seed_rng);

/* ---- reference helpers ---- */

static int64_t numel_of(const int64_t *sizes, int ndim)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= sizes[i];
    return n;
}

/* Row-major flat index of idx in a shape: the reference address of an
 * element of a freshly made contiguous base. */
static int64_t flat_index(const int64_t *idx, const int64_t *sizes, int ndim)
{
    int64_t f = 0;
    for (int i = 0; i < ndim; i++)
        f = f * sizes[i] + idx[i];
    return f;
}

static void unflatten(int64_t f, const int64_t *sizes, int ndim, int64_t *idx)
{
    for (int i = ndim - 1; i >= 0; i--) {
        idx[i] = f % sizes[i];
        f /= sizes[i];
    }
}

/* Advances idx through a shape in row-major order; false after the last. */
static bool next_index(int64_t *idx, const int64_t *sizes, int ndim)
{
    for (int i = ndim - 1; i >= 0; i--) {
        if (++idx[i] < sizes[i])
            return true;
        idx[i] = 0;
    }
    return false;
}

/* Storage element index that the tensor's geometry gives a logical index. */
static int64_t storage_index(const od_tensor *t, const int64_t *idx)
{
    int64_t off = t->offset;
    for (int i = 0; i < t->ndim; i++)
        off += idx[i] * t->strides[i];
    return off;
}

/* Element of a float64 tensor at a logical index. */
static double elem(const od_tensor *t, const int64_t *idx)
{
    return ((const double *)t->storage->data)[storage_index(t, idx)];
}

static double *base_data(const od_tensor *base) { return (double *)base->storage->data; }

/* Fresh contiguous float64 tensor of random values. */
static od_tensor *rand_base(const int64_t *sizes, int ndim)
{
    od_tensor *t = NULL;
    od_status st = od_tensor_empty(sizes, ndim, OD_FLOAT64, CPU, &t, &last_err);
    CHECK(st == OD_OK, "od_tensor_empty: %s", last_err.message);
    double *d = od_tensor_data(t);
    for (int64_t i = 0; i < od_tensor_numel(t); i++)
        d[i] = rnd_double();
    return t;
}

static int rand_shape(int64_t *sizes, int min_nd, int max_nd, int64_t max_size, bool allow_zero)
{
    int nd = (int)rint_in(min_nd, max_nd);
    for (int i = 0; i < nd; i++) {
        sizes[i] = rint_in(1, max_size);
        if (allow_zero && rint_in(0, 9) == 0)
            sizes[i] = 0;
    }
    return nd;
}

static bool shape_eq(const od_tensor *t, const int64_t *sizes, int ndim)
{
    if (t->ndim != ndim)
        return false;
    for (int i = 0; i < ndim; i++)
        if (t->sizes[i] != sizes[i])
            return false;
    return true;
}

static const char *shp(const int64_t *sizes, int ndim)
{
    static _Thread_local char buf[8][256];
    static _Thread_local int k;
    char *b = buf[k++ & 7];
    od_shape_print(sizes, ndim, b, 256);
    return b;
}

static bool msg_matches(const char *got, const char *want) { return !want || strcmp(got, want) == 0; }

/* Expects status st and, unless msg is NULL, exactly message msg. */
#define EXPECT_ERR(call, st, msg)                                                         \
    do {                                                                                  \
        const char *want_ = (msg);                                                        \
        od_error_clear(&last_err);                                                        \
        od_status got_ = (call);                                                          \
        CHECK(got_ == (st), "%s returned %s (%s), expected %s", #call, od_status_code(got_), \
              last_err.message, od_status_code(st));                                      \
        CHECK(msg_matches(last_err.message, want_), "%s message:\n  got  '%s'\n  want '%s'", \
              #call, last_err.message, want_ ? want_ : "");                               \
    } while (0)

/* ======================================================================== */
/* devices                                                                   */

Test(tensor, device_parse_and_print)
{
    od_device d;
    od_error err;
    cr_assert_eq(od_device_parse("cpu", &d, &err), OD_OK);
    cr_expect(d.type == OD_DEV_CPU && d.index == 0);
    cr_assert_eq(od_device_parse("cuda", &d, &err), OD_OK);
    cr_expect(d.type == OD_DEV_CUDA && d.index == 0);
    cr_assert_eq(od_device_parse("cuda:1", &d, &err), OD_OK);
    cr_expect(d.type == OD_DEV_CUDA && d.index == 1);
    cr_assert_eq(od_device_parse("cuda:12", &d, &err), OD_OK);
    cr_expect(d.index == 12);
    cr_assert_eq(od_device_parse("meta", &d, &err), OD_OK);
    cr_expect(d.type == OD_DEV_META);
    cr_assert_eq(od_device_parse("cpu:0", &d, &err), OD_OK);

    static const char *const bad[] = {"cuda:-1", "gpu", "cuda:x", "cuda:", "", "CPU", "cuda:1x",
                                      "cuda:01", "cpu:1", "cuda:99999999999", "meta:2", ":0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        od_error_clear(&err);
        cr_expect_eq(od_device_parse(bad[i], &d, &err), OD_EINVAL, "'%s' must not parse", bad[i]);
        cr_expect(err.message[0] != '\0', "'%s' gets a message", bad[i]);
    }
    od_device_parse("gpu", &d, &err);
    cr_expect_str_eq(err.message,
                     "Expected one of cpu, cuda, meta device type at start of device string: gpu");
    od_device_parse("cuda:x", &d, &err);
    cr_expect(strstr(err.message, "Invalid device string: 'cuda:x'") != NULL, "%s", err.message);
    od_device_parse("cpu:1", &d, &err);
    cr_expect_str_eq(err.message, "CPU device index must be -1 or zero, got 1");

    char buf[32];
    od_device c3 = {OD_DEV_CUDA, 3};
    cr_expect_eq(od_device_print(c3, buf, sizeof buf), 6);
    cr_expect_str_eq(buf, "cuda:3");
    od_device_print(CPU, buf, sizeof buf);
    cr_expect_str_eq(buf, "cpu");
    od_device_print(META, buf, sizeof buf);
    cr_expect_str_eq(buf, "meta");
    cr_expect_eq(od_device_print(c3, buf, 3), 6, "returns the length needed");
    cr_expect_str_eq(buf, "cu");
    /* Round trip. */
    for (int i = 0; i < 5; i++) {
        od_device x = {OD_DEV_CUDA, (int)rint_in(0, 1000)}, y;
        od_device_print(x, buf, sizeof buf);
        cr_assert_eq(od_device_parse(buf, &y, &err), OD_OK);
        cr_expect(od_device_eq(x, y));
    }
    cr_expect(!od_device_eq(CPU, META));
    cr_expect(od_device_key(CPU) == OD_KEY_CPU);
    cr_expect(od_device_key(c3) == OD_KEY_CUDA);
    cr_expect(od_device_key(META) == OD_KEY_Meta);
}

/* ======================================================================== */
/* creation, checks and queries                                              */

Test(tensor, empty_is_contiguous_with_the_right_geometry)
{
    for (int it = 0; it < 100; it++) {
        int64_t sizes[OD_MAX_DIMS];
        int nd = rand_shape(sizes, 0, 6, 5, true);
        for (int dt = 0; dt < OD_NUM_DTYPES; dt++) {
            od_tensor *t = NULL;
            OK(od_tensor_empty(sizes, nd, (od_dtype)dt, CPU, &t, &last_err));
            CHECK(shape_eq(t, sizes, nd), "shape %s", shp(sizes, nd));
            CHECK(t->dtype == (od_dtype)dt && od_device_eq(t->device, CPU) && t->offset == 0, "meta");
            CHECK(atomic_load(&t->refcount) == 1, "new ref");
            int64_t n = numel_of(sizes, nd);
            CHECK(od_tensor_numel(t) == n, "numel");
            CHECK(od_tensor_nbytes(t) == (size_t)n * od_dtype_size((od_dtype)dt), "nbytes");
            CHECK(t->storage->nbytes >= od_tensor_nbytes(t), "storage big enough");
            CHECK(od_tensor_is_contiguous(t), "contiguous %s", shp(sizes, nd));
            /* Contiguous means row-major addresses: check every index. */
            if (n > 0) {
                int64_t idx[OD_MAX_DIMS] = {0};
                do
                    CHECK(storage_index(t, idx) == flat_index(idx, sizes, nd), "row-major");
                while (next_index(idx, sizes, nd));
                CHECK(od_tensor_data(t) != NULL, "data");
                CHECK(((uintptr_t)od_tensor_data(t) & 63) == 0, "64-byte aligned");
            }
            CHECK(t->keys == OD_KS(OD_KEY_CPU), "keys");
            od_tensor_release(t);
        }
    }
}

/* No byte a tensor held is readable through the next one: sizes on every
 * allocator path (inline, heap, cached large blocks; from 4 MiB a reused
 * block is cleared in 1 MiB chunks across the worker pool, the last one
 * ragged), after a poisoned overwrite-promised block and after a fully
 * written one. */
Test(tensor, empty_never_shows_earlier_bytes)
{
    static const int64_t sizes[] = {3, 40, 1000, 70000, 300000, 1 << 20, 5000000, (9 << 20) + 1};
    od_cpu_set_poison(true);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (int round = 0; round < 3; round++) {
            od_tensor *a = NULL, *b = NULL;
            if (round == 0) { /* poisoned, as a kernel would get it */
                OK(od_tensor_empty_uninit(&sizes[i], 1, OD_UINT8, CPU, &a, &last_err));
                const uint8_t *p = od_tensor_data(a);
                for (int64_t k = 0; k < sizes[i]; k++)
                    CHECK(p[k] == 0xA5, "poison at %lld of %lld", (long long)k, (long long)sizes[i]);
            } else {
                OK(od_tensor_empty(&sizes[i], 1, OD_UINT8, CPU, &a, &last_err));
                memset(od_tensor_data(a), 0x5A, (size_t)sizes[i]);
            }
            od_tensor_release(a);
            OK(od_tensor_empty(&sizes[i], 1, OD_UINT8, CPU, &b, &last_err));
            const uint8_t *p = od_tensor_data(b);
            for (int64_t k = 0; k < sizes[i]; k++)
                if (p[k] != 0)
                    cr_assert_fail("byte %lld of a new %lld-byte tensor is 0x%02x, not 0", (long long)k,
                             (long long)sizes[i], p[k]);
            od_tensor_release(b);
        }
    }
    od_cpu_set_poison(false);
}

Test(tensor, creation_rejects_bad_shapes)
{
    od_tensor *t = NULL;
    int64_t neg[] = {2, -1, 3};
    EXPECT_ERR(od_tensor_empty(neg, 3, OD_FLOAT32, CPU, &t, &last_err), OD_EINVAL, NULL);
    CHECK(strstr(last_err.message, "negative dimension -1") && strstr(last_err.message, "dim 1"),
          "names the dim: %s", last_err.message);
    int64_t many[OD_MAX_DIMS + 1];
    for (int i = 0; i <= OD_MAX_DIMS; i++)
        many[i] = 1;
    EXPECT_ERR(od_tensor_empty(many, OD_MAX_DIMS + 1, OD_FLOAT32, CPU, &t, &last_err), OD_EINVAL, NULL);
    EXPECT_ERR(od_tensor_empty(many, -1, OD_FLOAT32, CPU, &t, &last_err), OD_EINVAL, NULL);
    OK(od_tensor_empty(many, OD_MAX_DIMS, OD_FLOAT32, CPU, &t, &last_err));
    od_tensor_release(t);
    t = NULL;
    /* numel overflows int64 */
    int64_t big[] = {(int64_t)1 << 32, (int64_t)1 << 32};
    EXPECT_ERR(od_tensor_empty(big, 2, OD_UINT8, CPU, &t, &last_err), OD_ETOOLARGE, NULL);
    /* ... but a zero anywhere makes it empty, not too large */
    int64_t big0[] = {(int64_t)1 << 32, (int64_t)1 << 32, 0};
    OK(od_tensor_empty(big0, 3, OD_UINT8, CPU, &t, &last_err));
    CHECK(od_tensor_numel(t) == 0, "empty");
    od_tensor_release(t);
    t = NULL;
    /* numel fits, bytes overflow size_t */
    int64_t bytes[] = {(int64_t)1 << 61, 2};
    EXPECT_ERR(od_tensor_empty(bytes, 2, OD_FLOAT64, CPU, &t, &last_err), OD_ETOOLARGE, NULL);
    /* Representable but impossible (2^48 bytes, beyond the address space):
     * the allocator fails cleanly. Not under ASan, whose allocator aborts
     * (or warns) on such a request instead of returning NULL. */
#ifndef __SANITIZE_ADDRESS__
    int64_t huge[] = {(int64_t)1 << 45};
    EXPECT_ERR(od_tensor_empty(huge, 1, OD_FLOAT64, CPU, &t, &last_err), OD_ENOMEM, NULL);
    CHECK(strstr(last_err.message, "out of memory") != NULL, "%s", last_err.message);
#endif
    /* bad dtype */
    int64_t one[] = {1};
    EXPECT_ERR(od_tensor_empty(one, 1, OD_NUM_DTYPES, CPU, &t, &last_err), OD_EINVAL, NULL);
    CHECK(t == NULL, "nothing written on error");
}

Test(tensor, od_shape_numel_and_strides)
{
    int64_t sizes[] = {2, 0, 3}, strides[3], n = -1;
    cr_assert_eq(od_shape_numel(sizes, 3, &n, NULL), OD_OK);
    cr_expect_eq(n, 0);
    od_contiguous_strides(sizes, 3, strides);
    /* torch: empty dims count as size 1 for the strides of outer dims */
    cr_expect(strides[0] == 3 && strides[1] == 3 && strides[2] == 1, "[%ld, %ld, %ld]",
              (long)strides[0], (long)strides[1], (long)strides[2]);
    cr_assert_eq(od_shape_numel(NULL, 0, &n, NULL), OD_OK);
    cr_expect_eq(n, 1);
}

Test(tensor, shape_print)
{
    char buf[64];
    int64_t s[] = {2, 3};
    cr_expect_eq(od_shape_print(s, 2, buf, sizeof buf), 6);
    cr_expect_str_eq(buf, "[2, 3]");
    cr_expect_eq(od_shape_print(NULL, 0, buf, sizeof buf), 2);
    cr_expect_str_eq(buf, "[]");
    cr_expect_eq(od_shape_print(s, 2, buf, 4), 6);
    cr_expect_str_eq(buf, "[2,");
    cr_expect_eq(od_shape_print(s, 2, NULL, 0), 6);
    int64_t n[] = {-5, INT64_MAX};
    od_shape_print(n, 2, buf, sizeof buf);
    cr_expect_str_eq(buf, "[-5, 9223372036854775807]");
}

Test(tensor, wrap_dim)
{
    int d = -7;
    od_error err;
    for (int nd = 1; nd <= 5; nd++)
        for (int dim = -nd; dim < nd; dim++) {
            cr_assert_eq(od_wrap_dim(dim, nd, &d, &err), OD_OK);
            cr_expect_eq(d, dim < 0 ? dim + nd : dim);
        }
    cr_expect_eq(od_wrap_dim(2, 2, &d, &err), OD_EINVAL);
    cr_expect_str_eq(err.message, "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
    cr_expect_eq(od_wrap_dim(-3, 2, &d, &err), OD_EINVAL);
    cr_expect_str_eq(err.message, "Dimension out of range (expected to be in range of [-2, 1], but got -3)");
    /* scalars accept -1 and 0 */
    cr_expect_eq(od_wrap_dim(-1, 0, &d, &err), OD_OK);
    cr_expect_eq(d, 0);
    cr_expect_eq(od_wrap_dim(0, 0, &d, &err), OD_OK);
    cr_expect_eq(od_wrap_dim(1, 0, &d, &err), OD_EINVAL);
    cr_expect_str_eq(err.message, "Dimension out of range (expected to be in range of [-1, 0], but got 1)");
    cr_expect_eq(od_wrap_dim(INT64_MIN, 3, &d, &err), OD_EINVAL);
}

/* Contiguity by its meaning: the addresses are row-major from the first. */
static bool ref_contiguous(const od_tensor *t)
{
    int64_t n = od_tensor_numel(t);
    if (n == 0)
        return true;
    int64_t idx[OD_MAX_DIMS] = {0};
    int64_t base = storage_index(t, idx);
    do
        if (storage_index(t, idx) - base != flat_index(idx, t->sizes, t->ndim))
            return false;
    while (next_index(idx, t->sizes, t->ndim));
    return true;
}

Test(tensor, is_contiguous_matches_its_meaning)
{
    int yes = 0, no = 0;
    for (int it = 0; it < 400; it++) {
        int64_t sizes[OD_MAX_DIMS], strides[OD_MAX_DIMS];
        int nd = rand_shape(sizes, 0, 4, 3, true);
        /* storage as large as any geometry below can reach */
        int64_t base_sizes[] = {4096};
        od_tensor *b = rand_base(base_sizes, 1);
        /* Random strides; often the contiguous ones, sometimes perturbed
         * only on size-1 dims (which must not matter). */
        od_contiguous_strides(sizes, nd, strides);
        int mode = (int)rint_in(0, 2);
        for (int i = 0; i < nd; i++) {
            if (mode == 1 && sizes[i] == 1)
                strides[i] = rint_in(0, 50);
            if (mode == 2)
                strides[i] = rint_in(0, 12);
        }
        od_tensor *v = NULL;
        OK(od_tensor_as_strided(b, sizes, strides, nd, rint_in(0, 5), &v, &last_err));
        bool want = ref_contiguous(v);
        CHECK(od_tensor_is_contiguous(v) == want, "shape %s strides %s: want %d", shp(sizes, nd),
              shp(strides, nd), want);
        want ? yes++ : no++;
        od_tensor_release(v);
        od_tensor_release(b);
    }
    CHECK(yes > 20 && no > 20, "both outcomes exercised (%d, %d)", yes, no);
}

Test(tensor, keys_follow_device_grad_and_batching)
{
    int64_t s[] = {2};
    od_tensor *t = NULL, *m = NULL;
    OK(od_tensor_empty(s, 1, OD_FLOAT32, CPU, &t, &last_err));
    cr_expect_eq(t->keys, OD_KS(OD_KEY_CPU));
    t->requires_grad = true;
    od_tensor_refresh_keys(t);
    cr_expect_eq(t->keys, OD_KS(OD_KEY_CPU) | OD_KS(OD_KEY_AutogradCPU));
    OK(od_tensor_empty(s, 1, OD_FLOAT32, META, &m, &last_err));
    cr_expect_eq(m->keys, OD_KS(OD_KEY_Meta));
    m->requires_grad = true;
    od_tensor_refresh_keys(m);
    cr_expect_eq(m->keys, OD_KS(OD_KEY_Meta) | OD_KS(OD_KEY_AutogradOther));
    /* a batched wrapper */
    od_tensor_retain(m);
    t->batched_value = m;
    od_tensor_refresh_keys(t);
    cr_expect_eq(t->keys, OD_KS(OD_KEY_CPU) | OD_KS(OD_KEY_AutogradCPU) | OD_KS(OD_KEY_Batched));
    t->requires_grad = false;
    od_tensor_refresh_keys(t);
    cr_expect_eq(t->keys, OD_KS(OD_KEY_CPU) | OD_KS(OD_KEY_Batched));
    cr_expect_eq(atomic_load(&m->refcount), 2);
    od_tensor_release(t); /* releases batched_value */
    cr_expect_eq(atomic_load(&m->refcount), 1);
    od_tensor_release(m);
}

static int autograd_freed;
static void count_free(void *p)
{
    autograd_freed++;
    free(p);
}

static int deleter_calls;
static void *deleter_saw;
static void count_deleter(void *ctx, void *data)
{
    deleter_calls++;
    deleter_saw = data;
    *(int *)ctx += 1;
}

Test(tensor, ownership_views_outlive_their_base)
{
    /* External memory, so the test sees exactly when the storage dies. */
    double *mem = malloc(24 * sizeof(double));
    for (int i = 0; i < 24; i++)
        mem[i] = rnd_double();
    double copy[24];
    memcpy(copy, mem, sizeof copy);
    int ctx_count = 0;
    od_storage *s = NULL;
    OK(od_storage_wrap(CPU, mem, 24 * sizeof(double), count_deleter, &ctx_count, &s, &last_err));
    int64_t sizes[] = {2, 3, 4};
    od_tensor *base = NULL, *tr = NULL, *sl = NULL, *sel = NULL;
    OK(od_tensor_from_storage(s, sizes, 3, OD_FLOAT64, &base, &last_err));
    od_storage_release(s); /* the tensor holds its own reference */
    base->requires_grad = true;
    base->autograd = malloc(16);
    base->autograd_free = count_free;
    OK(od_tensor_transpose(base, 0, 2, &tr, &last_err));
    OK(od_tensor_slice(tr, 0, 1, 4, 2, &sl, &last_err));
    OK(od_tensor_select(sl, -1, 1, &sel, &last_err));
    CHECK(!sel->requires_grad && sel->autograd == NULL && sel->keys == OD_KS(OD_KEY_CPU),
          "views are plain tensors");
    od_tensor_release(base);
    cr_expect_eq(autograd_freed, 1, "autograd metadata freed with the tensor");
    od_tensor_release(tr);
    od_tensor_release(sl);
    cr_expect_eq(deleter_calls, 0, "storage alive while a view is");
    /* sel[i, j] = base[1, j, 1 + 2i] */
    cr_assert(shape_eq(sel, (int64_t[]){2, 3}, 2));
    for (int64_t i = 0; i < 2; i++)
        for (int64_t j = 0; j < 3; j++) {
            int64_t idx[] = {i, j};
            CHECK(elem(sel, idx) == copy[1 * 12 + j * 4 + (1 + 2 * i)], "sel[%ld,%ld]", (long)i, (long)j);
        }
    od_tensor_retain(sel);
    od_tensor_release(sel);
    cr_expect_eq(deleter_calls, 0);
    od_tensor_release(sel);
    cr_expect_eq(deleter_calls, 1, "last view gone: deleter ran once");
    cr_expect_eq(deleter_saw, mem);
    cr_expect_eq(ctx_count, 1);
    free(mem);
    od_tensor_release(NULL);
    od_storage_release(NULL);
}

static void *retain_release_loop(void *arg)
{
    od_tensor *t = arg;
    for (int i = 0; i < 20000; i++) {
        od_tensor_retain(t);
        od_storage_retain(t->storage);
        od_storage_release(t->storage);
        od_tensor_release(t);
    }
    return NULL;
}

Test(tensor, refcounts_are_atomic_across_threads)
{
    int64_t s[] = {8};
    od_tensor *t = NULL;
    OK(od_tensor_empty(s, 1, OD_FLOAT32, CPU, &t, &last_err));
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, retain_release_loop, t), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    cr_expect_eq(atomic_load(&t->refcount), 1);
    cr_expect_eq(atomic_load(&t->storage->refcount), 1);
    od_tensor_release(t);
}

/* ======================================================================== */
/* fp16 / bf16 conversions (od_half.h) and od_tensor_scalar                  */

/* Value of half bits by the IEEE formula, computed in double. */
static double ref_half_value(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
    double v;
    if (exp == 0)
        v = ldexp(man, -24);
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = ldexp(1024 + man, exp - 25);
    return sign ? -v : v;
}

Test(half, half_to_float_is_exact_for_all_65536)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = od_half_to_float((uint16_t)h);
        double want = ref_half_value((uint16_t)h);
        if (isnan(want))
            cr_assert(isnan(f) && (signbit(f) != 0) == ((h >> 15) != 0), "0x%04x", h);
        else
            cr_assert((double)f == want && (signbit(f) != 0) == (signbit(want) != 0), "0x%04x: %.9g vs %.9g", h,
                      (double)f, want);
    }
}

/* Nearest half by search over the ordered non-negative codes (0x7c00 stands
 * for 65536, i.e. the overflow to inf), ties to the even code. */
static uint16_t ref_float_to_half(float x)
{
    if (isnan(x))
        return 0x7e00;
    double a = fabs((double)x);
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    if (a >= 65536.0)
        return sign | 0x7c00;
    uint32_t lo = 0, hi = 0x7c00; /* value(lo) <= a < value(hi) */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        double v = mid == 0x7c00 ? 65536.0 : ref_half_value((uint16_t)mid);
        if (v <= a)
            lo = mid;
        else
            hi = mid;
    }
    double vlo = ref_half_value((uint16_t)lo);
    double vhi = hi == 0x7c00 ? 65536.0 : ref_half_value((uint16_t)hi);
    uint32_t r;
    if (a - vlo < vhi - a)
        r = lo;
    else if (a - vlo > vhi - a)
        r = hi;
    else
        r = (lo & 1) ? hi : lo;
    return (uint16_t)(sign | r);
}

static float rand_float_bits(void)
{
    uint32_t u = (uint32_t)rnd();
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void check_to_half(float x)
{
    uint16_t got = od_float_to_half(x), want = ref_float_to_half(x);
    if (isnan(x))
        CHECK((got & 0x7c00) == 0x7c00 && (got & 0x3ff) && (got >> 15) == (signbit(x) != 0),
              "NaN -> 0x%04x", got);
    else
        CHECK(got == want, "float %.10g (0x%08x): got 0x%04x want 0x%04x", (double)x,
              od_f32_bits(x), got, want);
}

Test(half, float_to_half_rounds_to_nearest_even)
{
    /* Every midpoint between two adjacent halves (exact in float), and one
     * float step either side of it. */
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double lo = ref_half_value((uint16_t)h);
        double hi = h + 1 == 0x7c00 ? 65536.0 : ref_half_value((uint16_t)(h + 1));
        float mid = (float)((lo + hi) / 2);
        CHECK((double)mid == (lo + hi) / 2, "midpoint exact");
        check_to_half(mid);
        check_to_half(-mid);
        check_to_half(nextafterf(mid, 0.0f));
        check_to_half(nextafterf(mid, INFINITY));
        check_to_half((float)lo);
    }
    /* Random bit patterns (all regimes) and random values around the half range. */
    for (int i = 0; i < 200000; i++) {
        check_to_half(rand_float_bits());
        float y = (float)ldexp((double)(rnd() >> 40) / (double)(1 << 24) + 1.0, (int)rint_in(-30, 17));
        check_to_half(rnd() & 1 ? y : -y);
    }
    check_to_half(65504.0f);
    check_to_half(65519.996f);
    check_to_half(65520.0f);
    check_to_half(INFINITY);
    check_to_half(-INFINITY);
    check_to_half(NAN);
    check_to_half(-NAN);
    cr_expect_eq(od_float_to_half(65520.0f), 0x7c00);
    cr_expect_eq(od_float_to_half(5.9604645e-8f), 0x0001); /* 2^-24 */
    cr_expect_eq(od_float_to_half(2.9802322e-8f), 0x0000); /* 2^-25 ties to even 0 */
    cr_expect_eq(od_float_to_half(-0.0f), 0x8000);
}

/* Nearest bfloat16: the truncated code or the next one up, ties to even. */
static uint16_t ref_float_to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t t = (u & 0x7fffffff) >> 16;
    double a = fabs((double)x);
    double vlo = (double)od_f32_from_bits(t << 16);
    double vhi = t + 1 == 0x7f80 ? ldexp(1.0, 128) : (double)od_f32_from_bits((t + 1) << 16);
    uint32_t r;
    if (a - vlo < vhi - a)
        r = t;
    else if (a - vlo > vhi - a)
        r = t + 1;
    else
        r = (t & 1) ? t + 1 : t;
    return (uint16_t)(sign | r);
}

Test(half, bfloat16_round_trip_and_rounding)
{
    for (uint32_t b = 0; b < 65536; b++) {
        float f = od_bf16_to_float((uint16_t)b);
        uint32_t bits = od_f32_bits(f);
        cr_assert_eq(bits, b << 16, "bf16 -> float is the top half of the bits");
        if (!isnan(f))
            cr_assert_eq(od_float_to_bf16(f), b, "exact values survive: 0x%04x", b);
        else
            cr_assert(isnan(od_bf16_to_float(od_float_to_bf16(f))), "NaN stays NaN");
    }
    for (int i = 0; i < 300000; i++) {
        float x = rand_float_bits();
        if (i % 3 == 0) { /* exact midpoints */
            uint32_t u = od_f32_bits(x);
            u = (u & 0xffff0000u) | 0x8000u;
            x = od_f32_from_bits(u);
        }
        uint16_t got = od_float_to_bf16(x);
        if (isnan(x)) {
            CHECK(isnan(od_bf16_to_float(got)), "NaN");
            continue;
        }
        if (isinf(x)) {
            CHECK(got == (uint16_t)(od_f32_bits(x) >> 16), "inf");
            continue;
        }
        uint16_t want = ref_float_to_bf16(x);
        CHECK(got == want, "float 0x%08x: got 0x%04x want 0x%04x", od_f32_bits(x), got, want);
    }
}

Test(tensor, scalar_tensor_of_every_dtype)
{
    for (int it = 0; it < 200; it++) {
        double v = rnd_double();
        double iv = trunc(v);
        od_tensor *t;
        for (int dt = 0; dt < OD_NUM_DTYPES; dt++) {
            OK(od_tensor_scalar(v, (od_dtype)dt, &t, &last_err));
            CHECK(t->ndim == 0 && od_tensor_numel(t) == 1 && od_device_eq(t->device, CPU), "0-dim cpu");
            void *p = od_tensor_data(t);
            switch ((od_dtype)dt) {
            case OD_BOOL: CHECK(*(bool *)p == (v != 0), "bool"); break;
            case OD_UINT8: CHECK(*(uint8_t *)p == (uint8_t)(int64_t)iv, "uint8 %g", v); break;
            case OD_INT8: CHECK(*(int8_t *)p == (int8_t)iv, "int8 %g", v); break;
            case OD_INT16: CHECK(*(int16_t *)p == (int16_t)iv, "int16"); break;
            case OD_INT32: CHECK(*(int32_t *)p == (int32_t)iv, "int32"); break;
            case OD_INT64: CHECK(*(int64_t *)p == (int64_t)iv, "int64"); break;
            case OD_FLOAT16: CHECK(*(uint16_t *)p == ref_float_to_half((float)v), "half %g", v); break;
            case OD_BFLOAT16: CHECK(*(uint16_t *)p == ref_float_to_bf16((float)v), "bf16 %g", v); break;
            case OD_FLOAT32: CHECK(*(float *)p == (float)v, "float"); break;
            case OD_FLOAT64: CHECK(*(double *)p == v, "double"); break;
            default: break;
            }
            od_tensor_release(t);
        }
    }
    /* Out-of-range values: what torch gives on x86 CPUs. */
    static const struct {
        double v;
        od_dtype dt;
        int64_t want;
    } wrap[] = {
        {300.0, OD_UINT8, 44},   {-1.0, OD_UINT8, 255},        {300.0, OD_INT8, 44},
        {128.0, OD_INT8, -128},  {70000.0, OD_INT16, 4464},    {1e10, OD_INT32, INT32_MIN},
        {NAN, OD_INT32, INT32_MIN}, {1e20, OD_INT64, INT64_MIN}, {NAN, OD_INT64, INT64_MIN},
        {-2.9, OD_INT8, -2},
    };
    for (size_t i = 0; i < sizeof wrap / sizeof wrap[0]; i++) {
        od_tensor *t;
        OK(od_tensor_scalar(wrap[i].v, wrap[i].dt, &t, &last_err));
        void *p = od_tensor_data(t);
        int64_t got = wrap[i].dt == OD_UINT8 ? *(uint8_t *)p
                      : wrap[i].dt == OD_INT8 ? *(int8_t *)p
                      : wrap[i].dt == OD_INT16 ? *(int16_t *)p
                      : wrap[i].dt == OD_INT32 ? *(int32_t *)p
                                               : *(int64_t *)p;
        cr_expect_eq(got, wrap[i].want, "%g -> %s: got %lld", wrap[i].v, od_dtype_name(wrap[i].dt),
                     (long long)got);
        od_tensor_release(t);
    }
    od_tensor *t;
    OK(od_tensor_scalar(NAN, OD_BOOL, &t, &last_err));
    cr_expect(*(bool *)od_tensor_data(t), "NaN is true");
    od_tensor_release(t);
    OK(od_tensor_scalar(NAN, OD_FLOAT16, &t, &last_err));
    cr_expect(isnan(od_half_to_float(*(uint16_t *)od_tensor_data(t))));
    od_tensor_release(t);
    OK(od_tensor_scalar(1e6, OD_FLOAT16, &t, &last_err));
    cr_expect_eq(*(uint16_t *)od_tensor_data(t), 0x7c00, "overflow to inf");
    od_tensor_release(t);
}

/* ======================================================================== */
/* storage, allocators, limits                                               */

Test(alloc, meta_storage_has_no_data)
{
    od_storage *s = NULL;
    OK(od_storage_new(META, 1 << 20, &s, &last_err));
    cr_expect(s->data == NULL && s->nbytes == (1 << 20) && s->device.type == OD_DEV_META);
    od_storage_release(s);
    int64_t sizes[] = {1000, 1000, 1000};
    od_tensor *t = NULL, *v = NULL;
    OK(od_tensor_empty(sizes, 3, OD_FLOAT32, META, &t, &last_err));
    cr_expect(od_tensor_data(t) == NULL);
    cr_expect_eq(od_tensor_nbytes(t), (size_t)4e9);
    OK(od_tensor_transpose(t, 0, 2, &v, &last_err));
    cr_expect(od_tensor_data(v) == NULL && od_device_eq(v->device, META));
    od_tensor_release(v);
    od_tensor_release(t);
}

static int mock_allocs, mock_frees;
static size_t mock_last_bytes;
static int mock_last_index;
static void *mock_alloc(void *ctx, int index, size_t n, od_error *err)
{
    (void)err;
    mock_allocs++;
    mock_last_bytes = n;
    mock_last_index = index;
    *(int *)ctx += 1;
    return malloc(n);
}
static void mock_free(void *ctx, int index, void *p, size_t n)
{
    (void)ctx;
    mock_frees++;
    cr_expect_eq(n, mock_last_bytes, "free gets the allocation size");
    cr_expect_eq(index, mock_last_index, "free gets the device index");
    free(p);
}
static void *failing_alloc(void *ctx, int index, size_t n, od_error *err)
{
    (void)ctx, (void)index, (void)n, (void)err;
    return NULL; /* and forgets to fill err */
}

Test(alloc, device_allocators_are_pluggable)
{
    const od_allocator *prev = od_get_allocator(OD_DEV_CUDA);
    od_device cuda1 = {OD_DEV_CUDA, 1};
    od_storage *s = NULL;
    od_register_allocator(OD_DEV_CUDA, NULL);
    EXPECT_ERR(od_storage_new(cuda1, 64, &s, &last_err), OD_EUNAVAIL,
               "no allocator for device cuda: the CUDA backend is not available");
    int64_t sz[] = {4};
    od_tensor *t = NULL;
    EXPECT_ERR(od_tensor_empty(sz, 1, OD_FLOAT32, cuda1, &t, &last_err), OD_EUNAVAIL, NULL);

    int ctx = 0;
    od_allocator mock = {mock_alloc, mock_free, &ctx};
    od_register_allocator(OD_DEV_CUDA, &mock);
    size_t n = (size_t)rint_in(1, 100000);
    OK(od_storage_new(cuda1, n, &s, &last_err));
    cr_expect(mock_allocs == 1 && ctx == 1 && mock_last_bytes == n && mock_last_index == 1);
    cr_expect(s->allocator == &mock && od_device_eq(s->device, cuda1));
    od_storage_release(s);
    cr_expect_eq(mock_frees, 1);
    OK(od_tensor_empty(sz, 1, OD_FLOAT32, cuda1, &t, &last_err));
    cr_expect(t->keys == OD_KS(OD_KEY_CUDA));
    od_tensor_release(t);
    cr_expect_eq(mock_frees, 2);

    od_allocator bad = {failing_alloc, mock_free, NULL};
    od_register_allocator(OD_DEV_CUDA, &bad);
    s = NULL;
    EXPECT_ERR(od_storage_new(cuda1, 16, &s, &last_err), OD_EDEVMEM, NULL);
    cr_expect(s == NULL && strstr(last_err.message, "16 bytes on cuda:1"), "%s", last_err.message);
    od_register_allocator(OD_DEV_CUDA, prev);
    cr_expect(od_get_allocator(OD_DEV_CPU) == od_cpu_allocator());
}

Test(alloc, zero_bytes_and_alignment)
{
    od_storage *s = NULL;
    OK(od_storage_new(CPU, 0, &s, &last_err));
    cr_expect(s->data == NULL && s->nbytes == 0);
    od_storage_release(s);
    for (int i = 0; i < 300; i++) {
        size_t n = (size_t)(i % 3 == 0 ? rint_in(1, 64) : i % 3 == 1 ? rint_in(65, 300000) : rint_in(1, 5 << 20));
        OK(od_storage_new(CPU, n, &s, &last_err));
        CHECK(((uintptr_t)s->data & 63) == 0, "%zu bytes: 64-byte aligned", n);
        memset(s->data, 0xab, n); /* ASan: the whole size is ours */
        od_storage_release(s);
    }
}

Test(alloc, large_blocks_are_cached_and_reused)
{
    od_cpu_cache_set_limit(OD_CPU_CACHE_DEFAULT_LIMIT);
    od_cpu_cache_empty();
    od_cpu_alloc_info a, b, c;
    od_cpu_alloc_stats(&a);
    cr_expect_eq(a.cached_bytes, 0);
    cr_expect_eq(a.cache_limit, OD_CPU_CACHE_DEFAULT_LIMIT);
    size_t n = (size_t)rint_in((int64_t)OD_CPU_CACHE_MIN_BLOCK, 24 << 20);
    od_storage *s = NULL;
    OK(od_storage_new(CPU, n, &s, &last_err));
    void *first = s->data;
    memset(s->data, 1, n);
    od_cpu_alloc_stats(&b);
    CHECK(b.in_use_bytes == a.in_use_bytes + n, "in use grows by the request");
    CHECK(b.misses == a.misses + 1 && b.hits == a.hits, "first allocation misses");
    od_storage_release(s);
    od_cpu_alloc_stats(&b);
    CHECK(b.in_use_bytes == a.in_use_bytes, "in use back");
    CHECK(b.cached_bytes >= n && b.cached_bytes <= n + n / 4 + 4096, "cached %zu for %zu",
          b.cached_bytes, n);
    /* same size again: the same block, from the cache */
    OK(od_storage_new(CPU, n, &s, &last_err));
    od_cpu_alloc_stats(&c);
    CHECK(s->data == first, "same block reused");
    CHECK(c.hits == b.hits + 1 && c.misses == b.misses, "a hit");
    CHECK(c.cached_bytes == 0, "taken out of the cache");
    od_storage_release(s);
    /* a tensor of the same byte size hits too */
    int64_t sizes[] = {(int64_t)n};
    od_tensor *t = NULL;
    OK(od_tensor_empty(sizes, 1, OD_UINT8, CPU, &t, &last_err));
    od_cpu_alloc_stats(&c);
    CHECK(c.hits == b.hits + 2 && od_tensor_data(t) == first, "tensor hit");
    od_tensor_release(t);
    /* small blocks bypass the cache entirely */
    od_cpu_alloc_stats(&b);
    OK(od_storage_new(CPU, (size_t)rint_in(1, (int64_t)OD_CPU_CACHE_MIN_BLOCK - 1), &s, &last_err));
    od_storage_release(s);
    od_cpu_alloc_stats(&c);
    CHECK(c.hits == b.hits && c.misses == b.misses && c.cached_bytes == b.cached_bytes, "small");
    od_cpu_cache_empty();
    od_cpu_alloc_stats(&c);
    cr_expect_eq(c.cached_bytes, 0);
}

Test(alloc, cache_limit_evicts_oldest_first)
{
    od_cpu_cache_empty();
    size_t mib = (size_t)1 << 20;
    od_cpu_cache_set_limit(5 * mib);
    od_storage *x = NULL, *y = NULL, *z = NULL;
    OK(od_storage_new(CPU, 3 * mib, &x, &last_err));
    OK(od_storage_new(CPU, 3 * mib, &y, &last_err));
    void *xp = x->data, *yp = y->data;
    od_cpu_alloc_info a, b;
    od_cpu_alloc_stats(&a);
    od_storage_release(x); /* cached: 3 MiB */
    od_storage_release(y); /* 6 MiB > 5 MiB: the older block (x) goes */
    od_cpu_alloc_stats(&b);
    cr_expect_eq(b.cached_bytes, 3 * mib);
    cr_expect_eq(b.evictions, a.evictions + 1);
    OK(od_storage_new(CPU, 3 * mib, &z, &last_err));
    cr_expect(z->data == yp && z->data != xp, "the newer block was kept");
    od_storage_release(z);
    /* a block bigger than the cap is never cached */
    od_cpu_cache_set_limit(2 * mib);
    od_cpu_alloc_stats(&b);
    cr_expect_eq(b.cached_bytes, 0, "lowering the cap evicts at once");
    cr_expect_eq(b.cache_limit, 2 * mib);
    OK(od_storage_new(CPU, 3 * mib, &x, &last_err));
    od_storage_release(x);
    od_cpu_alloc_stats(&b);
    cr_expect_eq(b.cached_bytes, 0);
    od_cpu_cache_set_limit(0);
    OK(od_storage_new(CPU, mib, &x, &last_err));
    od_storage_release(x);
    od_cpu_alloc_stats(&b);
    cr_expect_eq(b.cached_bytes, 0, "limit 0 disables caching");
    od_cpu_cache_set_limit(OD_CPU_CACHE_DEFAULT_LIMIT);
}

static void *alloc_hammer(void *arg)
{
    uint64_t state = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull + g_seed;
    for (int i = 0; i < 150; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        size_t sizes[] = {1000, 300 << 10, 1 << 20, (3 << 20) + 17};
        size_t n = sizes[(state >> 33) % 4];
        od_storage *s = NULL;
        od_error err;
        if (od_storage_new(CPU, n, &s, &err) != OD_OK)
            return (void *)1;
        unsigned char tag = (unsigned char)(state >> 40);
        memset(s->data, tag, n);
        sched_yield();
        for (size_t k = 0; k < n; k += 4093)
            if (((unsigned char *)s->data)[k] != tag)
                return (void *)2; /* another thread got the same block */
        od_storage_release(s);
    }
    return NULL;
}

Test(alloc, cache_is_thread_safe)
{
    od_cpu_cache_set_limit(8 << 20); /* small cap: evictions race with hits */
    od_cpu_alloc_info a, b;
    od_cpu_alloc_stats(&a);
    pthread_t th[4];
    for (intptr_t i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, alloc_hammer, (void *)i), 0);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        CHECK(r == NULL, "thread %d: %s", i, r == (void *)1 ? "allocation failed" : "block shared");
    }
    od_cpu_alloc_stats(&b);
    CHECK(b.in_use_bytes == a.in_use_bytes, "in use back to %zu (is %zu)", a.in_use_bytes, b.in_use_bytes);
    CHECK(b.cached_bytes <= (8 << 20), "cap respected");
    CHECK(b.hits > a.hits, "the cache served some");
    od_cpu_cache_set_limit(OD_CPU_CACHE_DEFAULT_LIMIT);
}

static void *read_limit(void *arg)
{
    *(size_t *)arg = od_get_alloc_limit();
    return NULL;
}

Test(alloc, per_thread_allocation_limit)
{
    cr_expect_eq(od_get_alloc_limit(), 0, "unlimited by default");
    size_t lim = (size_t)rint_in(100, 1 << 20);
    od_set_alloc_limit(lim);
    cr_expect_eq(od_get_alloc_limit(), lim);
    size_t other = 12345;
    pthread_t th;
    pthread_create(&th, NULL, read_limit, &other);
    pthread_join(th, NULL);
    cr_expect_eq(other, 0, "the limit is per thread");

    od_storage *s = NULL;
    char want[128];
    snprintf(want, sizeof want, "output of %zu bytes exceeds the limit of %zu bytes", lim + 1, lim);
    EXPECT_ERR(od_storage_new(CPU, lim + 1, &s, &last_err), OD_ETOOLARGE, want);
    OK(od_storage_new(CPU, lim, &s, &last_err));
    od_storage_release(s);
    /* through od_tensor_empty, before any allocation, meta included */
    int64_t n = (int64_t)(lim / 4) + 1;
    od_tensor *t = NULL;
    snprintf(want, sizeof want, "output of %zu bytes exceeds the limit of %zu bytes", (size_t)n * 4, lim);
    od_cpu_alloc_info a, b;
    od_cpu_alloc_stats(&a);
    EXPECT_ERR(od_tensor_empty(&n, 1, OD_FLOAT32, CPU, &t, &last_err), OD_ETOOLARGE, want);
    EXPECT_ERR(od_tensor_empty(&n, 1, OD_FLOAT32, META, &t, &last_err), OD_ETOOLARGE, want);
    od_cpu_alloc_stats(&b);
    cr_expect(a.misses == b.misses && a.in_use_bytes == b.in_use_bytes, "nothing allocated");
    /* wrapping existing memory is not an allocation */
    static char mem[4096];
    OK(od_storage_wrap(CPU, mem, sizeof mem, NULL, NULL, &s, &last_err));
    od_storage_release(s);
    od_set_alloc_limit(0);
    OK(od_tensor_empty(&n, 1, OD_FLOAT32, CPU, &t, &last_err));
    od_tensor_release(t);
}

Test(alloc, from_storage_checks_size)
{
    od_storage *s = NULL;
    OK(od_storage_new(CPU, 32, &s, &last_err));
    int64_t ok[] = {2, 4}, bad[] = {3, 3};
    od_tensor *t = NULL;
    OK(od_tensor_from_storage(s, ok, 2, OD_FLOAT32, &t, &last_err));
    cr_expect(od_tensor_data(t) == s->data && atomic_load(&s->refcount) == 2);
    od_tensor_release(t);
    t = NULL;
    EXPECT_ERR(od_tensor_from_storage(s, bad, 2, OD_FLOAT32, &t, &last_err), OD_EMISMATCH,
               "setStorage: sizes [3, 3], strides [3, 1], storage offset 0, and itemsize 4 requiring a "
               "storage size of 36 are out of bounds for storage of size 32");
    cr_expect(t == NULL && atomic_load(&s->refcount) == 1);
    od_storage_release(s);
}

/* ======================================================================== */
/* views                                                                     */

/* Reference of a tensor derived from a contiguous base: its shape and, for
 * each logical element in row-major order, the base's flat index (which is
 * also the storage index, the base being contiguous at offset 0). Each op
 * below transforms a reference by the op's definition alone. */
typedef struct {
    int ndim;
    int64_t sizes[OD_MAX_DIMS];
    int64_t n;
    int64_t *map;
} ref_t;

static ref_t ref_new(const int64_t *sizes, int ndim)
{
    ref_t r;
    r.ndim = ndim;
    if (ndim)
        memcpy(r.sizes, sizes, (size_t)ndim * sizeof *sizes);
    r.n = numel_of(sizes, ndim);
    r.map = malloc((size_t)(r.n ? r.n : 1) * sizeof *r.map);
    return r;
}

static ref_t ref_base(const int64_t *sizes, int ndim)
{
    ref_t r = ref_new(sizes, ndim);
    for (int64_t i = 0; i < r.n; i++)
        r.map[i] = i;
    return r;
}

static void ref_free(ref_t *r) { free(r->map); }

/* Value of input element at logical in_idx. */
static int64_t ref_at(const ref_t *r, const int64_t *in_idx)
{
    return r->map[flat_index(in_idx, r->sizes, r->ndim)];
}

typedef void (*idx_map_fn)(const int64_t *out_idx, int64_t *in_idx, const void *arg);

/* Builds the output reference by asking, for each output index, which input
 * index the op's definition names. */
static ref_t ref_apply(const ref_t *in, const int64_t *out_sizes, int out_nd, idx_map_fn f, const void *arg)
{
    ref_t r = ref_new(out_sizes, out_nd);
    int64_t oi[OD_MAX_DIMS], ii[OD_MAX_DIMS];
    for (int64_t k = 0; k < r.n; k++) {
        unflatten(k, out_sizes, out_nd, oi);
        f(oi, ii, arg);
        r.map[k] = ref_at(in, ii);
    }
    return r;
}

/* The view's element at each logical index must be the base element the
 * reference names: same value and same storage address. */
static void check_view(const od_tensor *v, const ref_t *r, const od_tensor *base, const char *what)
{
    CHECK(shape_eq(v, r->sizes, r->ndim), "%s: shape %s, want %s", what, shp(v->sizes, v->ndim),
          shp(r->sizes, r->ndim));
    CHECK(v->storage == base->storage, "%s shares the storage", what);
    CHECK(v->dtype == base->dtype && od_device_eq(v->device, base->device), "%s: dtype/device", what);
    int64_t idx[OD_MAX_DIMS] = {0};
    const double *bd = base_data(base);
    for (int64_t k = 0; k < r->n; k++) {
        unflatten(k, r->sizes, r->ndim, idx);
        int64_t si = storage_index(v, idx);
        CHECK(si == r->map[k], "%s: element %s at storage %ld, want %ld", what, shp(idx, r->ndim),
              (long)si, (long)r->map[k]);
        CHECK(elem(v, idx) == bd[r->map[k]], "%s: value", what);
    }
}

/* -- the index maps of each op -- */
struct generic_arg {
    int in_nd, out_nd;
    int kind; /* see below */
    int a, b;
    int64_t perm[OD_MAX_DIMS];
    int64_t sel[4096];
    int64_t in_sizes[OD_MAX_DIMS];
    int64_t index;
};

enum { K_TRANSPOSE, K_PERMUTE, K_SLICE, K_SELECT, K_EXPAND, K_SQUEEZE_ALL, K_SQUEEZE_DIM, K_UNSQUEEZE };

static void map_generic(const int64_t *o, int64_t *in, const void *arg_)
{
    const struct generic_arg *g = arg_;
    switch (g->kind) {
    case K_TRANSPOSE:
        for (int d = 0; d < g->in_nd; d++)
            in[d] = o[d];
        if (g->in_nd) {
            in[g->a] = o[g->b];
            in[g->b] = o[g->a];
        }
        break;
    case K_PERMUTE: /* out dim d is input dim perm[d] */
        for (int d = 0; d < g->out_nd; d++)
            in[g->perm[d]] = o[d];
        break;
    case K_SLICE:
        for (int d = 0; d < g->in_nd; d++)
            in[d] = o[d];
        in[g->a] = g->sel[o[g->a]];
        break;
    case K_SELECT:
        for (int d = 0, j = 0; d < g->in_nd; d++)
            in[d] = d == g->a ? g->index : o[j++];
        break;
    case K_EXPAND: { /* aligned from the right; broadcast dims read index 0 */
        int lead = g->out_nd - g->in_nd;
        for (int d = 0; d < g->in_nd; d++)
            in[d] = g->in_sizes[d] == 1 ? 0 : o[d + lead];
        break;
    }
    case K_SQUEEZE_ALL:
        for (int d = 0, j = 0; d < g->in_nd; d++)
            in[d] = g->in_sizes[d] == 1 ? 0 : o[j++];
        break;
    case K_SQUEEZE_DIM:
        for (int d = 0, j = 0; d < g->in_nd; d++)
            in[d] = (d == g->a && g->in_sizes[d] == 1) ? 0 : o[j++];
        break;
    case K_UNSQUEEZE:
        for (int d = 0, j = 0; d <= g->in_nd; d++)
            if (d != g->a)
                in[j++] = o[d];
        break;
    }
}

/* Python's range(*slice(start, end, step).indices(size)) for step > 0. */
static int64_t py_slice(int64_t size, int64_t start, int64_t end, int64_t step, int64_t *sel)
{
    if (start < 0) {
        start += size;
        if (start < 0)
            start = 0;
    } else if (start > size) {
        start = size;
    }
    if (end < 0) {
        end += size;
        if (end < 0)
            end = 0;
    } else if (end > size) {
        end = size;
    }
    int64_t n = 0;
    if (step == INT64_MAX && end - start >= 2) /* torch 1.13's wrapping (len + step - 1) / step */
        return end - start <= 3 ? -1 : 0;  /* -1 (len 2, 3): its storage-size error */
    for (int64_t i = start; i < end; i += step) {
        sel[n++] = i;
        if (step > end)
            break;
    }
    return n;
}

/* A dim argument as a caller may pass it: sometimes negative. */
static int64_t maybe_negative(int d, int nd)
{
    return rnd() & 1 ? d : d - (nd > 0 ? nd : 1);
}

/* Independent oracle for view(): the target shape is viewable iff one
 * stride per dim (read off the unit steps) reproduces the input's elements
 * in row-major order. */
static bool ref_viewable(const ref_t *r, const int64_t *sizes, int nd, int64_t *strides)
{
    if (r->n == 0)
        return true; /* torch allows any view of an empty tensor */
    int64_t idx[OD_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        int64_t step = 1;
        for (int k = d + 1; k < nd; k++)
            step *= sizes[k];
        strides[d] = sizes[d] > 1 ? r->map[step] - r->map[0] : 0;
    }
    for (int64_t k = 0; k < r->n; k++) {
        unflatten(k, sizes, nd, idx);
        int64_t off = r->map[0];
        for (int d = 0; d < nd; d++)
            off += idx[d] * strides[d];
        if (off != r->map[k])
            return false;
    }
    return true;
}

/* Random shape with the same number of elements (and sometimes one -1). */
static int rand_reshape(int64_t n, int64_t *sizes, int *infer_at)
{
    int nd = 0;
    *infer_at = -1;
    if (n == 0) {
        nd = (int)rint_in(1, 4);
        for (int i = 0; i < nd; i++)
            sizes[i] = rint_in(0, 3);
        sizes[rint_in(0, nd - 1)] = 0;
        return nd;
    }
    int64_t f[64];
    int nf = 0;
    for (int64_t p = 2, m = n; m > 1; p++)
        while (m % p == 0)
            f[nf++] = p, m /= p;
    nd = (int)rint_in(1, 5);
    for (int i = 0; i < nd; i++)
        sizes[i] = 1;
    for (int i = 0; i < nf; i++)
        sizes[rint_in(0, nd - 1)] *= f[i];
    if (rint_in(0, 2) == 0) {
        *infer_at = (int)rint_in(0, nd - 1);
        sizes[*infer_at] = -1;
    }
    return nd;
}

/* One random view op on (t, r): returns the new tensor and reference, or
 * NULL when the op could not apply (then t/r are unchanged). */
static od_tensor *random_view_step(od_tensor *t, ref_t *r, od_tensor *base, char *what, size_t wcap)
{
    struct generic_arg *g = calloc(1, sizeof *g);
    g->in_nd = t->ndim;
    memcpy(g->in_sizes, t->sizes, sizeof g->in_sizes);
    int nd = t->ndim;
    od_tensor *v = NULL;
    ref_t out = {0};
    int64_t sizes[OD_MAX_DIMS];
    int op = (int)rint_in(0, 10);
    switch (op) {
    case 0: { /* transpose */
        g->kind = K_TRANSPOSE;
        g->a = nd ? (int)rint_in(0, nd - 1) : 0;
        g->b = nd ? (int)rint_in(0, nd - 1) : 0;
        int64_t a = maybe_negative(g->a, nd), b = maybe_negative(g->b, nd);
        snprintf(what, wcap, "transpose(%ld, %ld) of %s", (long)a, (long)b, shp(t->sizes, nd));
        OK(od_tensor_transpose(t, a, b, &v, &last_err));
        memcpy(sizes, t->sizes, sizeof sizes);
        if (nd) {
            sizes[g->a] = t->sizes[g->b];
            sizes[g->b] = t->sizes[g->a];
        }
        g->out_nd = nd;
        out = ref_apply(r, sizes, nd, map_generic, g);
        break;
    }
    case 1: { /* permute */
        g->kind = K_PERMUTE;
        g->out_nd = nd;
        int64_t dims[OD_MAX_DIMS];
        for (int i = 0; i < nd; i++)
            g->perm[i] = i;
        for (int i = nd - 1; i > 0; i--) {
            int j = (int)rint_in(0, i);
            int64_t tmp = g->perm[i];
            g->perm[i] = g->perm[j];
            g->perm[j] = tmp;
        }
        for (int i = 0; i < nd; i++) {
            dims[i] = maybe_negative((int)g->perm[i], nd);
            sizes[i] = t->sizes[g->perm[i]];
        }
        snprintf(what, wcap, "permute%s of %s", shp(dims, nd), shp(t->sizes, nd));
        OK(od_tensor_permute(t, dims, nd, &v, &last_err));
        out = ref_apply(r, sizes, nd, map_generic, g);
        break;
    }
    case 2:
    case 3: { /* slice */
        if (nd == 0)
            break;
        g->kind = K_SLICE;
        g->out_nd = nd;
        g->a = (int)rint_in(0, nd - 1);
        int64_t size = t->sizes[g->a];
        int64_t start = rint_in(-size - 3, size + 3), end = rint_in(-size - 3, size + 3);
        int64_t step = rint_in(1, 3);
        if (rint_in(0, 9) == 0)
            start = INT64_MIN;
        if (rint_in(0, 9) == 0)
            end = INT64_MAX;
        if (rint_in(0, 19) == 0)
            step = INT64_MAX;
        int64_t dim = maybe_negative(g->a, nd);
        snprintf(what, wcap, "slice(dim=%ld, %ld, %ld, %ld) of %s", (long)dim, (long)start, (long)end,
                 (long)step, shp(t->sizes, nd));
        /* torch 1.13 wraps stride * step (negative: as_strided's error; a
         * one-element dim keeps the product, so an earlier huge step can make
         * a later small one wrap) and (len + step - 1) / step (negative: a
         * storage-size error) */
        int64_t wst = (int64_t)((uint64_t)t->strides[g->a] * (uint64_t)step);
        if (wst < 0 || (step == INT64_MAX && py_slice(size, start, end, step, g->sel) < 0)) {
            CHECK(od_tensor_slice(t, dim, start, end, step, &v, &last_err) == OD_EINVAL &&
                      (strstr(last_err.message, "Storage size calculation overflowed") ||
                       strstr(last_err.message, "Negative strides")),
                  "%s: torch's overflow error", what);
            step = 1;
        }
        OK(od_tensor_slice(t, dim, start, end, step, &v, &last_err));
        memcpy(sizes, t->sizes, sizeof sizes);
        sizes[g->a] = py_slice(size, start, end, step, g->sel);
        out = ref_apply(r, sizes, nd, map_generic, g);
        break;
    }
    case 4: { /* select */
        if (nd == 0)
            break;
        g->kind = K_SELECT;
        g->a = (int)rint_in(0, nd - 1);
        int64_t size = t->sizes[g->a];
        if (size == 0)
            break;
        int64_t index = rint_in(-size, size - 1);
        g->index = index < 0 ? index + size : index;
        g->out_nd = nd - 1;
        int64_t dim = maybe_negative(g->a, nd);
        snprintf(what, wcap, "select(%ld, %ld) of %s", (long)dim, (long)index, shp(t->sizes, nd));
        OK(od_tensor_select(t, dim, index, &v, &last_err));
        for (int i = 0, j = 0; i < nd; i++)
            if (i != g->a)
                sizes[j++] = t->sizes[i];
        out = ref_apply(r, sizes, nd - 1, map_generic, g);
        break;
    }
    case 5: { /* expand */
        int lead = (int)rint_in(0, 2);
        if (nd + lead > 6 || r->n > 2000)
            break;
        g->kind = K_EXPAND;
        g->out_nd = nd + lead;
        int64_t target[OD_MAX_DIMS];
        for (int i = 0; i < lead; i++)
            sizes[i] = target[i] = rint_in(0, 3);
        for (int i = 0; i < nd; i++) {
            int64_t s = t->sizes[i];
            int64_t want = s == 1 ? rint_in(0, 3) : s;
            sizes[lead + i] = want;
            target[lead + i] = (rnd() & 3) == 0 && want == s ? -1 : want;
        }
        snprintf(what, wcap, "expand%s of %s", shp(target, nd + lead), shp(t->sizes, nd));
        OK(od_tensor_expand(t, target, nd + lead, &v, &last_err));
        out = ref_apply(r, sizes, nd + lead, map_generic, g);
        break;
    }
    case 6: { /* squeeze() */
        g->kind = K_SQUEEZE_ALL;
        int n = 0;
        for (int i = 0; i < nd; i++)
            if (t->sizes[i] != 1)
                sizes[n++] = t->sizes[i];
        g->out_nd = n;
        snprintf(what, wcap, "squeeze() of %s", shp(t->sizes, nd));
        OK(od_tensor_squeeze(t, &v, &last_err));
        out = ref_apply(r, sizes, n, map_generic, g);
        break;
    }
    case 7: { /* squeeze(dim) */
        g->kind = K_SQUEEZE_DIM;
        g->a = nd ? (int)rint_in(0, nd - 1) : 0;
        int n = 0;
        for (int i = 0; i < nd; i++)
            if (!(i == g->a && t->sizes[i] == 1))
                sizes[n++] = t->sizes[i];
        g->out_nd = n;
        int64_t dim = maybe_negative(g->a, nd);
        snprintf(what, wcap, "squeeze(%ld) of %s", (long)dim, shp(t->sizes, nd));
        OK(od_tensor_squeeze_dim(t, dim, &v, &last_err));
        out = ref_apply(r, sizes, n, map_generic, g);
        break;
    }
    case 8: { /* unsqueeze */
        if (nd >= 8)
            break;
        g->kind = K_UNSQUEEZE;
        g->a = (int)rint_in(0, nd);
        g->out_nd = nd + 1;
        for (int i = 0, j = 0; i <= nd; i++)
            sizes[i] = i == g->a ? 1 : t->sizes[j++];
        int64_t dim = rnd() & 1 ? g->a : g->a - (nd + 1);
        snprintf(what, wcap, "unsqueeze(%ld) of %s", (long)dim, shp(t->sizes, nd));
        OK(od_tensor_unsqueeze(t, dim, &v, &last_err));
        out = ref_apply(r, sizes, nd + 1, map_generic, g);
        break;
    }
    case 9: { /* view */
        int infer_at;
        int n = rand_reshape(r->n, sizes, &infer_at);
        int64_t concrete[OD_MAX_DIMS], want_strides[OD_MAX_DIMS], got_strides[OD_MAX_DIMS];
        memcpy(concrete, sizes, sizeof concrete);
        if (infer_at >= 0) {
            int64_t rest = 1;
            for (int i = 0; i < n; i++)
                if (i != infer_at)
                    rest *= sizes[i];
            concrete[infer_at] = r->n / rest;
        }
        snprintf(what, wcap, "view%s of %s strides %s", shp(sizes, n), shp(t->sizes, nd),
                 shp(t->strides, nd));
        bool possible = ref_viewable(r, concrete, n, want_strides);
        bool pred = od_compute_view_strides(t, concrete, n, got_strides);
        CHECK(pred == possible, "%s: compute_view_strides says %d, oracle %d", what, pred, possible);
        if (r->n == 0 && infer_at >= 0) {
            EXPECT_ERR(od_tensor_view(t, sizes, n, &v, &last_err), OD_EMISMATCH, NULL);
            break;
        }
        od_error_clear(&last_err);
        od_status st = od_tensor_view(t, sizes, n, &v, &last_err);
        CHECK((st == OD_OK) == possible, "%s: view %s, oracle says %s", what,
              st == OD_OK ? "succeeded" : last_err.message, possible ? "possible" : "impossible");
        if (st != OD_OK) {
            CHECK(st == OD_EMISMATCH, "status");
            break;
        }
        out = ref_new(concrete, n); /* a view keeps the row-major order */
        memcpy(out.map, r->map, (size_t)(r->n ? r->n : 1) * sizeof *r->map);
        break;
    }
    case 10: { /* as_strided over the base storage, any in-bounds geometry */
        int n = (int)rint_in(0, 3);
        int64_t strides[OD_MAX_DIMS], span = 0;
        for (int i = 0; i < n; i++) {
            sizes[i] = rint_in(0, 4);
            strides[i] = rint_in(0, 5);
            span += (sizes[i] ? sizes[i] - 1 : 0) * strides[i];
        }
        int64_t total = (int64_t)(base->storage->nbytes / sizeof(double));
        if (span >= total)
            break;
        int64_t offset = rint_in(0, total - 1 - span);
        snprintf(what, wcap, "as_strided(%s, %s, %ld)", shp(sizes, n), shp(strides, n), (long)offset);
        OK(od_tensor_as_strided(t, sizes, strides, n, offset, &v, &last_err));
        out = ref_new(sizes, n);
        int64_t idx[OD_MAX_DIMS];
        for (int64_t k = 0; k < out.n; k++) {
            unflatten(k, sizes, n, idx);
            out.map[k] = offset;
            for (int d = 0; d < n; d++)
                out.map[k] += idx[d] * strides[d];
        }
        break;
    }
    }
    free(g);
    if (!v)
        return NULL;
    ref_free(r);
    *r = out;
    return v;
}

Test(views, random_chains_match_index_arithmetic)
{
    int steps = 0;
    for (int it = 0; it < 300; it++) {
        int64_t sizes[OD_MAX_DIMS];
        int nd = rand_shape(sizes, 0, 4, 4, true);
        od_tensor *base = rand_base(sizes, nd);
        ref_t r = ref_base(sizes, nd);
        od_tensor *t = base;
        od_tensor_retain(t);
        char what[512];
        for (int k = 0; k < 8; k++) {
            od_tensor *v = random_view_step(t, &r, base, what, sizeof what);
            if (!v)
                continue;
            check_view(v, &r, base, what);
            CHECK(od_tensor_is_contiguous(v) == ref_contiguous(v), "%s: is_contiguous", what);
            od_tensor_release(t); /* the view keeps the storage alive */
            t = v;
            steps++;
        }
        od_tensor_release(t);
        od_tensor_release(base);
        ref_free(&r);
    }
    CHECK(steps > 1500, "enough steps ran (%d)", steps);
}

/* Cases from PyTorch's behaviour, by hand: which views torch allows. */
Test(views, view_compatibility_cases)
{
    int64_t s23[] = {2, 3};
    od_tensor *b = rand_base(s23, 2), *tt = NULL, *v = NULL;
    OK(od_tensor_t(b, &tt, &last_err)); /* [3, 2] strides [1, 3] */
    int64_t flat[] = {6};
    EXPECT_ERR(od_tensor_view(tt, flat, 1, &v, &last_err), OD_EMISMATCH,
               "view size is not compatible with input tensor's size and stride (at least one "
               "dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
    int64_t ok1[] = {3, 1, 2}, ok2[] = {1, 3, 2, 1};
    OK(od_tensor_view(tt, ok1, 3, &v, &last_err));
    od_tensor_release(v);
    OK(od_tensor_view(tt, ok2, 4, &v, &last_err));
    od_tensor_release(v);
    int64_t s32b[] = {2, 3};
    EXPECT_ERR(od_tensor_view(tt, s32b, 2, &v, &last_err), OD_EMISMATCH, NULL);
    od_tensor_release(tt);

    /* a column slice: [4, 6][:, :3] -> [4, 3] strides [6, 1] */
    int64_t s46[] = {4, 6};
    od_tensor *b2 = rand_base(s46, 2), *sl = NULL;
    OK(od_tensor_slice(b2, 1, 0, 3, 1, &sl, &last_err));
    int64_t split0[] = {2, 2, 3}, merge[] = {12}, merge2[] = {2, 6};
    OK(od_tensor_view(sl, split0, 3, &v, &last_err)); /* splitting dim 0 is fine */
    cr_expect(v->strides[0] == 12 && v->strides[1] == 6 && v->strides[2] == 1);
    od_tensor_release(v);
    EXPECT_ERR(od_tensor_view(sl, merge, 1, &v, &last_err), OD_EMISMATCH, NULL);
    EXPECT_ERR(od_tensor_view(sl, merge2, 2, &v, &last_err), OD_EMISMATCH, NULL);
    od_tensor_release(sl);

    /* expanded: [3] -> [2, 3] strides [0, 1] */
    int64_t s3[] = {3}, s23e[] = {2, 3};
    od_tensor *b3 = rand_base(s3, 1), *ex = NULL;
    OK(od_tensor_expand(b3, s23e, 2, &ex, &last_err));
    cr_expect(ex->strides[0] == 0 && ex->strides[1] == 1);
    EXPECT_ERR(od_tensor_view(ex, flat, 1, &v, &last_err), OD_EMISMATCH, NULL);
    int64_t e1[] = {2, 1, 3};
    OK(od_tensor_view(ex, e1, 3, &v, &last_err));
    od_tensor_release(v);
    od_tensor_release(ex);
    /* a 0-dim tensor expands with every stride 0, size 1 or not (ATen's inferExpandGeometry): torch
     * 1.13's contiguity and in-place overlap checks read these */
    od_tensor *z0 = NULL;
    int64_t e5111[] = {5, 1, 1, 1};
    OK(od_tensor_scalar(1.0, OD_FLOAT32, &z0, &last_err));
    OK(od_tensor_expand(z0, e5111, 4, &ex, &last_err));
    for (int i = 0; i < 4; i++)
        cr_expect(ex->strides[i] == 0, "stride %d is %ld", i, (long)ex->strides[i]);
    od_tensor_release(ex);
    od_tensor_release(z0);

    /* 0-dim <-> one element */
    od_tensor *sc = NULL;
    OK(od_tensor_scalar(3.5, OD_FLOAT64, &sc, &last_err));
    int64_t one[] = {1, 1}, minus1[] = {-1};
    OK(od_tensor_view(sc, one, 2, &v, &last_err));
    cr_expect(v->strides[0] == 1 && v->strides[1] == 1);
    od_tensor *back = NULL;
    OK(od_tensor_view(v, NULL, 0, &back, &last_err));
    cr_expect(back->ndim == 0 && *(double *)od_tensor_data(back) == 3.5);
    od_tensor_release(back);
    od_tensor_release(v);
    OK(od_tensor_view(sc, minus1, 1, &v, &last_err));
    cr_expect(v->ndim == 1 && v->sizes[0] == 1);
    od_tensor_release(v);
    od_tensor_release(sc);

    /* empty tensors: any shape with 0 elements, -1 is ambiguous */
    int64_t s03[] = {0, 3}, z1[] = {3, 0, 5}, z2[] = {-1, 0};
    od_tensor *e = NULL;
    OK(od_tensor_empty(s03, 2, OD_FLOAT32, CPU, &e, &last_err));
    OK(od_tensor_view(e, z1, 3, &v, &last_err));
    od_tensor_release(v);
    EXPECT_ERR(od_tensor_view(e, z2, 2, &v, &last_err), OD_EMISMATCH,
               "cannot reshape tensor of 0 elements into shape [-1, 0] because the unspecified "
               "dimension size -1 can be any value and is ambiguous");
    od_tensor_release(e);

    od_tensor_release(b);
    od_tensor_release(b2);
    od_tensor_release(b3);
}

Test(views, infer_size)
{
    int64_t out[OD_MAX_DIMS];
    int64_t s25[] = {2, 5};
    EXPECT_ERR(od_infer_size(s25, 2, 6, out, &last_err), OD_EMISMATCH,
               "shape '[2, 5]' is invalid for input of size 6");
    int64_t a[] = {2, -1, 3};
    OK(od_infer_size(a, 3, 24, out, &last_err));
    cr_expect(out[0] == 2 && out[1] == 4 && out[2] == 3);
    EXPECT_ERR(od_infer_size(a, 3, 25, out, &last_err), OD_EMISMATCH,
               "shape '[2, -1, 3]' is invalid for input of size 25");
    int64_t two[] = {-1, -1};
    EXPECT_ERR(od_infer_size(two, 2, 4, out, &last_err), OD_EINVAL, "only one dimension can be inferred");
    int64_t neg[] = {2, -2};
    EXPECT_ERR(od_infer_size(neg, 2, 4, out, &last_err), OD_EINVAL, "invalid shape dimension -2");
    int64_t big[] = {(int64_t)1 << 40, (int64_t)1 << 40, -1};
    EXPECT_ERR(od_infer_size(big, 3, 8, out, &last_err), OD_EMISMATCH, NULL);
    /* in place */
    int64_t inpl[] = {-1, 4};
    OK(od_infer_size(inpl, 2, 8, inpl, &last_err));
    cr_expect(inpl[0] == 2 && inpl[1] == 4);
    /* random: -1 anywhere recovers the missing factor */
    for (int i = 0; i < 200; i++) {
        int64_t sz[OD_MAX_DIMS];
        int nd = rand_shape(sz, 1, 5, 6, false);
        int64_t n = numel_of(sz, nd), q[OD_MAX_DIMS];
        memcpy(q, sz, sizeof q);
        int at = (int)rint_in(0, nd - 1);
        q[at] = -1;
        OK(od_infer_size(q, nd, n, out, &last_err));
        for (int d = 0; d < nd; d++)
            CHECK(out[d] == sz[d], "infer %s", shp(q, nd));
    }
}

Test(views, errors_name_the_argument_like_torch)
{
    int64_t s3[] = {3}, s234[] = {2, 3, 4};
    od_tensor *v3 = rand_base(s3, 1), *t3 = rand_base(s234, 3), *v = NULL, *sc = NULL;
    OK(od_tensor_scalar(1, OD_FLOAT64, &sc, &last_err));

    EXPECT_ERR(od_tensor_t(t3, &v, &last_err), OD_EINVAL, "t() expects a tensor with <= 2 dimensions, but self is 3D");
    OK(od_tensor_t(v3, &v, &last_err)); /* 1-D: t() is the identity */
    cr_expect(shape_eq(v, s3, 1));
    od_tensor_release(v);
    OK(od_tensor_t(sc, &v, &last_err));
    od_tensor_release(v);

    EXPECT_ERR(od_tensor_select(v3, 0, 5, &v, &last_err), OD_EINVAL,
               "select(): index 5 out of range for tensor of size [3] at dimension 0");
    EXPECT_ERR(od_tensor_select(v3, 0, -4, &v, &last_err), OD_EINVAL,
               "select(): index -4 out of range for tensor of size [3] at dimension 0");
    EXPECT_ERR(od_tensor_select(t3, -1, 4, &v, &last_err), OD_EINVAL,
               "select(): index 4 out of range for tensor of size [2, 3, 4] at dimension 2");
    EXPECT_ERR(od_tensor_select(sc, 0, 0, &v, &last_err), OD_EINVAL, "select() cannot be applied to a 0-dim tensor.");
    EXPECT_ERR(od_tensor_select(t3, 3, 0, &v, &last_err), OD_EINVAL,
               "Dimension out of range (expected to be in range of [-3, 2], but got 3)");

    EXPECT_ERR(od_tensor_slice(sc, 0, 0, 1, 1, &v, &last_err), OD_EINVAL, "slice() cannot be applied to a 0-dim tensor.");
    EXPECT_ERR(od_tensor_slice(v3, 0, 0, 1, 0, &v, &last_err), OD_EINVAL, "slice step must be positive");
    EXPECT_ERR(od_tensor_slice(v3, 0, 0, 1, -1, &v, &last_err), OD_EINVAL, "slice step must be positive");

    int64_t e24[] = {2, 4};
    EXPECT_ERR(od_tensor_expand(v3, e24, 2, &v, &last_err), OD_EMISMATCH,
               "The expanded size of the tensor (4) must match the existing size (3) at "
               "non-singleton dimension 1.  Target sizes: [2, 4].  Tensor sizes: [3]");
    EXPECT_ERR(od_tensor_expand(t3, e24, 2, &v, &last_err), OD_EINVAL,
               "expand(torch.DoubleTensor{[2, 3, 4]}, size=[2, 4]): the number of sizes provided (2) "
               "must be greater or equal to the number of dimensions in the tensor (3)");
    int64_t lead[] = {-1, 3};
    EXPECT_ERR(od_tensor_expand(v3, lead, 2, &v, &last_err), OD_EINVAL,
               "The expanded size of the tensor (-1) isn't allowed in a leading, non-existing dimension 0");
    int64_t negt[] = {-2, 3};
    EXPECT_ERR(od_tensor_expand(v3, negt, 2, &v, &last_err), OD_EINVAL, NULL);

    int64_t p2[] = {0, 1}, pdup[] = {0, 0, 1}, pbad[] = {0, 1, 3};
    EXPECT_ERR(od_tensor_permute(t3, p2, 2, &v, &last_err), OD_EINVAL,
               "permute(sparse_coo): number of dimensions in the tensor input does not match the length of the "
               "desired ordering of dimensions i.e. input.dim() = 3 is not equal to len(dims) = 2");
    EXPECT_ERR(od_tensor_permute(t3, pdup, 3, &v, &last_err), OD_EINVAL, "permute(): duplicate dims are not allowed.");
    EXPECT_ERR(od_tensor_permute(t3, pbad, 3, &v, &last_err), OD_EINVAL,
               "Dimension out of range (expected to be in range of [-3, 2], but got 3)");
    int64_t pneg[] = {-1, 0, -2};
    OK(od_tensor_permute(t3, pneg, 3, &v, &last_err));
    cr_expect(v->sizes[0] == 4 && v->sizes[1] == 2 && v->sizes[2] == 3);
    od_tensor_release(v);

    EXPECT_ERR(od_tensor_transpose(t3, 0, 3, &v, &last_err), OD_EINVAL,
               "Dimension out of range (expected to be in range of [-3, 2], but got 3)");
    EXPECT_ERR(od_tensor_unsqueeze(t3, 4, &v, &last_err), OD_EINVAL,
               "Dimension out of range (expected to be in range of [-4, 3], but got 4)");
    EXPECT_ERR(od_tensor_squeeze_dim(t3, -4, &v, &last_err), OD_EINVAL,
               "Dimension out of range (expected to be in range of [-3, 2], but got -4)");
    /* unsqueeze at the rank cap */
    int64_t ones[OD_MAX_DIMS];
    for (int i = 0; i < OD_MAX_DIMS; i++)
        ones[i] = 1;
    od_tensor *full = NULL;
    OK(od_tensor_view(sc, ones, OD_MAX_DIMS, &full, &last_err));
    EXPECT_ERR(od_tensor_unsqueeze(full, 0, &v, &last_err), OD_EINVAL, NULL);
    od_tensor_release(full);

    /* 0-dim tensors: transpose/squeeze/unsqueeze with dims 0 and -1 */
    OK(od_tensor_transpose(sc, 0, -1, &v, &last_err));
    cr_expect(v->ndim == 0);
    od_tensor_release(v);
    OK(od_tensor_squeeze_dim(sc, -1, &v, &last_err));
    cr_expect(v->ndim == 0);
    od_tensor_release(v);
    OK(od_tensor_unsqueeze(sc, -1, &v, &last_err));
    cr_expect(v->ndim == 1 && v->sizes[0] == 1);
    od_tensor_release(v);
    OK(od_tensor_expand(sc, e24, 2, &v, &last_err));
    cr_expect(v->strides[0] == 0 && v->strides[1] == 0 && v->sizes[1] == 4);
    od_tensor_release(v);

    /* as_strided bounds */
    int64_t sz[] = {3, 3}, st[] = {3, 1}, negs[] = {-1, 1};
    EXPECT_ERR(od_tensor_as_strided(v3, sz, st, 2, 0, &v, &last_err), OD_EMISMATCH,
               "setStorage: sizes [3, 3], strides [3, 1], storage offset 0, and itemsize 8 requiring a "
               "storage size of 72 are out of bounds for storage of size 24");
    EXPECT_ERR(od_tensor_as_strided(v3, sz, negs, 2, 0, &v, &last_err), OD_EINVAL,
               "as_strided: Negative strides are not supported at the moment, got strides: [-1, 1]");
    int64_t s1[] = {1}, st1[] = {1};
    EXPECT_ERR(od_tensor_as_strided(v3, s1, st1, 1, -1, &v, &last_err), OD_EINVAL, "Tensor: invalid storage offset -1");
    EXPECT_ERR(od_tensor_as_strided(v3, s1, st1, 1, 3, &v, &last_err), OD_EMISMATCH, NULL);
    int64_t hs[] = {2}, hst[] = {INT64_MAX};
    EXPECT_ERR(od_tensor_as_strided(v3, hs, hst, 1, 0, &v, &last_err), OD_EMISMATCH, NULL);
    int64_t e0[] = {0}, huge_st[] = {INT64_MAX};
    OK(od_tensor_as_strided(v3, e0, huge_st, 1, 0, &v, &last_err)); /* empty: needs no storage */
    od_tensor_release(v);

    od_tensor_release(sc);
    od_tensor_release(v3);
    od_tensor_release(t3);
}

/* ======================================================================== */
/* broadcasting                                                              */

Test(views, broadcast_shapes_random_and_edges)
{
    for (int it = 0; it < 2000; it++) {
        /* Build a, b whose broadcast is R by construction: one of them has
         * R's full rank; at every dim at least one present tensor carries
         * R's size and the other carries it or 1. */
        int64_t R[OD_MAX_DIMS], a[OD_MAX_DIMS], b[OD_MAX_DIMS];
        int n = rand_shape(R, 0, 5, 4, true);
        bool a_full = rnd() & 1;
        int na = a_full ? n : (int)rint_in(0, n), nb = a_full ? (int)rint_in(0, n) : n;
        int64_t *full = a_full ? a : b, *part = a_full ? b : a;
        int npart = a_full ? nb : na;
        for (int i = 0; i < n; i++) {
            int pi = i - (n - npart);
            bool part_has = false;
            if (pi >= 0) {
                part[pi] = rnd() & 1 ? R[i] : 1;
                part_has = part[pi] == R[i];
            }
            full[i] = part_has && (rnd() & 1) ? 1 : R[i];
        }
        int64_t out[OD_MAX_DIMS];
        int nout = -1;
        OK(od_broadcast_shapes(a, na, b, nb, out, &nout, &last_err));
        CHECK(nout == n, "rank of %s with %s", shp(a, na), shp(b, nb));
        for (int i = 0; i < n; i++)
            CHECK(out[i] == R[i], "%s with %s gives %s, want %s", shp(a, na), shp(b, nb),
                  shp(out, nout), shp(R, n));
        int64_t out2[OD_MAX_DIMS];
        int nout2;
        OK(od_broadcast_shapes(b, nb, a, na, out2, &nout2, &last_err));
        CHECK(nout2 == nout && memcmp(out, out2, (size_t)nout * sizeof *out) == 0, "symmetric");
        /* Break it at one dim where both are present and a is not 1: the
         * only mismatch, so it is the one reported. */
        for (int i = n - 1; i >= 0; i--) {
            int ai = i - (n - na), bi = i - (n - nb);
            if (ai < 0 || bi < 0 || a[ai] == 1 || (rnd() & 1))
                continue;
            int64_t bb[OD_MAX_DIMS];
            memcpy(bb, b, sizeof bb);
            bb[bi] = a[ai] + 2 + (int64_t)(rnd() % 3); /* never 1, never a[ai] */
            char want[200];
            snprintf(want, sizeof want,
                     "The size of tensor a (%ld) must match the size of tensor b (%ld) at "
                     "non-singleton dimension %d",
                     (long)a[ai], (long)bb[bi], i);
            EXPECT_ERR(od_broadcast_shapes(a, na, bb, nb, out, &nout, &last_err), OD_EMISMATCH, want);
            break;
        }
    }
    int64_t z3[] = {0, 3}, o3[] = {1, 3}, z[] = {0}, two[] = {2}, one[] = {1}, s23[] = {2, 3}, s4[] = {4};
    int64_t out[OD_MAX_DIMS];
    int nout;
    OK(od_broadcast_shapes(z3, 2, o3, 2, out, &nout, &last_err));
    cr_expect(nout == 2 && out[0] == 0 && out[1] == 3);
    EXPECT_ERR(od_broadcast_shapes(z, 1, two, 1, out, &nout, &last_err), OD_EMISMATCH,
               "The size of tensor a (0) must match the size of tensor b (2) at non-singleton dimension 0");
    OK(od_broadcast_shapes(z, 1, one, 1, out, &nout, &last_err));
    cr_expect(nout == 1 && out[0] == 0);
    OK(od_broadcast_shapes(NULL, 0, s23, 2, out, &nout, &last_err));
    cr_expect(nout == 2 && out[0] == 2 && out[1] == 3);
    OK(od_broadcast_shapes(NULL, 0, NULL, 0, out, &nout, &last_err));
    cr_expect(nout == 0);
    EXPECT_ERR(od_broadcast_shapes(s23, 2, s4, 1, out, &nout, &last_err), OD_EMISMATCH,
               "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1");
    /* output may alias an input */
    int64_t x[OD_MAX_DIMS] = {3, 1};
    int64_t y[] = {4};
    OK(od_broadcast_shapes(x, 2, y, 1, x, &nout, &last_err));
    cr_expect(nout == 2 && x[0] == 3 && x[1] == 4);
    EXPECT_ERR(od_broadcast_shapes(s23, OD_MAX_DIMS + 1, s4, 1, out, &nout, &last_err), OD_EINVAL, NULL);
}

/* Broadcast + expand together, as a binary kernel would use them. */
Test(views, expand_to_broadcast_shape)
{
    for (int it = 0; it < 200; it++) {
        int64_t sa[OD_MAX_DIMS], sb[OD_MAX_DIMS], out[OD_MAX_DIMS];
        int na = rand_shape(sa, 0, 4, 3, true), nb = rand_shape(sb, 0, 4, 3, true), nout;
        od_error err;
        if (od_broadcast_shapes(sa, na, sb, nb, out, &nout, &err) != OD_OK)
            continue;
        od_tensor *a = rand_base(sa, na), *ea = NULL;
        OK(od_tensor_expand(a, out, nout, &ea, &last_err));
        CHECK(shape_eq(ea, out, nout), "expand to the broadcast shape");
        int64_t idx[OD_MAX_DIMS] = {0}, ai[OD_MAX_DIMS];
        if (numel_of(out, nout) > 0)
            do {
                for (int d = 0; d < na; d++)
                    ai[d] = sa[d] == 1 ? 0 : idx[d + nout - na];
                CHECK(elem(ea, idx) == base_data(a)[flat_index(ai, sa, na)], "broadcast read");
            } while (next_index(idx, out, nout));
        od_tensor_release(ea);
        od_tensor_release(a);
    }
}

/* ======================================================================== */
/* od_parallel_for                                                           */

typedef struct {
    int64_t n;
    atomic_int *hits;
    atomic_int calls;
    atomic_int bad;
    atomic_int in_region_seen;
} cover_ctx;

static void cover_fn(void *p, int64_t begin, int64_t end)
{
    cover_ctx *c = p;
    atomic_fetch_add(&c->calls, 1);
    if (!(0 <= begin && begin < end && end <= c->n))
        atomic_fetch_add(&c->bad, 1);
    if (od_in_parallel_region())
        atomic_fetch_add(&c->in_region_seen, 1);
    for (int64_t i = begin; i < end && i >= 0 && i < c->n; i++)
        atomic_fetch_add(&c->hits[i], 1);
}

static void check_cover(int64_t n, int64_t grain)
{
    cover_ctx c = {.n = n};
    c.hits = calloc((size_t)(n ? n : 1), sizeof *c.hits);
    CHECK(od_parallel_for(n, grain, cover_fn, &c) == OD_OK, "status");
    CHECK(atomic_load(&c.bad) == 0, "n=%ld grain=%ld: a chunk outside [0, n) or empty", (long)n, (long)grain);
    for (int64_t i = 0; i < n; i++)
        CHECK(atomic_load(&c.hits[i]) == 1, "n=%ld grain=%ld: index %ld ran %d times", (long)n,
              (long)grain, (long)i, atomic_load(&c.hits[i]));
    if (n == 0)
        CHECK(atomic_load(&c.calls) == 0, "n=0 calls nothing");
    if (n > 0 && grain >= n)
        CHECK(atomic_load(&c.calls) == 1, "n <= grain runs once, serially");
    if (n > 0) {
        int64_t g = grain < 1 ? 1 : grain;
        int64_t max_chunks = n / g + (n % g != 0);
        CHECK(atomic_load(&c.calls) <= max_chunks && atomic_load(&c.calls) <= od_get_num_threads(),
              "n=%ld grain=%ld: %d chunks", (long)n, (long)grain, atomic_load(&c.calls));
    }
    free(c.hits);
}

Test(parallel, covers_the_range_exactly_once)
{
    cr_expect(od_get_num_threads() >= 1);
    for (int threads = 1; threads <= 5; threads += 2) {
        od_set_num_threads(threads);
        cr_expect_eq(od_get_num_threads(), threads);
        int64_t ns[] = {0, 1, 2, 3, 7, 64, 100, 1000, 4097, rint_in(1, 100000)};
        int64_t grains[] = {-5, 0, 1, 3, 64, 1000, 100000};
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
            for (size_t j = 0; j < sizeof grains / sizeof grains[0]; j++)
                check_cover(ns[i], grains[j]);
        for (int k = 0; k < 20; k++)
            check_cover(rint_in(0, 5000), rint_in(0, 300));
    }
    od_set_num_threads(0);
    cr_expect(od_get_num_threads() >= 1, "back to the default");
    cr_expect_eq(od_parallel_for(-1, 1, cover_fn, NULL), OD_EINVAL);
    cr_expect_eq(od_parallel_for(10, 1, NULL, NULL), OD_EINVAL);
}

static pthread_t tids[64];
static atomic_int ntids;
static void slow_fn(void *p, int64_t begin, int64_t end)
{
    (void)p, (void)begin, (void)end;
    int k = atomic_fetch_add(&ntids, 1);
    if (k < 64)
        tids[k] = pthread_self();
    /* Hold this chunk until another chunk has started (at most 2 s): the
     * second one must then run on another thread if the pool works. */
    for (int i = 0; i < 2000 && atomic_load(&ntids) < 2; i++)
        usleep(1000);
}

Test(parallel, uses_several_threads)
{
    od_set_num_threads(4);
    atomic_store(&ntids, 0);
    cr_assert_eq(od_parallel_for(4, 1, slow_fn, NULL), OD_OK);
    int n = atomic_load(&ntids), distinct = 0;
    cr_expect_eq(n, 4, "four chunks of one");
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++)
            seen = seen || pthread_equal(tids[i], tids[j]);
        distinct += !seen;
    }
    cr_expect(distinct >= 2, "work spread over threads (%d distinct)", distinct);
    /* one thread: everything on the caller */
    od_set_num_threads(1);
    atomic_store(&ntids, 0);
    od_parallel_for(4, 1, slow_fn, NULL);
    cr_expect(atomic_load(&ntids) == 1 && pthread_equal(tids[0], pthread_self()));
    od_parallel_shutdown();
    od_parallel_shutdown();
}

/* A chunk on a pool worker records how many CPUs that worker may run on, and
 * holds on (at most 2 s) until another chunk has started, so a worker takes
 * part whatever the scheduler does. */
static pthread_t aff_caller;
static atomic_int aff_started, aff_worker_cpus;
static void aff_fn(void *p, int64_t begin, int64_t end)
{
    (void)p, (void)begin, (void)end;
    atomic_fetch_add(&aff_started, 1);
    if (!pthread_equal(pthread_self(), aff_caller)) {
        cpu_set_t set;
        if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0)
            atomic_store(&aff_worker_cpus, CPU_COUNT(&set));
    }
    for (int i = 0; i < 2000 && atomic_load(&aff_started) < 2; i++)
        usleep(1000);
}

/* On a small machine the workers are kept off the CPU of the thread that
 * opens the region (left to the scheduler, a worker was queued behind it). */
Test(parallel, workers_keep_off_the_callers_cpu)
{
    cpu_set_t all;
    cr_assert_eq(sched_getaffinity(0, sizeof all, &all), 0);
    int ncpu = CPU_COUNT(&all);
    if (ncpu < 2 || ncpu > 8)
        cr_skip_test("%d CPUs: the pool keeps workers off the caller's CPU on 2 to 8", ncpu);
    od_parallel_shutdown(); /* a fresh pool, started under this affinity */
    od_set_num_threads(2);
    aff_caller = pthread_self();
    atomic_store(&aff_started, 0);
    atomic_store(&aff_worker_cpus, 0);
    cr_assert_eq(od_parallel_for(2, 1, aff_fn, NULL), OD_OK);
    cr_expect_eq(atomic_load(&aff_worker_cpus), ncpu - 1, "a worker may run on %d of %d CPUs",
                 atomic_load(&aff_worker_cpus), ncpu);
    od_set_num_threads(0);
    od_parallel_shutdown();
}

typedef struct {
    int64_t inner_n;
    atomic_int *hits; /* outer_n * inner_n */
    atomic_int inner_calls;
    atomic_int not_in_region;
} nest_ctx;

typedef struct {
    nest_ctx *outer;
    int64_t row;
} nest_row;

static void nest_inner(void *p, int64_t begin, int64_t end)
{
    nest_row *r = p;
    atomic_fetch_add(&r->outer->inner_calls, 1);
    for (int64_t j = begin; j < end; j++)
        atomic_fetch_add(&r->outer->hits[r->row * r->outer->inner_n + j], 1);
}

static void nest_outer(void *p, int64_t begin, int64_t end)
{
    nest_ctx *c = p;
    if (!od_in_parallel_region())
        atomic_fetch_add(&c->not_in_region, 1);
    for (int64_t i = begin; i < end; i++) {
        nest_row r = {c, i};
        od_parallel_for(c->inner_n, 1, nest_inner, &r); /* nested: serial */
    }
}

Test(parallel, nested_calls_run_serially)
{
    od_set_num_threads(4);
    int64_t outer = rint_in(8, 40), inner = rint_in(2, 300);
    nest_ctx c = {.inner_n = inner};
    c.hits = calloc((size_t)(outer * inner), sizeof *c.hits);
    cr_assert_eq(od_parallel_for(outer, 1, nest_outer, &c), OD_OK);
    for (int64_t k = 0; k < outer * inner; k++)
        CHECK(atomic_load(&c.hits[k]) == 1, "element %ld", (long)k);
    CHECK(atomic_load(&c.inner_calls) == outer, "one serial inner call per row (%d)", atomic_load(&c.inner_calls));
    CHECK(atomic_load(&c.not_in_region) == 0, "the region is visible to fn");
    CHECK(!od_in_parallel_region(), "not after the region");
    free(c.hits);
}

static void *concurrent_caller(void *arg)
{
    (void)arg;
    for (int k = 0; k < 50; k++) {
        int64_t n = 1000 + k * 37;
        cover_ctx c = {.n = n};
        c.hits = calloc((size_t)n, sizeof *c.hits);
        od_parallel_for(n, 7, cover_fn, &c);
        for (int64_t i = 0; i < n; i++)
            if (atomic_load(&c.hits[i]) != 1) {
                free(c.hits);
                return (void *)1;
            }
        if (atomic_load(&c.bad)) {
            free(c.hits);
            return (void *)1;
        }
        free(c.hits);
    }
    return NULL;
}

Test(parallel, concurrent_callers_each_get_their_range)
{
    od_set_num_threads(3);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, concurrent_caller, NULL), 0);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        cr_expect(r == NULL, "caller %d saw a wrong cover", i);
    }
    /* resizing between regions */
    od_set_num_threads(2);
    check_cover(1000, 1);
    od_set_num_threads(5);
    check_cover(1000, 1);
    od_parallel_shutdown();
    check_cover(1000, 1); /* restarts lazily */
}
