/* scatters.c — the out-of-place scatters PyTorch 1.13 registers as
 * CompositeExplicitAutograd: slice_scatter, select_scatter, masked_scatter,
 * put; rot90 (flip + transpose); and repeat_interleave's .self_Tensor and
 * .self_int (CompositeImplicitAutograd: index_select by
 * repeat_interleave.Tensor, so autograd records index_select).
 *
 * Invariants: each clones self and writes into the clone through
 * operators every backend has (slice / select views and copy_, where over a
 * cumsum-ranked take of source, index_copy / index_add over a flat view), so
 * one kernel serves CPU and CUDA. Arguments are checked first, in ATen's
 * order and with its messages; index and mask values are read on the host
 * only where ATen refuses by value (put's bounds, masked_scatter's count).
 * Their grad_fns (SliceScatterBackward0, ...) are formulas in formulas.c;
 * the calls inside run below Autograd.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "composite.h"
#include "od_shape.h"

#define T(t) od_tensor_v(t)

/* slice_scatter(self, src, dim=0, start=None, end=None, step=1) and
 * select_scatter(self, src, dim, index): self.clone() whose slice (select)
 * is copy_'d from src, which must have the slice's shape exactly. */
OD_CX_KERNEL(od_cea_slice_scatter)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_tensor *self, *src;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_tensor(op, s, 1, &src, err)))
        return st;
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *out = od_cx_call(&sc, OD_OPID_clone, 2, T(self), od_none());
    od_tensor *view = NULL;
    if (out && id == OD_OPID_select_scatter)
        view = od_cx_call(&sc, OD_OPID_select_int, 3, T(out), s->args[2], s->args[3]);
    else if (out)
        view = od_cx_call(&sc, OD_OPID_slice_Tensor, 5, T(out), s->args[2], s->args[3], s->args[4], s->args[5]);
    if (!view)
        return od_cx_scope_end(&sc);
    if (view->ndim != src->ndim || memcmp(view->sizes, src->sizes, sizeof(int64_t) * (size_t)src->ndim)) {
        char a[256], b[256];
        od_shape_print(src->sizes, src->ndim, a, sizeof a);
        od_shape_print(view->sizes, view->ndim, b, sizeof b);
        od_cx_scope_end(&sc);
        return od_error_set(err, OD_EINVAL,
                            "expected src to have a size equal to the slice of self. src size = %s, slice size = %s",
                            a, b);
    }
    od_cx_call(&sc, OD_OPID_copy_, 3, T(view), T(src), od_bool(false));
    return od_cx_scope_return1(&sc, s, out);
}

/* rot90(self, k=1, dims=[0,1]): k mod 4 quarter turns from dims[0] towards
 * dims[1], as ATen: flip one dim and transpose (a view of the flipped copy),
 * flip both, or a contiguous clone. */
OD_CX_KERNEL(od_cea_rot90)
{
    (void)ctx;
    (void)ks;
    od_tensor *self;
    int64_t k;
    const int64_t *dims;
    int n;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_int(op, s, 1, &k, err)) ||
        (st = od_cx_arg_int_list(op, s, 2, &dims, &n, err)))
        return st;
    int64_t nd = self->ndim;
    if (n != 2)
        return od_error_set(err, OD_EINVAL, "expected total rotation dims == 2, but got dims = %d", n);
    if (nd < 2)
        return od_error_set(err, OD_EINVAL, "expected total dims >= 2, but got total dims = %" PRId64, nd);
    if (dims[0] == dims[1] || llabs(dims[0] - dims[1]) == nd)
        return od_error_set(err, OD_EINVAL,
                            "expected rotation dims to be different, but got dim0 = %" PRId64 " and dim1 = %" PRId64,
                            dims[0], dims[1]);
    if (dims[0] >= nd || dims[0] < -nd)
        return od_error_set(err, OD_EINVAL, "Rotation dim0 out of range, dim0 = %" PRId64, dims[0]);
    if (dims[1] >= nd || dims[1] < -nd)
        return od_error_set(err, OD_EINVAL, "Rotation dim1 out of range, dim1 = %" PRId64, dims[1]);
    k = (4 + (k % 4)) % 4;
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *r;
    int64_t d0 = dims[0], d1 = dims[1];
    if (k == 1 || k == 3) {
        od_tensor *f = od_cx_call(&sc, OD_OPID_flip, 2, T(self), od_list_v(OD_T_INT_LIST, k == 1 ? &d1 : &d0, 1));
        r = f ? od_cx_call(&sc, OD_OPID_transpose_int, 3, T(f), od_int(d0), od_int(d1)) : NULL;
    } else if (k == 2) {
        r = od_cx_call(&sc, OD_OPID_flip, 2, T(self), s->args[2]);
    } else {
        r = od_cx_call(&sc, OD_OPID_clone, 2, T(self), od_int(OD_MF_CONTIGUOUS));
    }
    return od_cx_scope_return1(&sc, s, r);
}

