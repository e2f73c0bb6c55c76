/* ew_gen.cuh — the launch switch of the OD_EW1 (OD_EW_GEN_ARITY 1) or OD_EW2
 * (2) operators of ops.def, generated from that list; ew_gen1.cu and
 * ew_gen2.cu each instantiate one, so the two build in parallel and a new
 * operator needs no edit here. */
#include "ew_impl.cuh"

#define OD_EW_GEN_CAT_(a, b) a##b
#define OD_EW_GEN_CAT(a, b) OD_EW_GEN_CAT_(a, b)

cudaError_t OD_EW_GEN_CAT(od_cu_ew_group_gen, OD_EW_GEN_ARITY)(const od_cu_iter *it, const od_cu_ew_args *a,
                                                              cudaStream_t st)
{
    using namespace odcu;
    switch (a->op) {
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag)
#define OD_EW_GEN_CASE_(id) \
    case OD_CU_EW_##id: return ew_launch<OD_CU_EW_##id>(it, a, st);
#if OD_EW_GEN_ARITY == 1
#define OD_EW1(id, schema, fn, rule, ag) OD_EW_GEN_CASE_(id)
#define OD_EW2(id, schema, fn, rule, ag)
#define OD_EWP(id, schema, fn, rule, ag) OD_EW_GEN_CASE_(id)
#else
#define OD_EW1(id, schema, fn, rule, ag)
#define OD_EW2(id, schema, fn, rule, ag) OD_EW_GEN_CASE_(id)
#define OD_EWP(id, schema, fn, rule, ag)
#endif
#include "ops.def"
#undef OD_OP
#undef OD_EW1
#undef OD_EW2
#undef OD_EWP
#undef OD_EW_GEN_CASE_
    default: return cudaErrorNotSupported;
    }
}
