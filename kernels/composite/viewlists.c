/* viewlists.c — operators that return Tensor[] (split, unbind, chunk,
 * where(condition)), the composites over views (diag, diag_embed,
 * narrow_copy, diagonal_scatter, as_strided_scatter) and the in-place view
 * changes (squeeze_, unsqueeze_, transpose_, resize_).
 *
 * Invariants:
 *  - A Tensor[] return is one OD_T_TENSOR_LIST value whose buffer (malloc'd)
 *    and tensors are new references owned by the caller; on error nothing is
 *    returned and everything made is released.
 *  - split / unbind / chunk / where are CompositeImplicitAutograd here: each
 *    piece is an aten::slice / aten::select call through the dispatcher, so
 *    the pieces share self's storage and autograd records those views
 *    (SliceBackward0 / SelectBackward0 instead of torch's one SplitBackward0
 *    node: the same gradients, a different graph).
 *  - The in-place view changes rewrite self's sizes, strides and offset
 *    (never its data): the change is seen by every holder of that tensor (a
 *    stored tensor, a program's earlier result), not by other views of the
 *    same storage, as in PyTorch.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "composite.h"

/* ---- Tensor[] returns ---- */

typedef struct piece_list {
    od_tensor **t;
    size_t n;
} piece_list;

/* Every piece is a tensor of its own, data or not (chunk(empty, 10**6)
 * makes a million): their headers count against the call's output cap. */
static od_status pieces_fit(uint64_t n, od_error *err)
{
    size_t cap = od_get_alloc_limit(), each = sizeof(od_tensor) + sizeof(od_tensor *);
    if ((cap && n > cap / each) || n > INT_MAX)
        return od_error_set(err, OD_ETOOLARGE,
                            "output of %" PRIu64 " tensors (%" PRIu64 " bytes of tensor headers) exceeds the "
                            "limit of %zu bytes",
                            n, n * each, cap ? cap : (size_t)INT_MAX);
    return OD_OK;
}

static od_status list_new(piece_list *l, size_t n, od_error *err)
{
    l->n = 0;
    l->t = NULL;
    od_status st = pieces_fit(n, err);
    if (st)
        return st;
    l->t = calloc(n ? n : 1, sizeof *l->t);
    return l->t ? OD_OK : od_error_set(err, OD_ENOMEM, "out of memory");
}

static void list_free(piece_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        od_tensor_release(l->t[i]);
    free(l->t);
    l->t = NULL;
    l->n = 0;
}

/* Stores l (taken) as the kernel's only return. */
static od_status list_return(od_stack *s, piece_list *l)
{
    s->rets[0] = od_list_v(OD_T_TENSOR_LIST, l->t, l->n);
    s->nrets = 1;
    l->t = NULL;
    l->n = 0;
    return OD_OK;
}

/* Appends self[start:start+len] along d (aten::slice, a view). */
static od_status add_slice(piece_list *l, od_tensor *self, int d, int64_t start, int64_t len, od_error *err)
{
    od_value a[5] = {od_tensor_v(self), od_int(d), od_int(start), od_int(start + len), od_int(1)};
    od_tensor *out = NULL;
    od_status st = od_call_builtin1(OD_OPID_slice_Tensor, a, 5, &out, err);
    if (st == OD_OK)
        l->t[l->n++] = out;
    return st;
}

static od_status add_select(piece_list *l, od_tensor *self, int d, int64_t i, od_error *err)
{
    od_value a[3] = {od_tensor_v(self), od_int(d), od_int(i)};
    od_tensor *out = NULL;
    od_status st = od_call_builtin1(OD_OPID_select_int, a, 3, &out, err);
    if (st == OD_OK)
        l->t[l->n++] = out;
    return st;
}

/* "[1, 2]" of an int list, for torch's messages. */
static void list_text(const int64_t *v, int n, char *buf, size_t cap)
{
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%" PRId64, i ? ", " : "", v[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
}