/* The int64 sum of t (any device) read on the host. */
static int64_t host_count(od_cx_scope *sc, od_tensor *t)
{
    od_tensor *c = od_cx_call(sc, OD_OPID_sum, 2, T(t), od_dtype_v(OD_INT64));
    od_tensor *h = c ? od_cx_call(sc, OD_OPID__to_copy, 7, T(c), od_dtype_v(OD_INT64), od_none(),
                                  od_device_v((od_device){OD_DEV_CPU, 0}), od_none(), od_bool(false), od_none())
                     : NULL;
    return h ? *(const int64_t *)od_tensor_data(h) : 0;
}

/* A non-bool mask as ATen 1.13's CPU kernel reads it: each element's first
 * byte (little-endian) as a uint8, which must be 0 or 1 ("Mask tensor can
 * take 0 and 1 values only"); so an integer mask of 0s and 1s works, and a
 * floating one reads its low mantissa byte (torch's own behaviour). Read on
 * the host; the bool mask goes back to mask's device. */
static od_tensor *byte_mask(od_cx_scope *sc, od_tensor *mask)
{
    od_device cpu = {OD_DEV_CPU, 0};
    od_tensor *h = od_cx_call(sc, OD_OPID__to_copy, 7, T(mask), od_none(), od_none(), od_device_v(cpu), od_none(),
                              od_bool(false), od_none());
    od_tensor *c = h ? od_cx_call(sc, OD_OPID_contiguous, 2, T(h), od_int(0)) : NULL;
    od_tensor *b = c ? od_cx_call(sc, OD_OPID_empty_memory_format, 6, od_list_v(OD_T_INT_LIST, c->sizes, (size_t)c->ndim),
                                  od_dtype_v(OD_BOOL), od_none(), od_device_v(cpu), od_none(), od_none())
                     : NULL;
    if (!b)
        return NULL;
    int64_t n = od_tensor_numel(c);
    size_t es = od_dtype_size(c->dtype);
    const unsigned char *src = od_tensor_data(c);
    bool *dst = od_tensor_data(b);
    for (int64_t i = 0; i < n; i++) {
        unsigned char v = src[(size_t)i * es];
        if (v > 1) {
            sc->st = od_error_set(sc->err, OD_EINVAL, "Mask tensor can take 0 and 1 values only");
            return NULL;
        }
        dst[i] = v != 0;
    }
    if (mask->device.type == OD_DEV_CPU)
        return b;
    return od_cx_call(sc, OD_OPID__to_copy, 7, T(b), od_none(), od_none(), od_device_v(mask->device), od_none(),
                      od_bool(false), od_none());
}

/* masked_scatter(self, mask, source): self and mask broadcast together;
 * the k-th set mask position (row-major over the broadcast shape) takes
 * source's k-th element (row-major), the others keep self's. */
