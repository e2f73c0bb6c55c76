/* composite.c — registers the composite family: ops.def's cea column on
 * CompositeExplicitAutograd, cia on CompositeImplicitAutograd and bs on
 * BackendSelect.
 *
 * Invariants: registration goes only through the public od_impl, with
 * ctx = OD_OPID_<id> and the op's ops.def line as the registration site, so
 * dumps point at the one list of operators. Runs once, from od_init, before
 * any call.
 */
#include <stdint.h>

#include "composite.h"

static const struct {
    od_opid id;
    od_boxed_fn fn[3];
    const char *name[3];
    int line;
} g_regs[] = {
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag) \
    {OD_OPID_##id, {cea, cia, bs}, {#cea, #cia, #bs}, __LINE__},
#include "ops.def"
#undef OD_OP
};

od_status od_register_composite_kernels(od_error *err)
{
    static const od_key keys[3] = {OD_KEY_CompositeExplicitAutograd,
                                   OD_KEY_CompositeImplicitAutograd, OD_KEY_BackendSelect};
    od_cx_factories_init();
    for (size_t i = 0; i < sizeof g_regs / sizeof g_regs[0]; i++) {
        /* od_impl needs a mutable handle; registration is the one writer. */
        od_op *op = (od_op *)od_builtin(g_regs[i].id);
        for (int c = 0; c < 3; c++) {
            if (!g_regs[i].fn[c])
                continue;
            od_status st = od_impl(op, keys[c], g_regs[i].fn[c], (void *)(intptr_t)g_regs[i].id,
                                   g_regs[i].name[c], "kernels/ops.def", g_regs[i].line, err);
            if (st)
                return st;
        }
    }
    return OD_OK;
}
