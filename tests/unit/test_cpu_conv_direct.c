/* test_cpu_conv_direct.c — the direct float32 convolution (kernels/cpu/
 * conv_direct.c) on each instruction set this CPU has, against a
 * double-precision loop on fresh random geometries: 1, 2 and 3 spatial
 * dims, groups, output channels per group that fill 1..3 vector blocks
 * and leave tails, rows wider and narrower than a register tile (every
 * tail width), strides, dilation, padding beyond the kernel, batch 1..2,
 * with and without bias. Every output element must be written (the output
 * starts as NaN). Also: where it must decline (a transposed plan, too few
 * channels per group) it writes nothing, and an empty batch writes nothing
 * yet succeeds. The seed is printed on failure; OD_TEST_SEED=<n> reruns it.
 */
#include <math.h>

#include "composite_testutil.h"
#include "cpu/cpu_kernels.h"
#include "od_shape.h"

TestSuite(cpu_conv_direct, .init = test_setup);

typedef struct geo_case {
    od_conv_plan p;
    float *x, *w, *b, *y;
    int64_t nx, nw, ny;
} geo_case;

static float frand(void) { return (float)rng_uniform(-1, 1); }

/* c's buffers for its plan c->p: random x, w and (or not) b, y all NaN */
static void alloc_case(geo_case *c)
{
    const od_conv_plan *p = &c->p;
    int64_t limg = p->img[0] * p->img[1] * p->img[2], lgrid = p->grid[0] * p->grid[1] * p->grid[2];
    c->nx = p->N * p->C_img * limg;
    c->nw = p->C_grid * (p->C_img / p->groups) * p->k[0] * p->k[1] * p->k[2];
    c->ny = p->N * p->C_grid * lgrid;
    c->x = malloc(sizeof(float) * (size_t)(c->nx + 1));
    c->w = malloc(sizeof(float) * (size_t)(c->nw + 1));
    c->b = rng_int(0, 1) ? malloc(sizeof(float) * (size_t)p->C_grid) : NULL;
    c->y = malloc(sizeof(float) * (size_t)(c->ny + 1));
    TCHECK(c->x && c->w && c->y, "out of memory");
    for (int64_t i = 0; i < c->nx; i++)
        c->x[i] = frand();
    for (int64_t i = 0; i < c->nw; i++)
        c->w[i] = frand();
    for (int64_t i = 0; c->b && i < p->C_grid; i++)
        c->b[i] = frand();
    for (int64_t i = 0; i < c->ny; i++)
        c->y[i] = NAN;
}

/* a random forward plan of nd spatial dims with cg output channels per group (no buffers) */
static void make_plan(geo_case *c, int nd, int64_t cg)
{
    od_conv_plan *p = &c->p;
    memset(c, 0, sizeof *c);
    p->nd = nd;
    p->groups = rng_int(1, 3);
    p->N = rng_int(1, 2);
    p->C_img = p->groups * rng_int(1, 5);
    p->C_grid = p->groups * cg;
    for (int d = 0; d < 3; d++) {
        bool live = d >= 3 - nd;
        p->k[d] = live ? rng_int(1, 5) : 1;
        p->stride[d] = live ? rng_int(1, 3) : 1;
        p->dil[d] = live ? rng_int(1, 2) : 1;
        p->pad[d] = live ? rng_int(0, 3) : 0;
        /* the last dim up to 70 wide, so rows take every tile width; the others small */
        int64_t span = p->dil[d] * (p->k[d] - 1) + 1;
        int64_t lo = span - 2 * p->pad[d] > 1 ? span - 2 * p->pad[d] : 1;
        p->img[d] = live ? rng_int(lo, d == 2 ? lo + 69 : lo + (nd == 3 ? 4 : 8)) : 1;
        p->grid[d] = (p->img[d] + 2 * p->pad[d] - span) / p->stride[d] + 1;
    }
}

/* make_plan's plan with its buffers */
static void make_case(geo_case *c, int nd, int64_t cg)
{
    make_plan(c, nd, cg);
    alloc_case(c);
}

