/* shape_factory.c — shape and dtype functions of eye, linspace, logspace,
 * tril_indices and triu_indices, the parsed arguments their kernels share,
 * and the argument check of _local_scalar_dense.
 *
 * Invariants: nothing here touches tensor data or allocates; arguments are
 * borrowed from the boxed stack. The keyword options (dtype, layout, device,
 * pin_memory) go through od_factory_options, as zeros' and arange's do. The
 * checks and messages are ATen 1.13's (RangeFactories.cpp, TensorFactories.cpp),
 * in its order: an argument check before the dtype dispatch's refusal, and
 * no Scalar conversion where ATen's kernel converts none (steps of 0).
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "od_shape.h"

static const char *name_of(od_opid id)
{
    const od_op *op = od_builtin(id);
    return op ? od_op_schema(op)->name : "op";
}

static od_status nargs_is(od_opid id, const od_stack *s, int n, od_error *err)
{
    if (s->nargs != n)
        return od_error_set(err, OD_EINVAL, "%s(): expected %d arguments, got %d", name_of(id), n, s->nargs);
    return OD_OK;
}

static od_status int_arg(od_opid id, const od_stack *s, int i, const char *name, int64_t *v, od_error *err)
{
    if (s->args[i].tag != OD_T_INT)
        return od_error_set(err, OD_EINVAL, "%s(): argument '%s' (position %d) must be int, not %s",
                            name_of(id), name, i + 1, od_tag_name(s->args[i].tag));
    *v = s->args[i].u.i;
    return OD_OK;
}

/* ---- eye ------------------------------------------------------------------------------------ */

od_status od_shape_eye(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    int k = id == OD_OPID_eye_m ? 2 : 1;
    int64_t n = 0, m = 0;
    bool has_dt;
    od_dtype dt = OD_DEFAULT_FLOAT;
    od_device dev;
    od_status st;
    if ((st = nargs_is(id, s, k + 4, err)) || (st = int_arg(id, s, 0, "n", &n, err)) ||
        (k == 2 && (st = int_arg(id, s, 1, "m", &m, err))) ||
        (st = od_factory_options(id, s, k, &has_dt, &dt, &dev, err)))
        return st;
    if (!has_dt)
        dt = OD_DEFAULT_FLOAT;
    if (k == 1)
        m = n;
    if (n < 0)
        return od_error_set(err, OD_EINVAL, "n must be greater or equal to 0, got %" PRId64, n);
    if (m < 0)
        return od_error_set(err, OD_EINVAL, "m must be greater or equal to 0, got %" PRId64, m);
    if (dt == OD_BFLOAT16 && dev.type == OD_DEV_CPU) /* eye_out_cpu's dispatch, even for n = 0 */
        return od_error_set(err, OD_EUNSUPPORTED, "\"eye\" not implemented for 'BFloat16'");
    int64_t sz[2] = {n, m};
    od_out_spec_init(&outs[0], dt, dev, sz, 2);
    *nouts = 1;
    return OD_OK;
}

/* ---- linspace, logspace --------------------------------------------------------------------- */

