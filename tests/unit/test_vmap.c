/* test_vmap.c — vmap's random operators under each randomness setting, and
 * the batched-tensor wrapper, through the C API (the HTTP tests cover the
 * rules and the fallback; a random operator takes no tensor, so only a
 * caller inside a vmap level reaches it).
 */
#include "composite_testutil.h"
#include "od_vmap.h"

TestSuite(vmap, .init = test_setup);

static od_status randn(const int64_t *sizes, int n, od_tensor **out, od_error *err)
{
    od_value a[5] = {od_list_v(OD_T_INT_LIST, (void *)sizes, (size_t)n), od_none(), od_none(), od_none(),
                     od_none()};
    od_stack s;
    od_status st = od_call_builtin(OD_OPID_randn, a, 5, &s, err);
    if (st == OD_OK)
        *out = s.rets[0].u.t;
    return st;
}

Test(vmap, randomness_error_same_different)
{
    int64_t sizes[2] = {2, 3};
    od_vmap_level lv = {1, 4, OD_RANDOMNESS_ERROR, NULL};
    od_error err;
    od_tensor *t = NULL;
    od_tls saved = od_vmap_enter(&lv);
    od_status st = randn(sizes, 2, &t, &err);
    od_tls_restore(&saved);
    TCHECK(st == OD_EUNSUPPORTED && strstr(err.message, "randomness error mode"), "error mode: %s",
           err.message);

    lv.randomness = OD_RANDOMNESS_SAME;
    saved = od_vmap_enter(&lv);
    OKCALL(randn(sizes, 2, &t, &e_));
    od_tls_restore(&saved);
    TCHECK(!t->batched_value && t->ndim == 2, "same: one unbatched draw");
    od_tensor_release(t);

    lv.randomness = OD_RANDOMNESS_DIFFERENT;
    saved = od_vmap_enter(&lv);
    OKCALL(randn(sizes, 2, &t, &e_));
    od_tls_restore(&saved);
    TCHECK(t->batched_value && t->level == 1 && t->ndim == 2, "different: a batched result");
    od_tensor *phys = t->batched_value;
    TCHECK(phys->ndim == 3 && phys->sizes[0] == 4, "different: a draw per sample");
    /* the samples differ */
    const float *p = od_tensor_data(phys);
    TCHECK(memcmp(p, p + 6, 6 * sizeof(float)) != 0, "different: samples 0 and 1 are equal");
    od_tensor *u = NULL;
    OKCALL(od_unwrap_batched(t, 1, 4, -1, &u, &e_));
    TCHECK(u->ndim == 3 && u->sizes[2] == 4 && u->sizes[0] == 2, "out_dims -1 moves the batch dim last");
    od_tensor_release(u);
    od_tensor_release(t);
    /* outside the vmap, nothing batches */
    OKCALL(randn(sizes, 2, &t, &e_));
    TCHECK(!t->batched_value, "no vmap: plain result");
    od_tensor_release(t);
}

Test(vmap, make_batched_shows_the_logical_shape)
{
    int64_t sizes[3] = {2, 5, 3};
    od_tensor *v = t_rand(sizes, 3, OD_FLOAT32), *w = NULL, *u = NULL;
    OKCALL(od_make_batched(v, 1, 1, &w, &e_));
    TCHECK(w->ndim == 2 && w->sizes[0] == 2 && w->sizes[1] == 3, "logical shape drops the batch dim");
    TCHECK(od_ks_has(w->keys, OD_KEY_Batched), "a batched tensor carries the Batched key");
    od_error err;
    TCHECK(od_make_batched(v, 3, 1, &u, &err) == OD_EINVAL, "bdim out of range");
    /* a tensor not batched at the level is expanded */
    OKCALL(od_unwrap_batched(v, 2, 4, 0, &u, &e_));
    TCHECK(u->ndim == 4 && u->sizes[0] == 4 && u->strides[0] == 0, "unbatched result expanded to the batch");
    od_tensor_release(u);
    od_tensor_release(w);
    od_tensor_release(v);
}