static od_status split_sizes(od_tensor *self, int d, const int64_t *sizes, int n, od_stack *s, od_error *err)
{
    piece_list l;
    od_status st = list_new(&l, (size_t)n, err);
    int64_t start = 0;
    for (int i = 0; i < n && st == OD_OK; i++) {
        st = add_slice(&l, self, d, start, sizes[i], err);
        start += sizes[i];
    }
    if (st) {
        list_free(&l);
        return st;
    }
    return list_return(s, &l);
}

static od_status check_split_size(int64_t split_size, od_error *err)
{
    if (split_size < 0)
        return od_error_set(err, OD_EINVAL,
                            "split expects split_size be non-negative, but got split_size=%" PRId64, split_size);
    return OD_OK;
}

static od_status split_tensor(od_tensor *self, int d, int64_t split_size, od_stack *s, od_error *err)
{
    int64_t dim_size = self->sizes[d];
    od_status st = check_split_size(split_size, err);
    if (st)
        return st;
    if (split_size == 0 && dim_size != 0)
        return od_error_set(err, OD_EINVAL,
                            "split_size can only be 0 if dimension size is 0, but got dimension size of %" PRId64,
                            dim_size);
    /* ATen: at least one piece; the last one holds the remainder */
    /* written so a huge split_size cannot overflow (ATen's ceil-division can) */
    int64_t num = split_size && dim_size ? 1 + (dim_size - 1) / split_size : 1;
    int64_t last = dim_size - split_size * (num - 1);
    piece_list l;
    st = list_new(&l, (size_t)num, err);
    for (int64_t i = 0; i < num && st == OD_OK; i++)
        st = add_slice(&l, self, d, i * split_size, i == num - 1 ? last : split_size, err);
    if (st) {
        list_free(&l);
        return st;
    }
    return list_return(s, &l);
}

