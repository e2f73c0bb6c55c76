/* bench_keys.c — what the functionality keys cost (issue 9's targets):
 * Autograd recording against the same call under no_grad, backward against
 * its forward, a vmap batching rule against the per-sample fallback on the
 * same call, and the mode stack (empty, and trace) against no stack.
 *
 * Each figure is a ratio or difference of two timings taken in the same run
 * on the same data, interleaved, median of several repetitions, so a
 * shared, noisy machine affects both sides alike.
 *
 * Usage: bench_keys [--quick]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "od_autograd.h"
#include "od_mode.h"
#include "od_vmap.h"

static int g_reps = 9;


static void check(od_status st, const od_error *err, const char *what)
{
    if (st) {
        fprintf(stderr, "bench_keys: %s: %s\n", what, err->message);
        exit(1);
    }
}

static od_tensor *rand_tensor(const int64_t *sizes, int ndim)
{
    od_tensor *t;
    od_error err;
    check(od_tensor_empty(sizes, ndim, OD_FLOAT32, (od_device){OD_DEV_CPU, 0}, &t, &err), &err, "alloc");
    float *p = od_tensor_data(t);
    uint64_t x = 0x9E3779B97F4A7C15u;
    for (int64_t i = 0; i < od_tensor_numel(t); i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    return t;
}

typedef void (*bench_fn)(void *ctx);

/* Seconds per call of fn, median over reps of n calls each. */
static double time_it(bench_fn fn, void *ctx, int n)
{
    double v[64];
    for (int r = 0; r < g_reps; r++) {
        double t0 = now_s();
        for (int i = 0; i < n; i++)
            fn(ctx);
        v[r] = (now_s() - t0) / n;
    }
    return median(v, g_reps);
}

/* ---- autograd ---- */

typedef struct mul_ctx {
    od_tensor *x, *y;
    bool no_grad;
} mul_ctx;

static void do_mul(void *p)
{
    mul_ctx *c = p;
    od_error err;
    od_tensor *out = NULL;
    od_tls saved = c->no_grad ? od_no_grad_enter() : od_tls_save();
    check(od_mul(c->x, c->y, &out, &err), &err, "mul");
    od_tls_restore(&saved);
    od_tensor_release(out);
}

typedef struct mlp_ctx {
    od_tensor *x, *w, *loss;
} mlp_ctx;

static void do_forward(void *p)
{
    mlp_ctx *c = p;
    od_error err;
    od_tensor *m = NULL, *r = NULL;
    check(od_mm(c->x, c->w, &m, &err), &err, "mm");
    check(od_relu(m, &r, &err), &err, "relu");
    od_tensor_release(c->loss);
    check(od_sum(r, NULL, 0, false, &c->loss, &err), &err, "sum");
    od_tensor_release(m);
    od_tensor_release(r);
}

static void do_backward(void *p)
{
    mlp_ctx *c = p;
    od_error err;
    check(od_backward(c->loss, NULL, true, &err), &err, "backward");
}

/* ---- vmap ---- */

typedef struct vmap_ctx {
    const od_op *op;
    od_value args[2];
    bool fallback;
    od_vmap_level lv;
} vmap_ctx;

static void do_vmap(void *p)
{
    vmap_ctx *c = p;
    od_error err;
    od_stack s;
    od_stack_init(&s, c->args, 2);
    od_tls saved = od_vmap_enter(&c->lv);
    od_status st;
    if (c->fallback) { /* the same call through the per-sample loop */
        const od_kernel *k = od_backend_fallback(OD_KEY_Batched);
        st = k->fn(k->ctx, c->op, od_call_keyset(c->op, &s), &s, &err);
    } else {
        st = od_call(c->op, &s, &err);
    }
    od_tls_restore(&saved);
    check(st, &err, "vmap call");
    od_stack_release_rets(&s);
}

/* ---- modes ---- */

typedef struct mode_ctx {
    od_tensor *x;
    od_mode_stack *st;
} mode_ctx;

static void do_relu(void *p)
{
    mode_ctx *c = p;
    od_error err;
    od_tensor *out = NULL;
    od_tls saved = od_modes_enter(c->st);
    check(od_relu(c->x, &out, &err), &err, "relu");
    od_tls_restore(&saved);
    od_tensor_release(out);
}

