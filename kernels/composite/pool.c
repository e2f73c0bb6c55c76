/* pool.c — the functional pools torch.nn.functional calls, as torch 1.13's
 * CompositeImplicitAutograd kernels write them: max_pool1d/2d/3d and
 * max_pool1d_with_indices over max_pool2d/3d_with_indices, avg_pool1d over
 * avg_pool2d, adaptive_avg_pool1d over adaptive_avg_pool2d,
 * adaptive_avg_pool2d/3d over _adaptive_avg_pool2d/3d (or mean over the
 * spatial dims for an output of ones), adaptive_max_pool1d over
 * adaptive_max_pool2d.
 *
 * Invariants: every operator is reached through the dispatcher, so autograd
 * records the native ops' nodes (MaxPool2DWithIndicesBackward0, ...) as in
 * torch; the 1d forms unsqueeze dim -2 and squeeze it back out of every
 * result. Checks that are the composite's own (checkDimRange, check1d)
 * come first with ATen's messages.
 */
#include <inttypes.h>
#include <string.h>

#include "composite.h"
#include "od_shape.h"

/* checkDimRange(fn, self, 2, 4) and check1d of each int[1] argument */
static od_status check_1d(const char *fn, const od_stack *s, const char *const *names, int nlists, od_error *err)
{
    const od_tensor *x = s->args[0].u.t;
    if (x->ndim < 2 || x->ndim >= 4)
        return od_error_set(err, OD_EINVAL,
                            "Expected 2 to 3 dimensions, but got %d-dimensional tensor for argument #1 'self' (while "
                            "checking arguments for %s)",
                            x->ndim, fn);
    for (int i = 0; i < nlists; i++) {
        const od_value *v = &s->args[1 + i];
        size_t n = v->tag == OD_T_INT ? 1 : v->u.list.n;
        /* stride may be empty: it defaults to kernel_size */
        if (n != 1 && !(n == 0 && strcmp(names[i], "stride") == 0))
            return od_error_set(err, OD_EINVAL, "%s() argument '%s' should contain one int (got %zu)", fn, names[i], n);
    }
    return OD_OK;
}

static int64_t first_int(const od_value *v) { return v->tag == OD_T_INT ? v->u.i : ((const int64_t *)v->u.list.items)[0]; }

#define IL(a, n) od_list_v(OD_T_INT_LIST, (void *)(a), (size_t)(n))

/* Runs id on args (borrowed) and returns its tensors with dim -2 squeezed
 * out (squeeze) or as they are, into s's returns (new). */
static od_status call_rets(od_opid id, od_value *args, int nargs, bool squeeze, int keep, od_stack *s, od_error *err)
{
    od_stack inner;
    od_status st = od_call_builtin(id, args, nargs, &inner, err);
    if (st)
        return st;
    if (inner.nrets < keep) {
        od_stack_release_rets(&inner);
        return od_error_set(err, OD_EINTERNAL, "pooling composite: too few returns");
    }
    int done = 0;
    for (int i = 0; i < keep && !st; i++, done++) {
        od_tensor *t = inner.rets[i].u.t;
        if (squeeze) {
            od_value a[2] = {od_tensor_v(t), od_int(-2)};
            od_tensor *q = NULL;
            if ((st = od_call_builtin1(OD_OPID_squeeze_dim, a, 2, &q, err)))
                break;
            s->rets[i] = od_tensor_v(q);
        } else {
            s->rets[i] = inner.rets[i];
            inner.rets[i] = od_none();
        }
    }
    od_stack_release_rets(&inner);
    if (st) {
        for (int i = 0; i < done; i++)
            od_tensor_release(s->rets[i].u.t);
        return st;
    }
    s->nrets = keep;
    return OD_OK;
}

/* self unsqueezed at -2 (a new reference) */
static od_status unsq(od_tensor *x, od_tensor **out, od_error *err)
{
    od_value a[2] = {od_tensor_v(x), od_int(-2)};
    return od_call_builtin1(OD_OPID_unsqueeze, a, 2, out, err);
}

