/* util.c — calls through the dispatcher and argument readers shared by the
 * composite kernels.
 *
 * Invariants: the wrappers call through od_call_builtin1, which leaves
 * nothing allocated on error and checks that the callee really returned a
 * tensor (a kernel bug becomes OD_EINTERNAL, not a crash). The argument
 * readers never retain: what they hand out is
 * borrowed from the caller's stack. Messages follow PyTorch's argument
 * parser: "<op>(): argument '<name>' must be <type>, not <got>".
 */
#include <limits.h>
#include <stdarg.h>
#include <string.h>

#include "composite.h"

od_status od_cx_view(od_tensor *t, const int64_t *sizes, int n, od_tensor **out, od_error *err)
{
    od_value a[2] = {od_tensor_v(t), od_list_v(OD_T_INT_LIST, (void *)sizes, (size_t)n)};
    return od_call_builtin1(OD_OPID_view, a, 2, out, err);
}

od_status od_cx_reshape(od_tensor *t, const int64_t *sizes, int n, od_tensor **out, od_error *err)
{
    od_value a[2] = {od_tensor_v(t), od_list_v(OD_T_INT_LIST, (void *)sizes, (size_t)n)};
    return od_call_builtin1(OD_OPID_reshape, a, 2, out, err);
}

od_status od_cx_expand(od_tensor *t, const int64_t *sizes, int n, od_tensor **out, od_error *err)
{
    od_value a[3] = {od_tensor_v(t), od_list_v(OD_T_INT_LIST, (void *)sizes, (size_t)n),
                     od_bool(false)};
    return od_call_builtin1(OD_OPID_expand, a, 3, out, err);
}

od_status od_cx_unsqueeze(od_tensor *t, int64_t dim, od_tensor **out, od_error *err)
{
    od_value a[2] = {od_tensor_v(t), od_int(dim)};
    return od_call_builtin1(OD_OPID_unsqueeze, a, 2, out, err);
}

od_status od_cx_t(od_tensor *t, od_tensor **out, od_error *err)
{
    od_value a[1] = {od_tensor_v(t)};
    return od_call_builtin1(OD_OPID_t, a, 1, out, err);
}

od_status od_cx_mm(od_tensor *a, od_tensor *b, od_tensor **out, od_error *err)
{
    od_value v[2] = {od_tensor_v(a), od_tensor_v(b)};
    return od_call_builtin1(OD_OPID_mm, v, 2, out, err);
}

od_status od_cx_clone(od_tensor *t, od_memory_format mf, od_tensor **out, od_error *err)
{
    od_value a[2] = {od_tensor_v(t), od_int(mf)};
    return od_call_builtin1(OD_OPID_clone, a, 2, out, err);
}

od_status od_cx_to_dtype_copy(od_tensor *t, od_dtype dtype, od_tensor **out, od_error *err)
{
    od_value a[7] = {od_tensor_v(t), od_dtype_v(dtype), od_none(), od_none(),
                     od_none(),      od_bool(false),    od_none()};
    return od_call_builtin1(OD_OPID__to_copy, a, 7, out, err);
}

/* ------------------------------------------------------------ arguments */

static const char *arg_name(const od_op *op, int i)
{
    const od_schema *sc = od_op_schema(op);
    return i < sc->nargs && sc->args[i].name ? sc->args[i].name : "?";
}

static od_status bad_arg(const od_op *op, const od_stack *s, int i, const char *want, od_error *err)
{
    const char *got = i < s->nargs ? od_tag_name(s->args[i].tag) : "nothing";
    if (i < s->nargs && s->args[i].tag == OD_T_TENSOR && !s->args[i].u.t)
        got = "a null tensor";
    return od_error_set(err, OD_EINVAL, "%s(): argument '%s' (position %d) must be %s, not %s",
                        od_op_schema(op)->name, arg_name(op, i), i + 1, want, got);
}

static const od_value *arg_at(const od_stack *s, int i)
{
    return i >= 0 && i < s->nargs ? &s->args[i] : NULL;
}

od_status od_cx_arg_tensor(const od_op *op, const od_stack *s, int i, od_tensor **t, od_error *err)
{
    const od_value *v = arg_at(s, i);
    if (!v || v->tag != OD_T_TENSOR || !v->u.t)
        return bad_arg(op, s, i, "Tensor", err);
    *t = v->u.t;
    return OD_OK;
}

