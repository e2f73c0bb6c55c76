/* util.c — from boxed arguments to launcher arguments: the call's device,
 * elementwise iterators (broadcasting, CPU scalars, coalescing), device-side
 * copies and contiguous copies, output allocation.
 *
 * Invariants: an od_cu_iter built here has operand 0 = the output, every
 * input broadcast to the output's shape (stride 0 on broadcast dims), dims
 * ordered outermost first by the output's strides, size-1 dims removed and
 * adjacent dims merged when they are one run for every operand. Nothing
 * here synchronizes except od_cu_run_elementwise.
 */
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"
#include "od_autograd.h"
#include "od_half.h"
#include "od_math.h"

/* cuda_kernels.h mirrors od_dtype and OD_MAX_DIMS. */
_Static_assert((int)OD_CU_BOOL == (int)OD_BOOL && (int)OD_CU_UINT8 == (int)OD_UINT8 &&
                   (int)OD_CU_INT8 == (int)OD_INT8 && (int)OD_CU_INT16 == (int)OD_INT16 &&
                   (int)OD_CU_INT32 == (int)OD_INT32 && (int)OD_CU_INT64 == (int)OD_INT64 &&
                   (int)OD_CU_FLOAT16 == (int)OD_FLOAT16 && (int)OD_CU_BFLOAT16 == (int)OD_BFLOAT16 &&
                   (int)OD_CU_FLOAT32 == (int)OD_FLOAT32 && (int)OD_CU_FLOAT64 == (int)OD_FLOAT64 &&
                   (int)OD_CU_NUM_DTYPES == (int)OD_NUM_DTYPES,
               "OD_CU_* dtype codes must equal od_dtype");
_Static_assert(OD_CU_MAX_DIMS == OD_MAX_DIMS, "OD_CU_MAX_DIMS must equal OD_MAX_DIMS");
_Static_assert((int)OD_CU_RED_SUM == (int)OD_RED_SUM && (int)OD_CU_RED_MEAN == (int)OD_RED_MEAN &&
                   (int)OD_CU_RED_AMAX == (int)OD_RED_AMAX && (int)OD_CU_RED_AMIN == (int)OD_RED_AMIN &&
                   (int)OD_CU_RED_ARGMAX == (int)OD_RED_ARGMAX && (int)OD_CU_RED_VAR == (int)OD_RED_VAR,
               "od_cu_red must mirror od_reduce_kind");

const char *od_cu_op_name(const od_op *op) { return op ? od_op_name(op) : "op"; }

static bool is_cpu_scalar(const od_tensor *t)
{
    return t->ndim == 0 && t->device.type == OD_DEV_CPU;
}

od_status od_cu_call_device(const od_op *op, const od_stack *s, bool allow_cpu_scalars, int *device,
                            od_error *err)
{
    const od_tensor *lead = NULL;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < s->nargs; i++) {
            const od_value *v = &s->args[i];
            od_tensor *const *ts;
            size_t n;
            if (v->tag == OD_T_TENSOR) {
                ts = &v->u.t;
                n = 1;
            } else if (v->tag == OD_T_TENSOR_LIST) {
                ts = v->u.list.items;
                n = v->u.list.n;
            } else {
                continue;
            }
            for (size_t j = 0; j < n; j++) {
                const od_tensor *t = ts[j];
                if (!t)
                    continue;
                if (pass == 0) {
                    if (!lead && t->device.type == OD_DEV_CUDA)
                        lead = t;
                    continue;
                }
                if (od_device_eq(t->device, lead->device) || (allow_cpu_scalars && is_cpu_scalar(t)))
                    continue;
                char a[32], b[32];
                od_device_print(lead->device, a, sizeof a);
                od_device_print(t->device, b, sizeof b);
                return od_error_set(err, OD_EMISMATCH,
                                    "%s: Expected all tensors to be on the same device, but found at "
                                    "least two devices, %s and %s!",
                                    od_cu_op_name(op), a, b);
            }
        }
        if (pass == 0 && !lead)
            return od_error_set(err, OD_EINTERNAL, "%s: the CUDA kernel got no CUDA tensor",
                                od_cu_op_name(op));
    }
    *device = lead->device.index;
    return OD_OK;
}

/* ---- iterators ------------------------------------------------------------------------------- */

void od_cu_iter_init(od_cu_iter *it, const od_tensor *out)
{
    memset(it, 0, sizeof *it);
    it->ndim = out->ndim;
    it->numel = od_tensor_numel(out);
    memcpy(it->sizes, out->sizes, sizeof(int64_t) * (size_t)out->ndim);
    it->nops = 1;
    it->op[0].data = od_tensor_data(out);
    it->op[0].dtype = out->dtype;
    memcpy(it->op[0].strides, out->strides, sizeof(int64_t) * (size_t)out->ndim);
}