od_status od_linspace_params_of(od_opid id, const od_stack *s, od_linspace_params *p, od_error *err)
{
    bool log = id == OD_OPID_logspace;
    int k = log ? 4 : 3;
    bool has_dt;
    od_status st;
    memset(p, 0, sizeof *p);
    p->log = log;
    if ((st = nargs_is(id, s, k + 4, err)))
        return st;
    for (int i = 0; i < 2; i++)
        if (!od_value_is_number(&s->args[i]))
            return od_error_set(err, OD_EINVAL, "%s(): argument '%s' (position %d) must be Number, not %s",
                                name_of(id), i ? "end" : "start", i + 1, od_tag_name(s->args[i].tag));
    if ((st = int_arg(id, s, 2, "steps", &p->steps, err)))
        return st;
    if (log) {
        if (!od_value_is_number(&s->args[3]) || s->args[3].tag == OD_T_BOOL)
            return od_error_set(err, OD_EINVAL, "%s(): argument 'base' (position 4) must be float, not %s",
                                name_of(id), od_tag_name(s->args[3].tag));
        p->base = od_value_as_double(&s->args[3]);
    }
    if ((st = od_factory_options(id, s, k, &has_dt, &p->dtype, &p->device, err)))
        return st;
    if (!has_dt)
        p->dtype = OD_DEFAULT_FLOAT;
    if (p->steps < 0)
        return od_error_set(err, OD_EINVAL, "number of steps must be non-negative");
    p->start = od_value_as_double(&s->args[0]);
    p->end = od_value_as_double(&s->args[1]);
    if (p->steps == 1) {
        /* ATen fills with start (linspace) or pow(base, start) (logspace):
         * fill_'s conversion check, and no dtype dispatch */
        if (!log)
            return od_scalar_check_fits(&s->args[0], p->dtype, err);
        od_value v = od_double(pow(p->base, p->start));
        return od_scalar_check_fits(&v, p->dtype, err);
    }
    if (p->steps == 0)
        return OD_OK;
    /* ATen's CPU dispatch: linspace takes float16, logspace does not */
    bool cuda = p->device.type == OD_DEV_CUDA;
    if (p->dtype == OD_BOOL || (log && !cuda && p->dtype == OD_FLOAT16))
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s_%s\" not implemented for '%s'", log ? "logspace" : "linspace",
                            cuda ? "cuda" : "cpu", od_dtype_scalar_name(p->dtype));
    if ((st = od_scalar_check_fits(&s->args[0], p->dtype, err)) ||
        (st = od_scalar_check_fits(&s->args[1], p->dtype, err)))
        return st;
    return OD_OK;
}

od_status od_shape_linspace(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_linspace_params p;
    od_status st = od_linspace_params_of(id, s, &p, err);
    if (st)
        return st;
    od_out_spec_init(&outs[0], p.dtype, p.device, &p.steps, 1);
    *nouts = 1;
    return OD_OK;
}

/* ---- tril_indices, triu_indices -------------------------------------------------------------- */

/* int64 arithmetic that wraps as ATen's does at the extremes (offset near
 * INT64_MAX), without C's undefined signed overflow. */
static int64_t wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t wsub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static int64_t wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

/* ATen's get_tril_size: the number of (r, c) with c <= r + offset in a
 * row x col matrix, from the trapezoid and rectangle it splits into. */
static int64_t tril_size(int64_t row, int64_t col, int64_t offset)
{
    if (row == 0 || col == 0)
        return 0;
    int64_t m_first = offset > 0 ? imin(col, wadd(1, offset)) : wadd(row, offset) > 0;
    int64_t m_last = imax(0, imin(col, wadd(row, offset)));
    int64_t n_all = imax(0, imin(row, wadd(row, offset)));
    int64_t n_trap = wadd(wsub(m_last, m_first), 1);
    int64_t prod = wmul(wadd(m_first, m_last), n_trap);
    int64_t size = prod >= 0 ? prod >> 1 : ~(~prod >> 1); /* an arithmetic shift */
    int64_t diff = wsub(n_all, n_trap);
    if (diff > 0)
        size = wadd(size, wmul(diff, col));
    return size;
}