OD_CX_KERNEL(od_cea_masked_scatter)
{
    (void)ctx;
    (void)ks;
    od_tensor *self, *mask, *source;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_tensor(op, s, 1, &mask, err)) ||
        (st = od_cx_arg_tensor(op, s, 2, &source, err)))
        return st;
    int64_t shape[OD_MAX_DIMS];
    int nd = 0;
    /* expand_outplace(mask, self): mask is tensor a */
    if ((st = od_broadcast_shapes(mask->sizes, mask->ndim, self->sizes, self->ndim, shape, &nd, err)))
        return st;
    if (self->dtype != source->dtype)
        return od_error_set(err, OD_EMISMATCH,
                            "masked_scatter: expected self and source to have same dtypes but got%s and %s",
                            od_dtype_scalar_name(self->dtype), od_dtype_scalar_name(source->dtype));
    if (self->device.type == OD_DEV_META || mask->device.type == OD_DEV_META || source->device.type == OD_DEV_META)
        return od_error_set(err, OD_ENOKERNEL,
                            "Could not run 'aten::masked_scatter' with arguments from the 'Meta' backend: the "
                            "source elements it reads depend on the mask's data");
    int64_t flat = -1, zero = 0;
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *se = od_cx_call(&sc, OD_OPID_expand, 3, T(self), od_list_v(OD_T_INT_LIST, shape, (size_t)nd),
                               od_bool(false));
    od_tensor *out = se ? od_cx_call(&sc, OD_OPID_clone, 2, T(se), od_int(OD_MF_CONTIGUOUS)) : NULL;
    int64_t bnumel = 1;
    for (int k = 0; k < nd; k++)
        bnumel *= shape[k];
    /* ATen reads mask values while it iterates: over nothing, none */
    od_tensor *mb = mask->dtype == OD_BOOL || bnumel == 0 ? mask : byte_mask(&sc, mask);
    if (sc.st)
        return od_cx_scope_end(&sc);
    if (mb && mb->dtype != OD_BOOL)
        mb = od_cx_cast(&sc, mb, OD_BOOL);
    od_tensor *me = mb ? od_cx_call(&sc, OD_OPID_expand, 3, T(mb), od_list_v(OD_T_INT_LIST, shape, (size_t)nd),
                                    od_bool(false))
                       : NULL;
    od_tensor *mf = me ? od_cx_call(&sc, OD_OPID_reshape, 2, T(me), od_list_v(OD_T_INT_LIST, &flat, 1)) : NULL;
    int64_t count = mf ? host_count(&sc, mf) : 0;
    if (sc.st)
        return od_cx_scope_end(&sc);
    if (count > od_tensor_numel(source)) {
        od_cx_scope_end(&sc);
        return od_error_set(err, OD_EINVAL, "Number of elements of source < number of ones in mask");
    }
    if (count == 0)
        return od_cx_scope_return1(&sc, s, out);
    /* rank of each set position among the set ones: cumsum - 1 (clamped at
     * 0 for the unset ones, whose pick where() discards) */
    od_tensor *cs = od_cx_call(&sc, OD_OPID_cumsum, 3, T(mf), od_int(0), od_dtype_v(OD_INT64));
    od_tensor *rk = cs ? od_cx_call(&sc, OD_OPID_sub_Scalar, 3, T(cs), od_int(1), od_int(1)) : NULL;
    rk = rk ? od_cx_call(&sc, OD_OPID_clamp, 3, T(rk), od_int(zero), od_none()) : NULL;
    od_tensor *pick = rk ? od_cx_call(&sc, OD_OPID_take, 2, T(source), T(rk)) : NULL;
    od_tensor *pv = pick ? od_cx_call(&sc, OD_OPID_reshape, 2, T(pick), od_list_v(OD_T_INT_LIST, shape, (size_t)nd))
                         : NULL;
    od_tensor *r = pv ? od_cx_call(&sc, OD_OPID_where_self, 3, T(me), T(pv), T(out)) : NULL;
    return od_cx_scope_return1(&sc, s, r);
}