/* Reads element 0 of a CPU tensor as both constant forms. */
static void const_of_cpu(const od_tensor *t, od_cu_operand *o)
{
    const void *p = od_tensor_data(t);
    double d = 0;
    int64_t i = 0;
    switch (t->dtype) {
    case OD_BOOL: i = *(const bool *)p; d = (double)i; break;
    case OD_UINT8: i = *(const uint8_t *)p; d = (double)i; break;
    case OD_INT8: i = *(const int8_t *)p; d = (double)i; break;
    case OD_INT16: i = *(const int16_t *)p; d = (double)i; break;
    case OD_INT32: i = *(const int32_t *)p; d = (double)i; break;
    case OD_INT64: i = *(const int64_t *)p; d = (double)i; break;
    case OD_FLOAT16: d = od_half_to_float(*(const uint16_t *)p); i = od_double_to_i64(d); break;
    case OD_BFLOAT16: d = od_bf16_to_float(*(const uint16_t *)p); i = od_double_to_i64(d); break;
    case OD_FLOAT32: d = *(const float *)p; i = od_double_to_i64(d); break;
    default: d = *(const double *)p; i = od_double_to_i64(d); break;
    }
    o->is_const = 1;
    o->dtype = t->dtype;
    o->cd = d;
    o->ci = i;
}

od_status od_cu_iter_add_tensor(od_cu_iter *it, const od_tensor *t, od_error *err)
{
    if (it->nops >= OD_CU_MAX_OPERANDS)
        return od_error_set(err, OD_EINTERNAL, "CUDA iterator: too many operands");
    od_cu_operand *o = &it->op[it->nops];
    memset(o, 0, sizeof *o);
    if (t->device.type == OD_DEV_CPU) {
        if (t->ndim != 0)
            return od_error_set(err, OD_EINTERNAL, "CUDA iterator: a CPU operand must be 0-dim");
        const_of_cpu(t, o);
        it->nops++;
        return OD_OK;
    }
    if (t->ndim > it->ndim)
        return od_error_set(err, OD_EINTERNAL, "CUDA iterator: operand of rank %d for a rank-%d result",
                            t->ndim, it->ndim);
    o->data = od_tensor_data(t);
    o->dtype = t->dtype;
    int lead = it->ndim - t->ndim;
    for (int d = 0; d < it->ndim; d++) {
        if (d < lead) {
            o->strides[d] = 0;
            continue;
        }
        int64_t sz = t->sizes[d - lead];
        if (sz == it->sizes[d])
            o->strides[d] = sz == 1 ? 0 : t->strides[d - lead];
        else if (sz == 1)
            o->strides[d] = 0;
        else
            return od_error_set(err, OD_EINTERNAL,
                                "CUDA iterator: operand size %lld does not broadcast to %lld at dim %d",
                                (long long)sz, (long long)it->sizes[d], d);
    }
    it->nops++;
    return OD_OK;
}

void od_cu_iter_add_scalar(od_cu_iter *it, const od_value *v)
{
    od_cu_operand *o = &it->op[it->nops++];
    memset(o, 0, sizeof *o);
    o->is_const = 1;
    switch (v->tag) {
    case OD_T_BOOL: o->ci = v->u.b; o->cd = v->u.b; o->dtype = OD_BOOL; break;
    case OD_T_INT: o->ci = v->u.i; o->cd = (double)v->u.i; o->dtype = OD_INT64; break;
    default: o->cd = v->u.d; o->ci = od_double_to_i64(v->u.d); o->dtype = OD_FLOAT64; break;
    }
}