OD_CX_KERNEL(od_cia_split)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_tensor *self;
    od_status st = od_cx_arg_tensor(op, s, 0, &self, err);
    if (st)
        return st;
    int64_t dim = 0, k = 0;
    int d = 0;
    if (id == OD_OPID_where) { /* nonzero(condition).unbind(1): torch's nonzero_numpy */
        od_tensor *c = self, *u = NULL, *nz = NULL;
        if (self->ndim == 0 && (st = od_cx_unsqueeze(self, 0, &u, err)))
            return st;
        if (u)
            c = u;
        od_value a[1] = {od_tensor_v(c)};
        st = od_call_builtin1(OD_OPID_nonzero, a, 1, &nz, err);
        od_tensor_release(u);
        if (st)
            return st;
        piece_list l;
        int64_t cols = nz->sizes[1];
        st = list_new(&l, (size_t)cols, err);
        for (int64_t j = 0; j < cols && st == OD_OK; j++)
            st = add_select(&l, nz, 1, j, err);
        od_tensor_release(nz);
        if (st) {
            list_free(&l);
            return st;
        }
        return list_return(s, &l);
    }
    if ((st = od_cx_arg_int(op, s, id == OD_OPID_unbind_int ? 1 : 2, &dim, err)))
        return st;
    if (id == OD_OPID_unbind_int) {
        if ((st = od_wrap_dim_strict(dim, self->ndim, &d, err)))
            return st;
        piece_list l;
        st = list_new(&l, (size_t)self->sizes[d], err);
        for (int64_t i = 0; i < self->sizes[d] && st == OD_OK; i++)
            st = add_select(&l, self, d, i, err);
        if (st) {
            list_free(&l);
            return st;
        }
        return list_return(s, &l);
    }
    if (id == OD_OPID_chunk) {
        if (self->ndim == 0)
            return od_error_set(err, OD_EINVAL, "chunk expects at least a 1-dimensional tensor");
        if ((st = od_cx_arg_int(op, s, 1, &k, err)))
            return st;
        if (k <= 0)
            return od_error_set(err, OD_EINVAL, "chunk expects `chunks` to be greater than 0, got: %" PRId64, k);
        if ((st = od_wrap_dim(dim, self->ndim, &d, err)))
            return st;
        int64_t dim_size = self->sizes[d];
        /* ATen's ceil-division wraps for a huge chunks (a split_size of 0,
         * then refused): the same sum in unsigned arithmetic, defined here */
        int64_t size = (int64_t)((uint64_t)dim_size + (uint64_t)k - 1) / k;
        if (size == 0 && dim_size == 0) { /* chunks empty pieces, as ATen */
            if ((st = pieces_fit((uint64_t)k, err)))
                return st;
            int64_t *zero = calloc((size_t)k, sizeof *zero);
            if (!zero)
                return od_error_set(err, OD_ENOMEM, "out of memory");
            st = split_sizes(self, d, zero, (int)k, s, err);
            free(zero);
            return st;
        }
        return split_tensor(self, d, size, s, err);
    }
    if (self->ndim == 0)
        return od_error_set(err, OD_EINVAL, "split expects at least a 1-dimensional tensor");
    if (id == OD_OPID_split_Tensor) { /* ATen checks split_size before self.size(dim) */
        if ((st = od_cx_arg_int(op, s, 1, &k, err)))
            return st;
        if ((st = check_split_size(k, err)) || (st = od_wrap_dim(dim, self->ndim, &d, err)))
            return st;
        return split_tensor(self, d, k, s, err);
    }
    if ((st = od_wrap_dim(dim, self->ndim, &d, err)))
        return st;
    /* split_with_sizes: every size checked before any piece is made */
    const int64_t *sizes;
    int n;
    if ((st = od_cx_arg_int_list(op, s, 1, &sizes, &n, err)))
        return st;
    char text[256];
    int64_t sum = 0;
    for (int i = 0; i < n; i++)
        if (sizes[i] < 0) {
            list_text(sizes, n, text, sizeof text);
            return od_error_set(err, OD_EINVAL,
                                "split_with_sizes expects split_sizes have only non-negative entries, but got "
                                "split_sizes=%s",
                                text);
        } else if (__builtin_add_overflow(sum, sizes[i], &sum)) {
            sum = INT64_MAX;
        }
    if (sum != self->sizes[d]) {
        list_text(sizes, n, text, sizeof text);
        return od_error_set(err, OD_EINVAL,
                            "split_with_sizes expects split_sizes to sum exactly to %" PRId64
                            " (input tensor's size at dimension %" PRId64 "), but got split_sizes=%s",
                            self->sizes[d], dim, text); /* the dim as given, as ATen prints it */
    }
    return split_sizes(self, d, sizes, n, s, err);
}

/* ---- composites over views ---- */

/* n + |offset|, wrapping as ATen's int64 arithmetic does */
static int64_t wrapped_diag_len(int64_t n, int64_t offset)
{
    uint64_t a = offset < 0 ? (uint64_t)0 - (uint64_t)offset : (uint64_t)offset;
    return (int64_t)((uint64_t)n + a);
}