/* The order ATen's TensorIterator walks two operands a and b of one shape
 * (reorder_dimensions), as permute's dims, outermost first. A pair of dims
 * is decided by the first operand whose strides on them differ (a zero
 * stride, broadcast, defers to the next operand); equal strides put the
 * smaller dim inside. */
static void iter_order(const int64_t *sizes, int nd, const int64_t *sa, const int64_t *sb, int64_t *out)
{
    int64_t perm[OD_MAX_DIMS]; /* innermost first, as ATen's perm_ */
    const int64_t *st[2] = {sa, sb};
    for (int i = 0; i < nd; i++)
        perm[i] = nd - 1 - i;
    for (int i = 1; i < nd; i++)
        for (int d0 = i - 1, d1 = i; d0 >= 0; d0--) {
            int cmp = 0;
            for (int k = 0; k < 2 && !cmp; k++) {
                int64_t s0 = st[k][perm[d0]], s1 = st[k][perm[d1]];
                if (s0 == 0 || s1 == 0)
                    continue;
                cmp = s0 < s1 ? -1 : s0 > s1 ? 1 : sizes[perm[d0]] > sizes[perm[d1]] ? 1 : 0;
            }
            if (cmp < 0)
                break;
            if (cmp > 0) {
                int64_t t = perm[d0];
                perm[d0] = perm[d1];
                perm[d1] = t;
                d1 = d0;
            }
        }
    for (int i = 0; i < nd; i++)
        out[i] = perm[nd - 1 - i];
}

/* put(self, index, source, accumulate=False): self's elements at the flat
 * (row-major) positions index (negatives wrap) replaced by, or with
 * accumulate increased by, source's. ATen 1.13's CPU kernel walks source and
 * index (reshaped to source's shape) with one TensorIterator, one element
 * after another below 32768 elements: where an index repeats, the last write
 * in that order wins and sums add in it. So both go flat in that order (a
 * transposed source: its memory order), for index_copy / index_add, which
 * go in index order. */
