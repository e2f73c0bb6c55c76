/* meta.c — the Meta family: one boxed kernel for every operator that has a
 * shape function and real compute (a CPU kernel).
 *
 * Invariants: od_meta_kernel runs the operator's shape function (which
 * validates every argument exactly as the compute kernels do, since they
 * call the same function) and allocates meta tensors: storage without data,
 * so nothing is computed, read or written. In-place returns (alias_of) hand
 * back the argument itself. Operators without compute (views, composites,
 * factories served by CompositeExplicitAutograd) need no Meta kernel: their
 * composite already runs on Meta through the dispatcher.
 */
#include <stdint.h>
#include <string.h>

#include "od_shape.h"

static od_status od_meta_kernel(void *ctx, const od_op *op, od_keyset ks, od_stack *s,
                                od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_shape_fn shape = od_builtin_shape_fn(id);
    od_out_spec spec[OD_MAX_RETURNS];
    int n = 0;
    if (!shape)
        return od_error_set(err, OD_EINTERNAL, "%s has no shape function", od_op_name(op));
    od_status st = shape(id, s, spec, &n, err);
    if (st)
        return st;
    if (n < 0 || n > OD_MAX_RETURNS || n != od_op_schema(op)->nrets)
        return od_error_set(err, OD_EINTERNAL, "shape function of %s described %d outputs, schema has %d",
                            od_op_name(op), n, od_op_schema(op)->nrets);
    for (int i = 0; i < n; i++)
        if (spec[i].alias_of < 0)
            spec[i].device = (od_device){OD_DEV_META, 0};
    od_tensor *outs[OD_MAX_RETURNS];
    if ((st = od_alloc_outputs(s, spec, n, outs, err)))
        return st;
    for (int i = 0; i < n; i++)
        s->rets[i] = od_tensor_v(outs[i]);
    s->nrets = n;
    return OD_OK;
}

static const struct {
    od_opid id;
    const char *cpu; /* the CPU column as written: "0" when there is no compute */
    int line;
} g_ops[] = {
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag) {OD_OPID_##id, #cpu, __LINE__},
#include "ops.def"
#undef OD_OP
};

od_status od_register_meta_kernels(od_error *err)
{
    for (size_t i = 0; i < sizeof g_ops / sizeof g_ops[0]; i++) {
        od_opid id = g_ops[i].id;
        if (!od_builtin_shape_fn(id) || strcmp(g_ops[i].cpu, "0") == 0)
            continue;
        /* od_impl needs a mutable handle; registration is the one writer. */
        od_status st = od_impl((od_op *)od_builtin(id), OD_KEY_Meta, od_meta_kernel,
                               (void *)(intptr_t)id, "od_meta_kernel", "kernels/ops.def",
                               g_ops[i].line, err);
        if (st)
            return st;
    }
    return OD_OK;
}