OD_CX_KERNEL(od_cia_pool)
{
    (void)ks;
    (void)op;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_value *a = s->args;
    od_status st;
    switch (id) {
    case OD_OPID_max_pool2d: return call_rets(OD_OPID_max_pool2d_with_indices, a, 6, false, 1, s, err);
    case OD_OPID_max_pool3d: return call_rets(OD_OPID_max_pool3d_with_indices, a, 6, false, 1, s, err);
    case OD_OPID_max_pool1d:
    case OD_OPID_max_pool1d_with_indices:
    case OD_OPID_avg_pool1d: {
        bool mx = id != OD_OPID_avg_pool1d;
        static const char *const mx_names[] = {"kernel_size", "stride", "padding", "dilation"};
        const char *fn = mx ? "max_pool1d" : "avg_pool1d";
        if ((st = check_1d(fn, s, mx_names, mx ? 4 : 3, err)))
            return st;
        int64_t k[2] = {1, first_int(&a[1])}, sd[2] = {1, 0}, p[2] = {0, first_int(&a[3])}, d[2] = {1, 1};
        bool no_stride = a[2].tag == OD_T_INT_LIST && a[2].u.list.n == 0;
        sd[1] = no_stride ? k[1] : first_int(&a[2]);
        if (mx)
            d[1] = first_int(&a[4]);
        od_tensor *x = NULL;
        if ((st = unsq(a[0].u.t, &x, err)))
            return st;
        if (mx) {
            od_value b[6] = {od_tensor_v(x), IL(k, 2), IL(sd, 2), IL(p, 2), IL(d, 2), a[5]};
            st = call_rets(OD_OPID_max_pool2d_with_indices, b, 6, true, id == OD_OPID_max_pool1d ? 1 : 2, s, err);
        } else {
            od_value b[7] = {od_tensor_v(x), IL(k, 2), IL(sd, 2), IL(p, 2), a[4], a[5], od_none()};
            st = call_rets(OD_OPID_avg_pool2d, b, 7, true, 1, s, err);
        }
        od_tensor_release(x);
        return st;
    }
    case OD_OPID_adaptive_avg_pool1d:
    case OD_OPID_adaptive_max_pool1d: {
        bool mx = id == OD_OPID_adaptive_max_pool1d;
        static const char *const names[] = {"output_size"};
        if ((st = check_1d(mx ? "adaptive_max_pool1d" : "adaptive_avg_pool1d", s, names, 1, err)))
            return st;
        int64_t os[2] = {1, first_int(&a[1])};
        od_tensor *x = NULL;
        if ((st = unsq(a[0].u.t, &x, err)))
            return st;
        od_value b[2] = {od_tensor_v(x), IL(os, 2)};
        st = call_rets(mx ? OD_OPID_adaptive_max_pool2d : OD_OPID_adaptive_avg_pool2d, b, 2, true, mx ? 2 : 1, s, err);
        od_tensor_release(x);
        return st;
    }
    case OD_OPID_adaptive_avg_pool2d:
    case OD_OPID_adaptive_avg_pool3d: {
        int nd = id == OD_OPID_adaptive_avg_pool2d ? 2 : 3;
        const int64_t *os = NULL;
        int64_t one = 0;
        int n = a[1].tag == OD_T_INT ? 1 : (int)a[1].u.list.n;
        if (a[1].tag == OD_T_INT) {
            one = a[1].u.i;
            os = &one;
        } else {
            os = a[1].u.list.items;
        }
        if (n != nd)
            return od_error_set(err, OD_EINVAL, "adaptive_avg_pool%dd: output_size must be %d", nd, nd);
        bool neg = false, ones = true;
        for (int d = 0; d < nd; d++) {
            neg |= os[d] < 0;
            ones &= os[d] == 1;
        }
        if (neg) {
            if (nd == 2)
                return od_error_set(err, OD_EINVAL,
                                    "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 "
                                    "but received {%" PRId64 ", %" PRId64 "}",
                                    os[0], os[1]);
            return od_error_set(err, OD_EINVAL,
                                "adaptive_avg_pool3d: elements of output_size must be greater than or equal to 0 "
                                "but received {%" PRId64 ", %" PRId64 ", %" PRId64 "}",
                                os[0], os[1], os[2]);
        }
        if (ones) {
            /* torch: the mean over the spatial dims, kept */
            int64_t dims[3] = {-1, -2, -3};
            od_value b[4] = {a[0], IL(dims, nd), od_bool(true), od_none()};
            return call_rets(OD_OPID_mean_dim, b, 4, false, 1, s, err);
        }
        od_value b[2] = {a[0], a[1]};
        return call_rets(nd == 2 ? OD_OPID__adaptive_avg_pool2d : OD_OPID__adaptive_avg_pool3d, b, 2, false, 1, s, err);
    }
    default: return od_error_set(err, OD_EINTERNAL, "od_cia_pool: not a pooling composite");
    }
}