static void free_case(geo_case *c)
{
    free(c->x);
    free(c->w);
    free(c->b);
    free(c->y);
}

/* every output element against the double loop; the bound is float32's
 * worst-case rounding of that many terms */
static void check_case(const geo_case *c, const char *isa)
{
    const od_conv_plan *p = &c->p;
    int64_t cin = p->C_img / p->groups, cg = p->C_grid / p->groups;
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t oc = 0; oc < p->C_grid; oc++)
            for (int64_t od = 0; od < p->grid[0]; od++)
                for (int64_t oh = 0; oh < p->grid[1]; oh++)
                    for (int64_t ow = 0; ow < p->grid[2]; ow++) {
                        double want = c->b ? c->b[oc] : 0, mag = fabs(want), terms = 1;
                        int64_t g = oc / cg;
                        for (int64_t ic = 0; ic < cin; ic++)
                            for (int64_t kd = 0; kd < p->k[0]; kd++)
                                for (int64_t kh = 0; kh < p->k[1]; kh++)
                                    for (int64_t kw = 0; kw < p->k[2]; kw++) {
                                        int64_t id = od * p->stride[0] - p->pad[0] + kd * p->dil[0];
                                        int64_t ih = oh * p->stride[1] - p->pad[1] + kh * p->dil[1];
                                        int64_t iw = ow * p->stride[2] - p->pad[2] + kw * p->dil[2];
                                        if (id < 0 || id >= p->img[0] || ih < 0 || ih >= p->img[1] || iw < 0 ||
                                            iw >= p->img[2])
                                            continue;
                                        double xv = c->x[(((n * p->C_img + g * cin + ic) * p->img[0] + id) *
                                                              p->img[1] + ih) * p->img[2] + iw];
                                        double wv = c->w[(((oc * cin + ic) * p->k[0] + kd) * p->k[1] + kh) *
                                                             p->k[2] + kw];
                                        want += xv * wv;
                                        mag += fabs(xv * wv);
                                        terms++;
                                    }
                        int64_t i = (((n * p->C_grid + oc) * p->grid[0] + od) * p->grid[1] + oh) * p->grid[2] + ow;
                        double got = c->y[i];
                        /* a float32 sum's worst rounding; a wrong or missing tap is ~mag / terms */
                        TCHECK(fabs(got - want) <= (terms + 1) * 0x1p-24 * mag + 1e-30,
                               "%s: nd %d G %" PRId64 " cin %" PRId64 " cg %" PRId64 " k %" PRId64 "x%" PRId64
                               "x%" PRId64 " s %" PRId64 ",%" PRId64 ",%" PRId64 " p %" PRId64 ",%" PRId64
                               ",%" PRId64 " d %" PRId64 ",%" PRId64 ",%" PRId64 " img %" PRId64 "x%" PRId64
                               "x%" PRId64 ": y[%" PRId64 "] = %.9g, want %.9g",
                               isa, p->nd, p->groups, cin, cg, p->k[0], p->k[1], p->k[2], p->stride[0],
                               p->stride[1], p->stride[2], p->pad[0], p->pad[1], p->pad[2], p->dil[0], p->dil[1],
                               p->dil[2], p->img[0], p->img[1], p->img[2], i, got, want);
                    }
}

/* a pointwise plan (1x1, stride 1, unpadded: AVX-512's own tile), up to 200 positions along the last dim
 * so every masked tail and tile count occurs */
static void make_pointwise(geo_case *c, int nd, int64_t cg)
{
    make_plan(c, nd, cg);
    od_conv_plan *p = &c->p;
    p->C_img = p->groups * rng_int(1, 64); /* long sums too */
    for (int d = 0; d < 3; d++) {
        bool live = d >= 3 - nd;
        p->k[d] = p->stride[d] = 1;
        p->pad[d] = 0;
        p->img[d] = p->grid[d] = live ? (d == 2 ? rng_int(1, 200) : rng_int(1, 3)) : 1;
    }
    alloc_case(c);
}

/* a depthwise plan (groups == C_img == C_grid, conv_direct.c's depthwise loop): make_plan's geometry
 * (every stride, dilation and padding beyond the kernel), rows up to 150 wide (1..8+ vectors) */