int main(int argc, char **argv)
{
    bool quick = argc > 1 && !strcmp(argv[1], "--quick");
    if (quick)
        g_reps = 3;
    od_error err;
    check(od_init(&err), &err, "init");
    od_registry_freeze();
    printf("bench_keys: the functionality keys (ratios from one run; median of %d)\n", g_reps);

    int64_t n1m = 1000000;
    mul_ctx mc = {rand_tensor(&n1m, 1), rand_tensor(&n1m, 1), false};
    check(od_set_requires_grad(mc.x, true, &err), &err, "requires_grad");
    mc.no_grad = true;
    double t_ng = time_it(do_mul, &mc, quick ? 5 : 30);
    mc.no_grad = false;
    double t_rec = time_it(do_mul, &mc, quick ? 5 : 30);
    mc.no_grad = true;
    t_ng = (t_ng + time_it(do_mul, &mc, quick ? 5 : 30)) / 2; /* interleaved */
    printf("%-56s %8.1f us vs %8.1f us  %5.2fx   (target <= 1.5x)\n", "autograd: mul 1e6 f32 recorded vs no_grad",
           t_rec * 1e6, t_ng * 1e6, t_rec / t_ng);

    int64_t sq[2] = {1024, 1024};
    mlp_ctx ml = {rand_tensor(sq, 2), rand_tensor(sq, 2), NULL};
    check(od_set_requires_grad(ml.x, true, &err), &err, "requires_grad");
    check(od_set_requires_grad(ml.w, true, &err), &err, "requires_grad");
    double t_f = time_it(do_forward, &ml, quick ? 1 : 3);
    double t_b = time_it(do_backward, &ml, quick ? 1 : 3);
    printf("%-56s %8.1f ms vs %8.1f ms  %5.2fx   (target <= 3x)\n",
           "autograd: backward vs forward of sum(relu(mm)) 1024^2", t_b * 1e3, t_f * 1e3, t_b / t_f);
    od_tensor_release(ml.loss);

    /* the target case: per-sample work small enough that a call's overhead
     * is what batching saves */
    int64_t xs[3] = {64, 8, 8}, ws[2] = {8, 8};
    od_tensor *vx = rand_tensor(xs, 3), *vw = rand_tensor(ws, 2), *bx = NULL;
    check(od_make_batched(vx, 0, 1, &bx, &err), &err, "batch");
    vmap_ctx vc = {od_builtin(OD_OPID_mm), {od_tensor_v(bx), od_tensor_v(vw)}, false, {1, 64, OD_RANDOMNESS_ERROR, NULL}};
    double t_rule = time_it(do_vmap, &vc, quick ? 5 : 50);
    vc.fallback = true;
    double t_loop = time_it(do_vmap, &vc, quick ? 5 : 50);
    printf("%-56s %8.1f us vs %8.1f us  %5.1fx   (target >= 10x)\n", "vmap: mm over 64 of 8x8 rule vs fallback loop",
           t_rule * 1e6, t_loop * 1e6, t_loop / t_rule);
    /* compute-bound samples: both sides do the same flops; no target */
    int64_t xl[3] = {64, 128, 128}, wl[2] = {128, 128};
    od_tensor *lx = rand_tensor(xl, 3), *lw = rand_tensor(wl, 2), *blx = NULL;
    check(od_make_batched(lx, 0, 1, &blx, &err), &err, "batch");
    vmap_ctx vl = {od_builtin(OD_OPID_mm), {od_tensor_v(blx), od_tensor_v(lw)}, false, {1, 64, OD_RANDOMNESS_ERROR, NULL}};
    t_rule = time_it(do_vmap, &vl, quick ? 2 : 10);
    vl.fallback = true;
    t_loop = time_it(do_vmap, &vl, quick ? 2 : 10);
    printf("%-56s %8.1f us vs %8.1f us  %5.1fx   (compute-bound: no target)\n",
           "vmap: mm over 64 of 128x128 rule vs fallback loop", t_rule * 1e6, t_loop * 1e6, t_loop / t_rule);
    od_tensor_release(blx);
    od_tensor_release(lx);
    od_tensor_release(lw);
    int64_t es[2] = {64, 256}, e1 = 256;
    od_tensor *ex = rand_tensor(es, 2), *ey = rand_tensor(&e1, 1), *bex = NULL;
    check(od_make_batched(ex, 0, 1, &bex, &err), &err, "batch");
    vmap_ctx ve = {od_builtin(OD_OPID_mul_Tensor), {od_tensor_v(bex), od_tensor_v(ey)}, false, {1, 64, OD_RANDOMNESS_ERROR, NULL}};
    t_rule = time_it(do_vmap, &ve, quick ? 20 : 500);
    ve.fallback = true;
    t_loop = time_it(do_vmap, &ve, quick ? 20 : 500);
    printf("%-56s %8.1f us vs %8.1f us  %5.1fx   (target >= 10x)\n", "vmap: mul over 64 of [256] rule vs fallback loop",
           t_rule * 1e6, t_loop * 1e6, t_loop / t_rule);

    int64_t one = 1;
    od_mode_stack empty = {0}, trace = {0};
    check(od_mode_stack_push(&trace, "trace", NULL, 0, &err), &err, "trace");
    mode_ctx mo = {rand_tensor(&one, 1), NULL};
    int calls = quick ? 20000 : 200000;
    double t_none = time_it(do_relu, &mo, calls);
    mo.st = &empty;
    double t_empty = time_it(do_relu, &mo, calls);
    mo.st = NULL;
    t_none = (t_none + time_it(do_relu, &mo, calls)) / 2;
    printf("%-56s %8.1f ns vs %8.1f ns  %+5.1f ns (target <= 5 ns)\n", "modes: relu(1 elem), empty stack vs none",
           t_empty * 1e9, t_none * 1e9, (t_empty - t_none) * 1e9);
    mo.st = &trace;
    int tcalls = quick ? 2000 : 9000; /* the trace keeps up to 10000 events */
    double t_trace = time_it(do_relu, &mo, tcalls / g_reps);
    printf("%-56s %8.1f ns vs %8.1f ns  %+5.0f ns (target <= 1000 ns)\n", "modes: relu(1 elem), trace vs none",
           t_trace * 1e9, t_none * 1e9, (t_trace - t_none) * 1e9);
    od_mode_stack_clear(&trace);

    od_tensor_release(mo.x);
    od_tensor_release(bex);
    od_tensor_release(ex);
    od_tensor_release(ey);
    od_tensor_release(bx);
    od_tensor_release(vx);
    od_tensor_release(vw);
    od_tensor_release(ml.x);
    od_tensor_release(ml.w);
    od_tensor_release(mc.x);
    od_tensor_release(mc.y);
    return 0;
}