OD_CX_KERNEL(od_cea_put)
{
    (void)ctx;
    (void)ks;
    od_tensor *self, *index, *source;
    bool accumulate = false;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_tensor(op, s, 1, &index, err)) ||
        (st = od_cx_arg_tensor(op, s, 2, &source, err)) || (st = od_cx_arg_bool(op, s, 3, &accumulate, err)))
        return st;
    if (index->dtype != OD_INT64)
        return od_error_set(err, OD_EMISMATCH, "put_(): Expected a long tensor for index, but got %s",
                            od_dtype_scalar_name(index->dtype));
    if (self->dtype != source->dtype)
        return od_error_set(err, OD_EMISMATCH,
                            "put_(): self and source expected to have the same dtype, but got self.dtype = %s and "
                            "source.dtype = %s",
                            od_dtype_scalar_name(self->dtype), od_dtype_scalar_name(source->dtype));
    if (!od_device_eq(self->device, source->device) || !od_device_eq(self->device, index->device)) {
        char a[32], b[32], c[32];
        od_device_print(self->device, a, sizeof a);
        od_device_print(index->device, b, sizeof b);
        od_device_print(source->device, c, sizeof c);
        return od_error_set(err, OD_EMISMATCH,
                            "put_(): self, index and source expected to be in the same device, but got self.device "
                            "= %s, index.device = %s, and source.device = %s",
                            a, b, c);
    }
    int64_t numel = od_tensor_numel(self), n = od_tensor_numel(index);
    if (od_tensor_numel(source) != n)
        return od_error_set(err, OD_EINVAL,
                            "put_(): Expected source and index to have the same number of elements, but got "
                            "source.numel() = %" PRId64 ", index.numel() = %" PRId64,
                            od_tensor_numel(source), n);
    if (numel == 0 && n != 0)
        return od_error_set(err, OD_EINVAL, "put_(): Tried to put elements into an empty tensor");
    od_cx_scope sc = od_cx_scope_begin(err);
    if (n == 0)
        return od_cx_scope_return1(&sc, s, od_cx_call(&sc, OD_OPID_clone, 2, T(self), od_none()));
    /* bounds: take's check has put's message ("out of range: tried to
     * access index ...") */
    od_cx_call(&sc, OD_OPID_take, 2, T(self), T(index));
    int64_t flat = -1;
    od_value shape = od_list_v(OD_T_INT_LIST, source->sizes, (size_t)source->ndim);
    od_tensor *is = od_cx_call(&sc, OD_OPID_reshape, 2, T(index), shape), *ss = source;
    if (is && source->ndim > 1) {
        int64_t order[OD_MAX_DIMS];
        iter_order(source->sizes, source->ndim, source->strides, is->strides, order);
        od_value pl = od_list_v(OD_T_INT_LIST, order, (size_t)source->ndim);
        ss = od_cx_call(&sc, OD_OPID_permute, 2, T(source), pl);
        is = ss ? od_cx_call(&sc, OD_OPID_permute, 2, T(is), pl) : NULL;
    }
    od_tensor *ix = is ? od_cx_call(&sc, OD_OPID_reshape, 2, T(is), od_list_v(OD_T_INT_LIST, &flat, 1)) : NULL;
    ix = ix ? od_cx_call(&sc, OD_OPID_remainder_Scalar, 2, T(ix), od_int(numel)) : NULL;
    od_tensor *sv = ss ? od_cx_call(&sc, OD_OPID_reshape, 2, T(ss), od_list_v(OD_T_INT_LIST, &flat, 1)) : NULL;
    od_tensor *sf = od_cx_call(&sc, OD_OPID_reshape, 2, T(self), od_list_v(OD_T_INT_LIST, &flat, 1));
    od_tensor *r = NULL;
    if (ix && sv && sf)
        r = accumulate ? od_cx_call(&sc, OD_OPID_index_add, 5, T(sf), od_int(0), T(ix), T(sv), od_int(1))
                       : od_cx_call(&sc, OD_OPID_index_copy, 4, T(sf), od_int(0), T(ix), T(sv));
    r = r ? od_cx_call(&sc, OD_OPID_reshape, 2, T(r), od_list_v(OD_T_INT_LIST, self->sizes, (size_t)self->ndim))
          : NULL;
    return od_cx_scope_return1(&sc, s, r);
}

/* repeat_interleave.self_Tensor(self, repeats, dim=None, *, output_size)
 * and .self_int: ATen's CompositeImplicitAutograd, index_select of self
 * (flattened when dim is None) by repeat_interleave(repeats), a repeats of
 * one element (or the int) standing for every index along dim. */
OD_CX_KERNEL(od_cia_repeat_interleave)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_tensor *self, *rep = NULL;
    int64_t dim = 0, flat = -1, one = 1;
    bool has_dim = false;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_opt_int(op, s, 2, &has_dim, &dim, err)))
        return st;
    od_cx_scope sc = od_cx_scope_begin(err);
    if (id == OD_OPID_repeat_interleave_self_int) {
        int64_t r;
        if ((st = od_cx_arg_int(op, s, 1, &r, err)))
            return od_cx_scope_end(&sc), st;
        rep = od_cx_call(&sc, OD_OPID_full, 6, od_list_v(OD_T_INT_LIST, &one, 1), od_int(r), od_dtype_v(OD_INT64),
                         od_none(), od_device_v(self->device), od_none());
    } else if ((st = od_cx_arg_tensor(op, s, 1, &rep, err))) {
        return od_cx_scope_end(&sc), st;
    }
    od_tensor *input = self;
    if (!has_dim) {
        input = od_cx_call(&sc, OD_OPID_reshape, 2, T(self), od_list_v(OD_T_INT_LIST, &flat, 1));
        dim = 0;
    }
    if (!input)
        return od_cx_scope_end(&sc);
    int d; /* ATen reads input.size(dim), which a 0-dim tensor has none of */
    if ((st = od_wrap_dim_strict(dim, input->ndim, &d, err)))
        return od_cx_scope_end(&sc), st;
    int64_t len = input->sizes[d];
    if (rep && (rep->ndim == 0 || (rep->ndim == 1 && rep->sizes[0] == 1))) {
        od_tensor *r1 = od_cx_call(&sc, OD_OPID_reshape, 2, T(rep), od_list_v(OD_T_INT_LIST, &one, 1));
        rep = r1 ? od_cx_call(&sc, OD_OPID_expand, 3, T(r1), od_list_v(OD_T_INT_LIST, &len, 1), od_bool(false)) : NULL;
    } else if (rep && rep->ndim == 1) {
        if (rep->sizes[0] != len) {
            od_cx_scope_end(&sc);
            return od_error_set(err, OD_EINVAL, "repeats must have the same size as input along dim");
        }
    } else if (rep) {
        od_cx_scope_end(&sc);
        return od_error_set(err, OD_EINVAL, "repeats must be 0-dim or 1-dim tensor");
    }
    od_tensor *ix = rep ? od_cx_call(&sc, OD_OPID_repeat_interleave_Tensor, 2, T(rep), s->args[3]) : NULL;
    /* index_select wants int64 (an int32 repeats gives int32 indices) */
    if (ix && ix->dtype != OD_INT64)
        ix = od_cx_cast(&sc, ix, OD_INT64);
    od_tensor *r = ix ? od_cx_call(&sc, OD_OPID_index_select, 3, T(input), od_int(d), T(ix)) : NULL;
    return od_cx_scope_return1(&sc, s, r);
}