/* aten::diag: a vector's diag_embed, a matrix's diagonal copied. */
OD_CX_KERNEL(od_cia_diag)
{
    (void)ctx;
    (void)ks;
    od_tensor *self;
    int64_t offset;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_int(op, s, 1, &offset, err)))
        return st;
    if (self->ndim != 1 && self->ndim != 2)
        return od_error_set(err, OD_EINVAL, "matrix or a vector expected");
    if (self->dtype == OD_FLOAT16 && self->device.type == OD_DEV_CPU) /* ATen 1.13's CPU diag kernel */
        return od_error_set(err, OD_EUNSUPPORTED, "\"diag\" not implemented for 'Half'");
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *r;
    if (self->ndim == 1) {
        /* ATen's diag sizes (n + |offset|)^2 itself first */
        int64_t len = wrapped_diag_len(self->sizes[0], offset), sq;
        if (len < 0 || __builtin_mul_overflow(len, len, &sq)) {
            od_cx_scope_end(&sc);
            return od_error_set(err, OD_EINVAL, "numel: integer multiplication overflow");
        }
        r = od_cx_call(&sc, OD_OPID_diag_embed, 4, od_tensor_v(self), od_int(offset), od_int(0), od_int(1));
    } else {
        /* ATen sizes the result min(rows, cols - offset) (or the negative
         * offset's twin) before copying: below zero it refuses */
        int64_t r0 = self->sizes[0], c0 = self->sizes[1];
        int64_t sz = offset >= 0 ? (r0 < c0 - offset ? r0 : c0 - offset) : (r0 + offset < c0 ? r0 + offset : c0);
        if (sz < 0) {
            od_cx_scope_end(&sc);
            return od_error_set(err, OD_EINVAL, "numel: integer multiplication overflow");
        }
        od_tensor *v = od_cx_call(&sc, OD_OPID_diagonal, 4, od_tensor_v(self), od_int(offset), od_int(0), od_int(1));
        r = od_cx_call(&sc, OD_OPID_clone, 2, od_tensor_v(v), od_int(OD_MF_CONTIGUOUS));
    }
    return od_cx_scope_return1(&sc, s, r);
}

/* zeros of sizes like self (dtype, device), through the dispatcher. */
static od_tensor *zeros_like_sizes(od_cx_scope *sc, od_tensor *self, const int64_t *sizes, int n)
{
    return od_cx_call(sc, OD_OPID_zeros, 5, od_list_v(OD_T_INT_LIST, (void *)sizes, (size_t)n),
                      od_dtype_v(self->dtype), od_none(), od_device_v(self->device), od_none());
}

/* copy_ of src into the view v (owned by the scope or borrowed). */
static void copy_into(od_cx_scope *sc, od_tensor *v, od_tensor *src)
{
    if (v && src)
        od_cx_call(sc, OD_OPID_copy_, 3, od_tensor_v(v), od_tensor_v(src), od_bool(false));
}

/* A view made outside the scope, handed to it (NULL on failure, which the
 * scope records). */
static od_tensor *scoped(od_cx_scope *sc, od_status st, od_tensor *t)
{
    if (sc->st)
        return NULL;
    if (st) {
        sc->st = st;
        return NULL;
    }
    if (sc->n == OD_CX_SCOPE_MAX) {
        od_tensor_release(t);
        sc->st = od_error_set(sc->err, OD_EINTERNAL, "a composite kernel made too many calls");
        return NULL;
    }
    sc->tmp[sc->n++] = t;
    return t;
}

static od_status check_slice_size(od_tensor *src, od_tensor *v, od_error *err)
{
    bool same = src->ndim == v->ndim;
    for (int i = 0; same && i < v->ndim; i++)
        same = src->sizes[i] == v->sizes[i];
    if (same)
        return OD_OK;
    char a[160], b[160];
    od_shape_print(src->sizes, src->ndim, a, sizeof a);
    od_shape_print(v->sizes, v->ndim, b, sizeof b);
    return od_error_set(err, OD_EINVAL, "expected src to have a size equal to the slice of self. src size = %s, "
                        "slice size = %s", a, b);
}