od_status od_cx_arg_opt_tensor(const od_op *op, const od_stack *s, int i, od_tensor **t,
                               od_error *err)
{
    const od_value *v = arg_at(s, i);
    if (v && v->tag == OD_T_NONE) {
        *t = NULL;
        return OD_OK;
    }
    if (!v || v->tag != OD_T_TENSOR || !v->u.t)
        return bad_arg(op, s, i, "Tensor or None", err);
    *t = v->u.t;
    return OD_OK;
}

od_status od_cx_arg_int(const od_op *op, const od_stack *s, int i, int64_t *out, od_error *err)
{
    const od_value *v = arg_at(s, i);
    if (!v || v->tag != OD_T_INT)
        return bad_arg(op, s, i, "int", err);
    *out = v->u.i;
    return OD_OK;
}

od_status od_cx_arg_opt_int(const od_op *op, const od_stack *s, int i, bool *present, int64_t *out,
                            od_error *err)
{
    const od_value *v = arg_at(s, i);
    if (v && v->tag == OD_T_NONE) {
        *present = false;
        return OD_OK;
    }
    if (!v || v->tag != OD_T_INT)
        return bad_arg(op, s, i, "int or None", err);
    *present = true;
    *out = v->u.i;
    return OD_OK;
}

od_status od_cx_arg_bool(const od_op *op, const od_stack *s, int i, bool *out, od_error *err)
{
    const od_value *v = arg_at(s, i);
    if (!v || v->tag != OD_T_BOOL)
        return bad_arg(op, s, i, "bool", err);
    *out = v->u.b;
    return OD_OK;
}

od_status od_cx_arg_int_list(const od_op *op, const od_stack *s, int i, const int64_t **items,
                             int *n, od_error *err)
{
    const od_value *v = arg_at(s, i);
    if (!v || v->tag != OD_T_INT_LIST || v->u.list.n > INT_MAX)
        return bad_arg(op, s, i, "a list of ints", err);
    *items = v->u.list.items;
    *n = (int)v->u.list.n;
    return OD_OK;
}

od_status od_cx_arg_tensor_list(const od_op *op, const od_stack *s, int i, od_tensor ***items,
                                int *n, od_error *err)
{
    const od_value *v = arg_at(s, i);
    if (!v || v->tag != OD_T_TENSOR_LIST || v->u.list.n > INT_MAX)
        return bad_arg(op, s, i, "a list of Tensors", err);
    od_tensor **ts = v->u.list.items;
    for (size_t j = 0; j < v->u.list.n; j++)
        if (!ts[j])
            return od_error_set(err, OD_EINVAL,
                                "%s(): argument '%s' (position %d) must be a list of Tensors, "
                                "but element %zu is None",
                                od_op_schema(op)->name, arg_name(op, i), i + 1, j);
    *items = ts;
    *n = (int)v->u.list.n;
    return OD_OK;
}

od_status od_cx_arg_opt_dtype(const od_op *op, const od_stack *s, int i, bool *present,
                              od_dtype *dt, od_error *err)
{
    const od_value *v = arg_at(s, i);
    if (v && v->tag == OD_T_NONE) {
        *present = false;
        return OD_OK;
    }
    if (v && v->tag == OD_T_DTYPE && (unsigned)v->u.dtype < OD_NUM_DTYPES) {
        *present = true;
        *dt = v->u.dtype;
        return OD_OK;
    }
    if (v && v->tag == OD_T_STRING && v->u.s) {
        od_dtype d = od_dtype_from_name(v->u.s);
        if (d == OD_NUM_DTYPES)
            return od_error_set(err, OD_EINVAL, "%s(): argument '%s' (position %d): unknown dtype '%s'",
                                od_op_schema(op)->name, arg_name(op, i), i + 1, v->u.s);
        *present = true;
        *dt = d;
        return OD_OK;
    }
    return bad_arg(op, s, i, "torch.dtype or None", err);
}

od_status od_cx_arg_opt_device(const od_op *op, const od_stack *s, int i, bool *present,
                               od_device *d, od_error *err)
{
    const od_value *v = arg_at(s, i);
    if (v && v->tag == OD_T_NONE) {
        *present = false;
        return OD_OK;
    }
    if (v && v->tag == OD_T_DEVICE && (unsigned)v->u.device.type < OD_NUM_DEVICE_TYPES) {
        *present = true;
        *d = v->u.device;
        return OD_OK;
    }
    if (v && v->tag == OD_T_STRING && v->u.s) {
        od_status st = od_device_parse(v->u.s, d, err);
        if (st) {
            od_error_prefix(err, "%s(): argument '%s' (position %d)", od_op_schema(op)->name,
                            arg_name(op, i), i + 1);
            return st;
        }
        *present = true;
        return OD_OK;
    }
    return bad_arg(op, s, i, "torch.device or None", err);
}