/* masked_scatter_(self, mask, source): ATen's CPU kernel consumes source in
 * the order its TensorIterator walks self, which is self's memory order
 * (dims by decreasing stride), not the logical row-major order of the
 * out-of-place masked_scatter. So: self and the mask (expanded to self's
 * shape: it may not broadcast self) viewed with their dims in self's memory
 * order, masked_scatter there, and copy_ back through that view. */
OD_CX_KERNEL(od_cia_masked_scatter_)
{
    (void)ctx;
    (void)ks;
    od_tensor *self, *mask, *source;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_tensor(op, s, 1, &mask, err)) ||
        (st = od_cx_arg_tensor(op, s, 2, &source, err)))
        return st;
    if (self->dtype != source->dtype)
        return od_error_set(err, OD_EMISMATCH,
                            "masked_scatter: expected self and source to have same dtypes but got%s and %s",
                            od_dtype_scalar_name(self->dtype), od_dtype_scalar_name(source->dtype));
    int64_t perm[OD_MAX_DIMS];
    for (int k = 0; k < self->ndim; k++)
        perm[k] = k;
    for (int a = 1; a < self->ndim; a++) /* stable insertion sort, larger strides first */
        for (int b = a; b > 0 && self->sizes[perm[b]] > 1 && self->sizes[perm[b - 1]] > 1 &&
                        self->strides[perm[b]] > self->strides[perm[b - 1]];
             b--) {
            int64_t t = perm[b];
            perm[b] = perm[b - 1];
            perm[b - 1] = t;
        }
    od_value pl = od_list_v(OD_T_INT_LIST, perm, (size_t)self->ndim);
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *me = od_cx_call(&sc, OD_OPID_expand, 3, T(mask), od_list_v(OD_T_INT_LIST, self->sizes, (size_t)self->ndim),
                               od_bool(false));
    od_tensor *sp = me ? od_cx_call(&sc, OD_OPID_permute, 2, T(self), pl) : NULL;
    od_tensor *mp = sp ? od_cx_call(&sc, OD_OPID_permute, 2, T(me), pl) : NULL;
    od_tensor *r = mp ? od_cx_call(&sc, OD_OPID_masked_scatter, 3, T(sp), T(mp), T(source)) : NULL;
    if (r)
        od_cx_call(&sc, OD_OPID_copy_, 3, T(sp), T(r), od_bool(false));
    if ((st = od_cx_scope_end(&sc)))
        return st;
    od_tensor_retain(self);
    return od_cx_return1(s, self);
}