OD_CX_KERNEL(od_cea_view_scatter)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_tensor *self, *src = NULL;
    od_status st = od_cx_arg_tensor(op, s, 0, &self, err);
    if (st)
        return st;
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *out = NULL, *v = NULL;
    switch (id) {
    case OD_OPID_diag_embed: {
        int64_t offset, dim1, dim2;
        int d1, d2;
        if ((st = od_cx_arg_int(op, s, 1, &offset, err)) || (st = od_cx_arg_int(op, s, 2, &dim1, err)) ||
            (st = od_cx_arg_int(op, s, 3, &dim2, err)))
            return st;
        if (self->ndim + 1 > OD_MAX_DIMS)
            return od_error_set(err, OD_EINVAL, "diag_embed: a tensor has at most %d dimensions", OD_MAX_DIMS);
        if ((st = od_wrap_dim(dim1, self->ndim + 1, &d1, err)) || (st = od_wrap_dim(dim2, self->ndim + 1, &d2, err)))
            return st;
        if (d1 == d2)
            return od_error_set(err, OD_EINVAL, "diagonal dimensions cannot be identical %" PRId64 ", %" PRId64,
                                dim1, dim2);
        /* |offset| + last as ATen computes it, wrapping (defined here in
         * unsigned arithmetic); a result outside SymInt's range is refused
         * with its message, a negative one by zeros */
        int64_t len = wrapped_diag_len(self->sizes[self->ndim - 1], offset);
        if (len < -(INT64_C(1) << 62))
            return od_error_set(err, OD_EINVAL, "IntArrayRef contains an int that cannot be represented as a SymInt: %" PRId64,
                                len);
        int64_t sizes[OD_MAX_DIMS];
        int lo = d1 < d2 ? d1 : d2, hi = d1 < d2 ? d2 : d1, n = 0;
        for (int i = 0, j = 0; i < self->ndim + 1; i++)
            sizes[n++] = (i == lo || i == hi) ? len : self->sizes[j++];
        out = zeros_like_sizes(&sc, self, sizes, n);
        if (out) {
            st = od_cx_diagonal_view(out, offset, d1, d2, &v, err);
            v = scoped(&sc, st, v);
        }
        copy_into(&sc, v, self);
        break;
    }
    case OD_OPID_narrow_copy: {
        int64_t dim, start, length;
        int d;
        if ((st = od_cx_arg_int(op, s, 1, &dim, err)) || (st = od_cx_arg_int(op, s, 2, &start, err)) ||
            (st = od_cx_arg_int(op, s, 3, &length, err)))
            return st;
        if (self->ndim == 0)
            return od_error_set(err, OD_EINVAL, "narrow() cannot be applied to a 0-dim tensor.");
        if (dim >= self->ndim) /* narrow_copy_dense_cpu's own check, before any dim wrapping */
            return od_error_set(err, OD_EINVAL,
                                "Expected dim < static_cast<int64_t>(self_sizes.size()) to be true, but got false.  "
                                "(Could this error message be improved?  If so, please report an enhancement "
                                "request to PyTorch.)");
        if ((st = od_wrap_dim(dim, self->ndim, &d, err)))
            return st;
        int64_t size = self->sizes[d];
        if (start < 0) { /* ATen wraps start as a dim (maybe_wrap_dim): an empty dim takes -1 and 0 */
            int64_t n = size > 0 ? size : 1;
            if (start < -n)
                return od_error_set(err, OD_EINVAL,
                                    "Dimension out of range (expected to be in range of [%" PRId64 ", %" PRId64
                                    "], but got %" PRId64 ")",
                                    -n, n - 1, start);
            start += n;
        }
        if (length < 0 || start > size - length) /* one check for both in narrow_copy_dense_cpu_out */
            return od_error_set(err, OD_EINVAL, "start (%" PRId64 ") + length (%" PRId64
                                ") exceeds dimension size (%" PRId64 ").", start, length, size);
        if (length == 0)
            start = 0;
        v = od_cx_call(&sc, OD_OPID_slice_Tensor, 5, od_tensor_v(self), od_int(d), od_int(start),
                       od_int(start + length), od_int(1));
        out = od_cx_call(&sc, OD_OPID_clone, 2, od_tensor_v(v), od_int(OD_MF_CONTIGUOUS));
        break;
    }
    case OD_OPID_diagonal_scatter: {
        int64_t offset, dim1, dim2;
        if ((st = od_cx_arg_tensor(op, s, 1, &src, err)) || (st = od_cx_arg_int(op, s, 2, &offset, err)) ||
            (st = od_cx_arg_int(op, s, 3, &dim1, err)) || (st = od_cx_arg_int(op, s, 4, &dim2, err)))
            return st;
        out = od_cx_call(&sc, OD_OPID_clone, 2, od_tensor_v(self), od_none());
        if (out) {
            st = od_cx_diagonal_view(out, offset, dim1, dim2, &v, err);
            v = scoped(&sc, st, v);
        }
        if (v && (sc.st = check_slice_size(src, v, err)))
            v = NULL;
        copy_into(&sc, v, src);
        break;
    }
    case OD_OPID_as_strided_scatter: {
        const int64_t *sizes, *strides;
        int n, ns;
        bool has_off = false;
        int64_t off = 0;
        if ((st = od_cx_arg_tensor(op, s, 1, &src, err)) || (st = od_cx_arg_int_list(op, s, 2, &sizes, &n, err)) ||
            (st = od_cx_arg_int_list(op, s, 3, &strides, &ns, err)) ||
            (st = od_cx_arg_opt_int(op, s, 4, &has_off, &off, err)))
            return st;
        if (n != ns)
            return od_error_set(err, OD_EINVAL, "mismatch in length of strides and shape");
        out = od_cx_call(&sc, OD_OPID_clone, 2, od_tensor_v(self), od_none());
        if (out) {
            st = od_tensor_as_strided(out, sizes, strides, n, has_off ? off : out->offset, &v, err);
            v = scoped(&sc, st, v);
        }
        if (v && (sc.st = check_slice_size(src, v, err)))
            v = NULL;
        copy_into(&sc, v, src);
        break;
    }
    default:
        od_cx_scope_end(&sc);
        return od_error_set(err, OD_EINTERNAL, "od_cea_view_scatter registered for %s", od_op_name(op));
    }
    return od_cx_scope_return1(&sc, s, out);
}

