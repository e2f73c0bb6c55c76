/* register.c — registers every CUDA kernel of ops.def under the CUDA key.
 *
 * Invariants: the table is generated from the CUDA column of ops.def and
 * nothing else; ctx = (void *)(intptr_t)OD_OPID_<id>; the registration site
 * recorded for dumps is the operator's line in ops.def. Registration never
 * touches the CUDA runtime (a machine without a GPU still shows the CUDA
 * kernels in every table; calling one then fails with OD_EUNAVAIL and the
 * reason). Besides the kernels it registers the device allocator.
 */
#include <stddef.h>
#include <stdint.h>

#include "cuda_internal.h"

typedef struct cuda_reg {
    od_opid id;
    od_boxed_fn fn; /* NULL: no CUDA kernel for this operator */
    const char *name;
    int line;
} cuda_reg;

static const cuda_reg g_cuda_regs[] = {
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag) {OD_OPID_##id, cuda, #cuda, __LINE__},
#include "ops.def"
#undef OD_OP
};

od_status od_register_cuda_kernels(od_error *err)
{
    od_register_allocator(OD_DEV_CUDA, od_cu_allocator());
    for (size_t i = 0; i < sizeof g_cuda_regs / sizeof g_cuda_regs[0]; i++) {
        const cuda_reg *r = &g_cuda_regs[i];
        if (!r->fn)
            continue;
        od_op *op = (od_op *)od_builtin(r->id);
        if (!op)
            return od_error_set(err, OD_EINTERNAL,
                                "od_register_cuda_kernels: built-in %d is not defined yet", (int)r->id);
        od_status st = od_impl(op, OD_KEY_CUDA, r->fn, (void *)(intptr_t)r->id, r->name,
                               "kernels/ops.def", r->line, err);
        if (st)
            return st;
    }
    return OD_OK;
}