static void make_depthwise(geo_case *c, int nd)
{
    make_plan(c, nd, 1);
    od_conv_plan *p = &c->p;
    p->groups = p->C_img = p->C_grid = rng_int(1, 6);
    int64_t span = p->dil[2] * (p->k[2] - 1) + 1, lo = span - 2 * p->pad[2] > 1 ? span - 2 * p->pad[2] : 1;
    p->img[2] = rng_int(lo, lo + 150);
    p->grid[2] = (p->img[2] + 2 * p->pad[2] - span) / p->stride[2] + 1;
    alloc_case(c);
}

static void sweep(const char *isa, int64_t lanes)
{
    TCHECK(od_cpu_conv_direct_use(isa), "%s: not available", isa);
    for (int it = 0; it < 60; it++) {
        geo_case c;
        make_case(&c, 1 + it % 3, rng_int(lanes / 2, 3 * lanes + 3));
        TCHECK(od_cpu_conv_direct_f32(&c.p, c.x, c.w, c.b, c.y), "%s: declined a plan it suits", isa);
        check_case(&c, isa);
        free_case(&c);
    }
    od_cpu_conv_direct_use(NULL);
}

Test(cpu_conv_direct, avx512_against_double_loop)
{
    if (!__builtin_cpu_supports("avx512f"))
        cr_skip_test("this CPU has no AVX-512F");
    sweep("avx512", 16);
}

Test(cpu_conv_direct, avx512_pointwise_against_double_loop)
{
    if (!__builtin_cpu_supports("avx512f"))
        cr_skip_test("this CPU has no AVX-512F");
    TCHECK(od_cpu_conv_direct_use("avx512"), "avx512: not available");
    for (int it = 0; it < 60; it++) {
        geo_case c;
        make_pointwise(&c, 1 + it % 3, rng_int(8, 40));
        TCHECK(od_cpu_conv_direct_f32(&c.p, c.x, c.w, c.b, c.y), "declined a pointwise plan");
        check_case(&c, "avx512 pointwise");
        free_case(&c);
    }
    od_cpu_conv_direct_use(NULL);
}

Test(cpu_conv_direct, avx512_depthwise_against_double_loop)
{
    if (!__builtin_cpu_supports("avx512f"))
        cr_skip_test("this CPU has no AVX-512F");
    TCHECK(od_cpu_conv_direct_use("avx512"), "avx512: not available");
    for (int it = 0; it < 90; it++) {
        geo_case c;
        make_depthwise(&c, 1 + it % 3);
        TCHECK(od_cpu_conv_depthwise_f32(&c.p, c.x, c.w, c.b, c.y), "declined a depthwise plan");
        check_case(&c, "avx512 depthwise");
        free_case(&c);
    }
    if (od_cpu_conv_direct_use("avx2")) { /* AVX2 runs conv.c's loop */
        geo_case c;
        make_depthwise(&c, 2);
        TCHECK(!od_cpu_conv_depthwise_f32(&c.p, c.x, c.w, c.b, c.y), "taken on AVX2");
        for (int64_t i = 0; i < c.ny; i++)
            TCHECK(isnan(c.y[i]), "a declined call wrote y[%" PRId64 "]", i);
        free_case(&c);
    }
    od_cpu_conv_direct_use(NULL);
}

Test(cpu_conv_direct, avx2_against_double_loop)
{
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
        cr_skip_test("this CPU has no AVX2 and FMA");
    sweep("avx2", 8);
}