od_status od_cx_check_layout(const od_op *op, const od_stack *s, int i, od_error *err)
{
    const od_value *v = arg_at(s, i);
    if (v && (v->tag == OD_T_NONE || (v->tag == OD_T_INT && v->u.i == 0) ||
              (v->tag == OD_T_STRING && v->u.s &&
               (!strcmp(v->u.s, "strided") || !strcmp(v->u.s, "torch.strided")))))
        return OD_OK;
    if (v && (v->tag == OD_T_INT || v->tag == OD_T_STRING))
        return od_error_set(err, OD_EUNSUPPORTED,
                            "%s(): argument '%s' (position %d): only the strided layout "
                            "(torch.strided) is supported",
                            od_op_schema(op)->name, arg_name(op, i), i + 1);
    return bad_arg(op, s, i, "torch.layout or None", err);
}

od_status od_cx_check_pin_memory(const od_op *op, const od_stack *s, int i, od_error *err)
{
    const od_value *v = arg_at(s, i);
    if (v && (v->tag == OD_T_NONE || v->tag == OD_T_BOOL))
        return OD_OK;
    return bad_arg(op, s, i, "bool or None", err);
}

od_status od_cx_arg_memory_format(const od_op *op, const od_stack *s, int i, int *mf,
                                  od_error *err)
{
    const od_value *v = arg_at(s, i);
    int code = v ? od_memory_format_of_value(v) : -2;
    if (code == -2)
        return bad_arg(op, s, i, "torch.memory_format or None", err);
    if (code == -1)
        return od_error_set(err, OD_EINVAL, "%s(): argument '%s' (position %d): unknown memory format",
                            od_op_schema(op)->name, arg_name(op, i), i + 1);
    *mf = code;
    return OD_OK;
}

int od_cx_arg_index(const od_op *op, const char *name)
{
    const od_schema *sc = od_op_schema(op);
    for (int i = 0; i < sc->nargs; i++)
        if (sc->args[i].name && !strcmp(sc->args[i].name, name))
            return i;
    return -1;
}

/* ---- scopes ---- */

od_tensor *od_cx_call(od_cx_scope *sc, od_opid id, int nargs, ...)
{
    if (sc->st)
        return NULL;
    od_value a[OD_MAX_ARGS];
    va_list ap;
    va_start(ap, nargs);
    for (int i = 0; i < nargs && i < OD_MAX_ARGS; i++)
        a[i] = va_arg(ap, od_value);
    va_end(ap);
    for (int i = 0; i < nargs; i++)
        if (a[i].tag == OD_T_TENSOR && !a[i].u.t) { /* only ever the result of a call that failed */
            sc->st = od_error_set(sc->err, OD_EINTERNAL, "a composite kernel passed a missing tensor");
            return NULL;
        }
    if (nargs > OD_MAX_ARGS || sc->n == OD_CX_SCOPE_MAX) {
        sc->st = od_error_set(sc->err, OD_EINTERNAL, "a composite kernel made too many calls");
        return NULL;
    }
    od_tensor *out = NULL;
    if ((sc->st = od_call_builtin1(id, a, nargs, &out, sc->err)))
        return NULL;
    sc->tmp[sc->n++] = out;
    return out;
}

od_tensor *od_cx_keep(od_tensor *t)
{
    if (t)
        od_tensor_retain(t);
    return t;
}

od_status od_cx_scope_end(od_cx_scope *sc)
{
    for (int i = 0; i < sc->n; i++)
        od_tensor_release(sc->tmp[i]);
    sc->n = 0;
    return sc->st;
}

od_tensor *od_cx_cast(od_cx_scope *sc, od_tensor *t, od_dtype dtype)
{
    return od_cx_call(sc, OD_OPID__to_copy, 7, od_tensor_v(t), od_dtype_v(dtype), od_none(), od_none(), od_none(),
                      od_bool(false), od_none());
}

od_status od_cx_scope_return1(od_cx_scope *sc, od_stack *s, od_tensor *t)
{
    t = od_cx_keep(t);
    od_status st = od_cx_scope_end(sc);
    if (st) {
        od_tensor_release(t);
        return st;
    }
    return od_cx_return1(s, t);
}