void od_cu_iter_coalesce(od_cu_iter *it)
{
    /* Drop size-1 dims (every stride there is irrelevant). */
    int nd = 0;
    for (int d = 0; d < it->ndim; d++) {
        if (it->sizes[d] == 1)
            continue;
        it->sizes[nd] = it->sizes[d];
        for (int k = 0; k < it->nops; k++)
            it->op[k].strides[nd] = it->op[k].strides[d];
        nd++;
    }
    it->ndim = nd;
    /* Order dims by the output's strides, largest first (stable), so writes
     * into a permuted view walk memory forwards. */
    for (int i = 1; i < nd; i++) {
        for (int j = i; j > 0; j--) {
            int64_t a = it->op[0].strides[j - 1], b = it->op[0].strides[j];
            if (a < 0)
                a = -a;
            if (b < 0)
                b = -b;
            if (a >= b)
                break;
            int64_t t = it->sizes[j];
            it->sizes[j] = it->sizes[j - 1];
            it->sizes[j - 1] = t;
            for (int k = 0; k < it->nops; k++) {
                t = it->op[k].strides[j];
                it->op[k].strides[j] = it->op[k].strides[j - 1];
                it->op[k].strides[j - 1] = t;
            }
        }
    }
    /* Merge outer dim d-1 into inner dim d when every operand steps through
     * them as one run. */
    int w = 0;
    for (int d = 1; d < nd; d++) {
        bool merge = true;
        for (int k = 0; k < it->nops && merge; k++)
            if (!it->op[k].is_const)
                merge = it->op[k].strides[w] == it->op[k].strides[d] * it->sizes[d];
        if (merge) {
            it->sizes[w] *= it->sizes[d];
            for (int k = 0; k < it->nops; k++)
                it->op[k].strides[w] = it->op[k].strides[d];
        } else {
            w++;
            it->sizes[w] = it->sizes[d];
            for (int k = 0; k < it->nops; k++)
                it->op[k].strides[w] = it->op[k].strides[d];
        }
    }
    it->ndim = nd > 0 ? w + 1 : 0;
}

/* A constant operand as a value of dt, the computation's dtype: ATen casts
 * every input to the common dtype before computing (uint8 0 >= 2^31 is
 * 0 >= 0 there; 2^31 as uint8 is a divisor of 0), with the CPU kernels'
 * conversions (kernels/cpu/iter.h's OD_CPU_FROM_*). */
static void const_to_dtype(od_cu_operand *o, od_dtype dt)
{
    bool fl = od_dtype_is_floating((od_dtype)o->dtype);
    double d = o->cd;
    int64_t i = o->ci;
    switch (dt) {
    case OD_BOOL: i = fl ? d != 0 : i != 0; d = (double)i; break;
    case OD_UINT8: i = (uint8_t)(fl ? od_math_f64_to_i32(d) : i); d = (double)i; break;
    case OD_INT8: i = (int8_t)(fl ? od_math_f64_to_i32(d) : i); d = (double)i; break;
    case OD_INT16: i = (int16_t)(fl ? od_math_f64_to_i32(d) : i); d = (double)i; break;
    case OD_INT32: i = fl ? od_math_f64_to_i32(d) : (int32_t)i; d = (double)i; break;
    case OD_INT64: i = fl ? od_double_to_i64(d) : i; d = (double)i; break;
    case OD_FLOAT16: d = od_half_to_float(fl ? od_double_to_half(d) : od_float_to_half((float)i)); break;
    case OD_BFLOAT16: d = od_bf16_to_float(fl ? od_double_to_bf16(d) : od_float_to_bf16((float)i)); break;
    case OD_FLOAT32: d = fl ? (float)d : (float)i; break;
    default: d = fl ? d : (double)i; break;
    }
    if (od_dtype_is_floating(dt))
        i = od_double_to_i64(d);
    o->cd = d;
    o->ci = i;
    o->dtype = dt;
}

od_status od_cu_run_elementwise(const od_cu_env *env, od_cu_iter *it, od_cu_ew op, od_dtype compute,
                                double alpha_d, int64_t alpha_i, const char *flag_what,
                                od_error *err)
{
    return od_cu_run_elementwise_p(env, it, op, compute, alpha_d, alpha_i, NULL, NULL, flag_what, err);
}

od_status od_cu_run_elementwise_p(const od_cu_env *env, od_cu_iter *it, od_cu_ew op, od_dtype compute,
                                  double alpha_d, int64_t alpha_i, const double *prm_d,
                                  const int64_t *prm_i, const char *flag_what, od_error *err)
{
    if (it->numel == 0)
        return OD_OK;
    if (!od_cu_ew_supported(op, compute))
        return od_error_set(err, OD_EUNSUPPORTED, "%s: no CUDA kernel for dtype %s",
                            flag_what ? flag_what : "elementwise op", od_dtype_name(compute));
    for (int k = 1; k < it->nops; k++)
        if (it->op[k].is_const)
            const_to_dtype(&it->op[k], compute);
    od_cu_iter_coalesce(it);
    od_cu_ew_args a = {op, compute, alpha_d, alpha_i, env->sm_count, NULL, {0}, {0}};
    for (int k = 0; k < OD_CU_EW_MAX_PARAMS; k++) {
        a.prm_d[k] = prm_d ? prm_d[k] : 0.0;
        a.prm_i[k] = prm_i ? prm_i[k] : 0;
    }
    od_status st;
    if (flag_what && (st = od_cu_flag(env, &a.flag, err)))
        return st;
    if ((st = od_cu_status(od_cu_elementwise(it, &a, env->stream), "elementwise kernel launch", err)) ||
        (st = od_cu_finish(env, "elementwise kernel", err)))
        return st;
    if (flag_what && a.flag[0])
        return od_error_set(err, OD_EINVAL, "ZeroDivisionError");
    return OD_OK;
}