Test(cpu_conv_direct, declines_without_writing)
{
    if (!od_cpu_conv_direct_use(NULL) || !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")))
        cr_skip_test("no direct kernel on this CPU");
    geo_case c;
    make_case(&c, 2, 16);
    c.p.transposed = true;
    TCHECK(!od_cpu_conv_direct_f32(&c.p, c.x, c.w, c.b, c.y), "a transposed plan was taken");
    free_case(&c);
    make_case(&c, 2, 3); /* fewer than half a block of channels per group: im2col's */
    TCHECK(!od_cpu_conv_direct_f32(&c.p, c.x, c.w, c.b, c.y), "3 channels per group were taken");
    for (int64_t i = 0; i < c.ny; i++)
        TCHECK(isnan(c.y[i]), "a declined call wrote y[%" PRId64 "]", i);
    free_case(&c);
    TCHECK(od_cpu_conv_direct_use("off"), "off is always available");
    make_case(&c, 2, 16);
    TCHECK(!od_cpu_conv_direct_f32(&c.p, c.x, c.w, c.b, c.y), "taken while off");
    od_cpu_conv_direct_use(NULL);
    c.p.N = 0;
    TCHECK(od_cpu_conv_direct_f32(&c.p, c.x, c.w, c.b, c.y), "an empty batch is done, not declined");
    TCHECK(isnan(c.y[0]), "an empty batch wrote y[0]");
    free_case(&c);
}

/* od_cpu_conv_gemm_nt_f32 (the weight gradient's product) against a double
 * loop: m across 1..4 vector blocks and past 64 (a second row block), n
 * through every tail of its 6-column blocks, k from 1 to past a row of
 * 16, leading dims wider than the rows; c keeps what it held (+=). On AVX2
 * and off it declines and writes nothing. */
Test(cpu_conv_direct, gemm_nt_against_double_loop)
{
    if (!__builtin_cpu_supports("avx512f"))
        cr_skip_test("this CPU has no AVX-512F");
    TCHECK(od_cpu_conv_direct_use("avx512"), "avx512: not available");
    for (int it = 0; it < 80; it++) {
        int64_t m = it < 8 ? (int64_t[]){1, 15, 16, 17, 63, 64, 65, 130}[it] : rng_int(1, 140);
        int64_t n = rng_int(1, 20), k = it % 5 == 0 ? rng_int(1, 4) : rng_int(1, 300);
        int64_t lda = k + rng_int(0, 3), ldb = k + rng_int(0, 3), ldc = n + rng_int(0, 3);
        float *a = malloc(sizeof(float) * (size_t)(m * lda)), *b = malloc(sizeof(float) * (size_t)(n * ldb)),
              *c = malloc(sizeof(float) * (size_t)(m * ldc)), *c0 = malloc(sizeof(float) * (size_t)(m * ldc));
        TCHECK(a && b && c && c0, "out of memory");
        for (int64_t i = 0; i < m * lda; i++)
            a[i] = frand();
        for (int64_t i = 0; i < n * ldb; i++)
            b[i] = frand();
        for (int64_t i = 0; i < m * ldc; i++)
            c[i] = c0[i] = frand();
        TCHECK(od_cpu_conv_gemm_nt_f32(m, n, k, a, lda, b, ldb, c, ldc), "declined on AVX-512");
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < ldc; j++) {
                double want = c0[i * ldc + j], mag = fabs(want);
                if (j < n)
                    for (int64_t q = 0; q < k; q++) {
                        want += (double)a[i * lda + q] * b[j * ldb + q];
                        mag += fabs((double)a[i * lda + q] * b[j * ldb + q]);
                    }
                double got = c[i * ldc + j];
                TCHECK(fabs(got - want) <= (k + 2) * 0x1p-24 * mag + 1e-30,
                       "m %" PRId64 " n %" PRId64 " k %" PRId64 ": c[%" PRId64 "][%" PRId64 "] = %.9g, want %.9g", m,
                       n, k, i, j, got, want);
            }
        free(a), free(b), free(c), free(c0);
    }
    float a1 = 1, b1 = 2, c1 = 3;
    if (od_cpu_conv_direct_use("avx2"))
        TCHECK(!od_cpu_conv_gemm_nt_f32(1, 1, 1, &a1, 1, &b1, 1, &c1, 1) && c1 == 3, "taken on AVX2");
    TCHECK(od_cpu_conv_direct_use("off"), "off is always available");
    TCHECK(!od_cpu_conv_gemm_nt_f32(1, 1, 1, &a1, 1, &b1, 1, &c1, 1) && c1 == 3, "taken while off");
    od_cpu_conv_direct_use(NULL);
}