/* ---- in-place view changes ---- */

/* resize_: self's sizes, contiguous strides, its offset kept; a storage too
 * small is replaced by a larger one holding the old bytes first (the new
 * bytes are zeros). */
static od_status resize(od_tensor *self, const int64_t *sizes, int n, od_error *err)
{
    if (n > OD_MAX_DIMS)
        return od_error_set(err, OD_EINVAL, "resize_: at most %d dimensions are supported, got %d", OD_MAX_DIMS, n);
    int64_t numel = 1;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0) {
            char t[256];
            od_shape_print(sizes, n, t, sizeof t);
            return od_error_set(err, OD_EINVAL,
                                "Trying to create tensor with negative dimension %" PRId64 ": %s", sizes[i], t);
        }
        if (__builtin_mul_overflow(numel, sizes[i], &numel))
            return od_error_set(err, OD_EINVAL, "numel: integer multiplication overflow");
    }
    size_t item = od_dtype_size(self->dtype);
    int64_t elems;
    uint64_t need;
    if (__builtin_add_overflow(numel, numel ? self->offset : 0, &elems) ||
        __builtin_mul_overflow((uint64_t)elems, (uint64_t)item, &need) || need > SIZE_MAX)
        return od_error_set(err, OD_ETOOLARGE, "resize_: %" PRId64 " elements are too many", numel);
    if (self->storage && need > self->storage->nbytes) {
        /* the new storage: a flat tensor of elems elements on self's device,
         * the old bytes copied in by the backend's copy_ */
        int64_t all = (int64_t)need / (int64_t)item, old = (int64_t)(self->storage->nbytes / item);
        od_tensor *fresh = NULL, *head = NULL, *prev = NULL;
        od_status st = od_tensor_empty(&all, 1, self->dtype, self->device, &fresh, err);
        if (st == OD_OK && old > 0) {
            int64_t one = 1;
            st = od_tensor_as_strided(self, &old, &one, 1, 0, &prev, err);
            if (st == OD_OK)
                st = od_tensor_as_strided(fresh, &old, &one, 1, 0, &head, err);
            od_value a[3] = {od_tensor_v(head), od_tensor_v(prev), od_bool(false)};
            od_tensor *r = NULL;
            if (st == OD_OK)
                st = od_call_builtin1(OD_OPID_copy_, a, 3, &r, err);
            od_tensor_release(r);
        }
        od_tensor_release(head);
        od_tensor_release(prev);
        if (st) {
            od_tensor_release(fresh);
            return st;
        }
        od_storage *old_storage = self->storage;
        od_storage_retain(fresh->storage);
        self->storage = fresh->storage;
        od_storage_release(old_storage);
        od_tensor_release(fresh);
    }
    int64_t stride = 1;
    for (int i = n - 1; i >= 0; i--) {
        self->sizes[i] = sizes[i];
        self->strides[i] = stride;
        stride *= sizes[i] > 1 ? sizes[i] : 1;
    }
    self->ndim = n;
    return OD_OK;
}