od_status od_tri_indices_params_of(od_opid id, const od_stack *s, od_tri_indices_params *p, od_error *err)
{
    bool has_dt;
    od_status st;
    memset(p, 0, sizeof *p);
    p->upper = id == OD_OPID_triu_indices;
    if ((st = nargs_is(id, s, 7, err)) || (st = int_arg(id, s, 0, "row", &p->row, err)) ||
        (st = int_arg(id, s, 1, "col", &p->col, err)) || (st = int_arg(id, s, 2, "offset", &p->offset, err)) ||
        (st = od_factory_options(id, s, 3, &has_dt, &p->dtype, &p->device, err)))
        return st;
    if (!has_dt) /* the schema's dtype=4: None means int64 too (tril_indices_cpu) */
        p->dtype = OD_INT64;
    if (p->row < 0)
        return od_error_set(err, OD_EINVAL, "row must be non-negative, got%" PRId64, p->row);
    if (p->col < 0)
        return od_error_set(err, OD_EINVAL, "col must be non-negative, got%" PRId64, p->col);
    if (p->dtype != OD_INT32 && p->dtype != OD_INT64)
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'",
                            p->upper ? "triu_indices" : "tril_indices", od_dtype_scalar_name(p->dtype));
    p->count = p->upper ? wsub(wmul(p->row, p->col), tril_size(p->row, p->col, wsub(p->offset, 1)))
                        : tril_size(p->row, p->col, p->offset);
    /* ATen's empty_cpu({2, count}): a count whose bytes overflow */
    if (p->count < 0 || p->count > INT64_MAX / 16)
        return od_error_set(err, OD_EINVAL, "Storage size calculation overflowed with sizes=[2, %" PRId64 "]",
                            p->count);
    return OD_OK;
}

/* ATen's loops, with its index_t (int32 or int64) counters: an offset
 * beyond int32 wraps in them as it does there. */
#define TRI_FILL(T)                                                                           \
    {                                                                                         \
        T *rows = data, *cols = rows + p->count;                                              \
        if (p->upper) {                                                                       \
            T c = (T)imax(0, p->offset), r = 0;                                               \
            for (int64_t i = 0; i < p->count; i++) {                                          \
                rows[i] = r;                                                                  \
                cols[i] = c;                                                                  \
                c = (T)wadd(c, 1);                                                            \
                if (c >= p->col) {                                                            \
                    r = (T)wadd(r, 1);                                                        \
                    c = (T)imax(0, wadd(r, p->offset));                                       \
                }                                                                             \
            }                                                                                 \
        } else {                                                                              \
            T r = (T)imax(0, wsub(0, p->offset)), c = 0;                                      \
            for (int64_t i = 0; i < p->count; i++) {                                          \
                rows[i] = r;                                                                  \
                cols[i] = c;                                                                  \
                c = (T)wadd(c, 1);                                                            \
                if (c > wadd(r, p->offset) || c >= p->col) {                                  \
                    r = (T)wadd(r, 1);                                                        \
                    c = 0;                                                                    \
                }                                                                             \
            }                                                                                 \
        }                                                                                     \
    }

void od_tri_indices_fill(const od_tri_indices_params *p, void *data)
{
    if (p->dtype == OD_INT32)
        TRI_FILL(int32_t)
    else
        TRI_FILL(int64_t)
}

od_status od_shape_tri_indices(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    od_tri_indices_params p;
    od_status st = od_tri_indices_params_of(id, s, &p, err);
    if (st)
        return st;
    int64_t sz[2] = {2, p.count};
    od_out_spec_init(&outs[0], p.dtype, p.device, sz, 2);
    *nouts = 1;
    return OD_OK;
}

/* ---- _local_scalar_dense --------------------------------------------------------------------- */

/* Its result is a Scalar read from the data: Meta has no answer (torch
 * registers no Meta kernel), so this validates and refuses. */
od_status od_shape_local_scalar(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    (void)outs;
    (void)nouts;
    od_status st = nargs_is(id, s, 1, err);
    if (st)
        return st;
    if (s->args[0].tag != OD_T_TENSOR || !s->args[0].u.t)
        return od_error_set(err, OD_EINVAL, "_local_scalar_dense(): argument 'self' must be a Tensor");
    return od_error_set(err, OD_ENOKERNEL,
                        "Could not run 'aten::_local_scalar_dense' with arguments from the 'Meta' backend: its "
                        "result is read from the data");
}