od_status od_cu_copy_same_device(const od_cu_env *env, od_tensor *dst, const od_tensor *src,
                                 od_error *err)
{
    int64_t n = od_tensor_numel(dst);
    if (n == 0)
        return OD_OK;
    if (dst->dtype == src->dtype && od_tensor_is_contiguous(dst) && od_tensor_is_contiguous(src) &&
        od_tensor_numel(src) == n) {
        if (od_tensor_data(dst) == od_tensor_data(src))
            return OD_OK;
        return od_cu_status(cudaMemcpyAsync(od_tensor_data(dst), od_tensor_data(src),
                                            od_tensor_nbytes(dst), cudaMemcpyDeviceToDevice,
                                            env->stream),
                            "cudaMemcpyAsync (device to device)", err);
    }
    od_cu_iter it;
    od_cu_iter_init(&it, dst);
    od_status st = od_cu_iter_add_tensor(&it, src, err);
    if (st)
        return st;
    od_cu_iter_coalesce(&it);
    /* Compute in the source's family: the copy is then one cast. */
    od_cu_ew_args a = {OD_CU_EW_COPY, src->dtype, 0, 0, env->sm_count, NULL, {0}, {0}};
    return od_cu_status(od_cu_elementwise(&it, &a, env->stream), "copy kernel launch", err);
}

od_status od_cu_contiguous(const od_cu_env *env, od_tensor *t, od_tensor **out, od_error *err)
{
    if (od_tensor_is_contiguous(t)) {
        od_tensor_retain(t);
        *out = t;
        return OD_OK;
    }
    od_tensor *c = NULL;
    od_status st = od_tensor_empty(t->sizes, t->ndim, t->dtype, t->device, &c, err);
    if (st)
        return st;
    if ((st = od_cu_copy_same_device(env, c, t, err))) {
        od_tensor_release(c);
        return st;
    }
    *out = c;
    return OD_OK;
}

od_status od_cu_outputs(od_opid id, const od_stack *s, int device, od_tensor **outs, int *nouts,
                        od_error *err)
{
    od_shape_fn fn = od_builtin_shape_fn(id);
    if (!fn)
        return od_error_set(err, OD_EINTERNAL, "built-in %d has no shape function", (int)id);
    od_out_spec specs[OD_MAX_RETURNS];
    int n = 0;
    od_status st = fn(id, s, specs, &n, err);
    if (st)
        return st;
    for (int i = 0; i < n; i++)
        if (specs[i].alias_of < 0) {
            specs[i].device.type = OD_DEV_CUDA;
            specs[i].device.index = device;
        }
    if ((st = od_alloc_outputs(s, specs, n, outs, err)))
        return st;
    *nouts = n;
    return OD_OK;
}

void od_cu_return(od_stack *s, od_tensor **outs, int n)
{
    for (int i = 0; i < n; i++)
        s->rets[i] = od_tensor_v(outs[i]);
    s->nrets = n;
}

od_status od_cu_on_host(od_opid id, od_value *args, int n, int device, od_stack *s, od_error *err)
{
    enum { MAX_ARGS = 16 };
    od_tensor *host[MAX_ARGS] = {0};
    od_status st = OD_OK;
    if (n > MAX_ARGS)
        return od_error_set(err, OD_EINTERNAL, "od_cu_on_host: %d arguments (at most %d)", n, MAX_ARGS);
    od_tls prev = od_no_grad_enter();
    od_device cpu = {OD_DEV_CPU, 0}, dev = {OD_DEV_CUDA, device};
    for (int i = 0; i < n; i++)
        if (args[i].tag == OD_T_TENSOR && args[i].u.t) {
            if ((st = od_to_device(args[i].u.t, cpu, &host[i], err)))
                goto done;
            args[i] = od_tensor_v(host[i]);
        }
    od_stack r;
    if ((st = od_call_builtin(id, args, n, &r, err)))
        goto done;
    int k = 0;
    for (; k < r.nrets; k++) {
        od_tensor *d = NULL;
        if ((st = od_to_device(r.rets[k].u.t, dev, &d, err)))
            break;
        s->rets[k] = od_tensor_v(d);
    }
    if (st) {
        for (int i = 0; i < k; i++)
            od_tensor_release(s->rets[i].u.t);
        k = 0;
    }
    s->nrets = k;
    od_stack_release_rets(&r);
done:
    od_tls_restore(&prev);
    for (int i = 0; i < n; i++)
        od_tensor_release(host[i]);
    return st;
}