OD_CX_KERNEL(od_cea_view_inplace)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_tensor *self, *v = NULL;
    od_status st = od_cx_arg_tensor(op, s, 0, &self, err);
    if (st)
        return st;
    if (self->batched_value)
        return od_error_set(err, OD_EUNSUPPORTED, "%s changes self's shape in place, which vmap does not support",
                            od_op_name(op));
    int64_t a = 0, b = 0;
    switch (id) {
    case OD_OPID_squeeze_:
        st = od_tensor_squeeze(self, &v, err);
        break;
    case OD_OPID_squeeze__dim:
        if (!(st = od_cx_arg_int(op, s, 1, &a, err)))
            st = od_tensor_squeeze_dim(self, a, &v, err);
        break;
    case OD_OPID_unsqueeze_:
        if (!(st = od_cx_arg_int(op, s, 1, &a, err)))
            st = od_tensor_unsqueeze(self, a, &v, err);
        break;
    case OD_OPID_transpose_:
        if (!(st = od_cx_arg_int(op, s, 1, &a, err)) && !(st = od_cx_arg_int(op, s, 2, &b, err)))
            st = od_tensor_transpose(self, a, b, &v, err);
        break;
    case OD_OPID_resize_: {
        const int64_t *sizes;
        int n, mf;
        if ((st = od_cx_arg_int_list(op, s, 1, &sizes, &n, err)) ||
            (st = od_cx_arg_memory_format(op, s, 2, &mf, err)))
            return st;
        bool none = s->args[2].tag == OD_T_NONE;
        if (mf == OD_MF_PRESERVE && !none)
            return od_error_set(err, OD_EINVAL, "Unsupported memory formatPreserve");
        /* channels_last: the contiguous resize, then torch's
         * empty_tensor_restride (the rank is checked before anything moves) */
        int64_t cl[OD_MAX_DIMS];
        bool restride = mf == OD_MF_CHANNELS_LAST || mf == OD_MF_CHANNELS_LAST_3D;
        if (restride && (st = od_memory_format_strides(sizes, n, (od_memory_format)mf, cl, err)))
            return st;
        if ((st = resize(self, sizes, n, err)))
            return st;
        if (restride)
            memcpy(self->strides, cl, (size_t)n * sizeof(int64_t));
        od_tensor_retain(self);
        return od_cx_return1(s, self);
    }
    default:
        return od_error_set(err, OD_EINTERNAL, "od_cea_view_inplace registered for %s", od_op_name(op));
    }
    if (st)
        return st;
    /* the view's geometry becomes self's: same storage, so only metadata moves */
    self->ndim = v->ndim;
    memcpy(self->sizes, v->sizes, sizeof self->sizes);
    memcpy(self->strides, v->strides, sizeof self->strides);
    self->offset = v->offset;
    od_tensor_release(v);
    od_tensor_retain(self);
    return od_cx_return1(s, self);
}
