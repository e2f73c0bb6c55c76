/* register.c — registers every CPU kernel of ops.def under the CPU key.
 *
 * Invariants: the table is generated from the CPU column of ops.def and
 * nothing else, so adding an operator with a CPU kernel needs no edit here.
 * Each kernel gets ctx = (void *)(intptr_t)OD_OPID_<id>, and the
 * registration site recorded for dumps is the operator's line in ops.def.
 * Called once, from od_init(), before the registry is frozen.
 */
#include <stddef.h>
#include <stdint.h>

#include "cpu_kernels.h"

typedef struct cpu_reg {
    od_opid id;
    od_boxed_fn fn; /* NULL: no CPU kernel for this operator */
    const char *name;
    int line;
} cpu_reg;

/* A 0 in the column expands to a null pointer; a name must be declared in
 * cpu_kernels.h. */
static const cpu_reg g_cpu_regs[] = {
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag) {OD_OPID_##id, cpu, #cpu, __LINE__},
#include "ops.def"
#undef OD_OP
};

od_status od_register_cpu_kernels(od_error *err)
{
    for (size_t i = 0; i < sizeof g_cpu_regs / sizeof g_cpu_regs[0]; i++) {
        const cpu_reg *r = &g_cpu_regs[i];
        if (!r->fn)
            continue;
        od_op *op = (od_op *)od_builtin(r->id);
        if (!op)
            return od_error_set(err, OD_EINTERNAL,
                                "od_register_cpu_kernels: built-in %d is not defined yet",
                                (int)r->id);
        od_status st = od_impl(op, OD_KEY_CPU, r->fn, (void *)(intptr_t)r->id, r->name,
                               "kernels/ops.def", r->line, err);
        if (st)
            return st;
    }
    return OD_OK;
}
