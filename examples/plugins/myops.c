/* myops.c — an example opdispatchd plugin: a custom operator with a CPU
 * kernel, a CUDA kernel (where the server has CUDA) and a Meta kernel.
 *
 *   myops::fused_gelu_mul(Tensor self, Tensor other) -> Tensor
 *       gelu(self) * other, elementwise; self and other of one shape and one
 *       floating dtype (float32 or float64 on CPU).
 *
 * Build and load (the Makefile builds it as build/plugins/libmyops.so):
 *   cc -shared -fPIC -Idispatcher -Ikernels examples/plugins/myops.c -o libmyops.so
 *   opdispatchd --plugin ./libmyops.so
 *   curl -X POST $OD/v1/ops/myops::fused_gelu_mul -d '{"args": [x, y]}' ...
 *
 * Invariants: everything goes through the public registration API; the
 * kernels follow the boxed convention (args borrowed, rets new on OD_OK,
 * nrets 0 on error); inputs of any strides are read through contiguous
 * copies made by aten::contiguous, so the loop is a plain one.
 */
#include <math.h>
#include <string.h>

#include "od_dispatch.h"
#include "od_plugin.h"
#include "od_tensor.h"

/* The checks every kernel shares (the Meta kernel is only these). */
static od_status check(const od_stack *s, od_error *err)
{
    if (s->nargs != 2 || s->args[0].tag != OD_T_TENSOR || s->args[1].tag != OD_T_TENSOR)
        return od_error_set(err, OD_EINVAL, "fused_gelu_mul(): expected two tensors");
    const od_tensor *a = s->args[0].u.t, *b = s->args[1].u.t;
    if (a->ndim != b->ndim || memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim))
        return od_error_set(err, OD_EMISMATCH, "fused_gelu_mul(): self and other must have one shape");
    if (a->dtype != b->dtype || (a->dtype != OD_FLOAT32 && a->dtype != OD_FLOAT64 &&
                                 a->dtype != OD_FLOAT16 && a->dtype != OD_BFLOAT16))
        return od_error_set(err, OD_EMISMATCH,
                            "fused_gelu_mul(): self and other must share one floating dtype, got %s and %s",
                            od_dtype_name(a->dtype), od_dtype_name(b->dtype));
    if (!od_device_eq(a->device, b->device))
        return od_error_set(err, OD_EMISMATCH, "fused_gelu_mul(): self and other must be on one device");
    return OD_OK;
}

static od_status meta_kernel(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ctx, (void)op, (void)ks;
    od_status st = check(s, err);
    const od_tensor *a = s->args[0].u.t;
    od_tensor *out = NULL;
    if (st == OD_OK)
        st = od_tensor_empty(a->sizes, a->ndim, a->dtype, a->device, &out, err);
    if (st == OD_OK) {
        s->rets[0] = od_tensor_v(out);
        s->nrets = 1;
    }
    return st;
}

/* Calls a built-in operator by name on args (borrowed); *out new. */
static od_status call(const char *name, od_value *args, int n, od_tensor **out, od_error *err)
{
    const od_op *op = od_op_find(name);
    if (!op)
        return od_error_set(err, OD_EINTERNAL, "fused_gelu_mul: no operator %s", name);
    od_stack s;
    od_stack_init(&s, args, n);
    od_status st = od_call(op, &s, err);
    if (st == OD_OK)
        *out = s.rets[0].u.t;
    return st;
}

static od_status contiguous(od_tensor *t, od_tensor **out, od_error *err)
{
    od_value args[2] = {od_tensor_v(t), od_int(0)};
    return call("aten::contiguous", args, 2, out, err);
}

static od_status cpu_kernel(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ctx, (void)op, (void)ks;
    od_status st = check(s, err);
    if (st != OD_OK)
        return st;
    od_tensor *a = NULL, *b = NULL, *out = NULL;
    const od_tensor *x = s->args[0].u.t;
    if (x->dtype != OD_FLOAT32 && x->dtype != OD_FLOAT64)
        return od_error_set(err, OD_EUNSUPPORTED, "\"fused_gelu_mul\" not implemented for '%s' on CPU",
                            od_dtype_scalar_name(x->dtype));
    if ((st = contiguous(s->args[0].u.t, &a, err)) || (st = contiguous(s->args[1].u.t, &b, err)) ||
        (st = od_tensor_empty(x->sizes, x->ndim, x->dtype, x->device, &out, err)))
        goto done;
    int64_t n = od_tensor_numel(out);
    if (x->dtype == OD_FLOAT32) {
        const float *pa = od_tensor_data(a), *pb = od_tensor_data(b);
        float *po = od_tensor_data(out);
        for (int64_t i = 0; i < n; i++)
            po[i] = 0.5f * pa[i] * (1.0f + erff(pa[i] * 0.70710678f)) * pb[i];
    } else {
        const double *pa = od_tensor_data(a), *pb = od_tensor_data(b);
        double *po = od_tensor_data(out);
        for (int64_t i = 0; i < n; i++)
            po[i] = 0.5 * pa[i] * (1.0 + erf(pa[i] * 0.70710678118654752)) * pb[i];
    }
    s->rets[0] = od_tensor_v(out);
    s->nrets = 1;
    out = NULL;
done:
    od_tensor_release(a);
    od_tensor_release(b);
    od_tensor_release(out);
    return st;
}

/* CUDA: the built-in CUDA kernels of gelu and mul, called through the
 * dispatcher (the tensors are on the device, so their CUDA kernels run). */
static od_status cuda_kernel(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ctx, (void)op, (void)ks;
    od_status st = check(s, err);
    if (st != OD_OK)
        return st;
    od_tensor *g = NULL, *out = NULL;
    od_value ga[2] = {s->args[0], od_str("none")};
    if ((st = call("aten::gelu", ga, 2, &g, err)) != OD_OK)
        return st;
    od_value ma[2] = {od_tensor_v(g), s->args[1]};
    st = call("aten::mul.Tensor", ma, 2, &out, err);
    od_tensor_release(g);
    if (st == OD_OK) {
        s->rets[0] = od_tensor_v(out);
        s->nrets = 1;
    }
    return st;
}

OD_PLUGIN_DECLARE_ABI();

od_status od_plugin_init(int api_version, od_error *err);

od_status od_plugin_init(int api_version, od_error *err)
{
    if (api_version != OD_PLUGIN_API_VERSION)
        return od_error_set(err, OD_EINVAL, "myops was built for plugin API %d, the server has %d",
                            OD_PLUGIN_API_VERSION, api_version);
    od_op *op = NULL;
    od_status st = od_def("myops::fused_gelu_mul(Tensor self, Tensor other) -> Tensor", __FILE__, __LINE__, &op,
                          err);
    if (st == OD_OK)
        st = od_impl(op, OD_KEY_CPU, cpu_kernel, NULL, "myops_cpu_kernel", __FILE__, __LINE__, err);
    if (st == OD_OK)
        st = od_impl(op, OD_KEY_CUDA, cuda_kernel, NULL, "myops_cuda_kernel", __FILE__, __LINE__, err);
    if (st == OD_OK)
        st = od_impl(op, OD_KEY_Meta, meta_kernel, NULL, "myops_meta_kernel", __FILE__, __LINE__, err);
    return st;
}
