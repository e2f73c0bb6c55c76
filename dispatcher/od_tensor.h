/* od_tensor.h — dtypes, devices, reference-counted storage and strided views.
 *
 * Invariants:
 *  - A tensor is a view (sizes, strides in elements, offset in elements) over
 *    one storage. Views share the storage and hold a reference on it.
 *  - Tensors and storages are reference counted with atomics; a new tensor
 *    starts at 1. od_tensor_release(NULL) is a no-op.
 *  - t->keys is derived state: backend key of t->device, plus its Autograd
 *    key when requires_grad, plus Batched for a batched wrapper. Only
 *    od_tensor_refresh_keys() writes it.
 *  - ndim <= OD_MAX_DIMS; every size >= 0; numel fits in int64_t and the
 *    byte size of any storage fits in size_t (checked at creation).
 *  - Meta tensors have a storage with data == NULL: shapes only.
 */
#ifndef OD_TENSOR_H
#define OD_TENSOR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "od_error.h"
#include "od_keys.h"

#define OD_MAX_DIMS 16

/* X(enum suffix, torch name, OIP datatype, element size, c type) */
#define OD_DTYPES(X)                                   \
    X(BOOL, "bool", "BOOL", 1, bool)                   \
    X(UINT8, "uint8", "UINT8", 1, uint8_t)             \
    X(INT8, "int8", "INT8", 1, int8_t)                 \
    X(INT16, "int16", "INT16", 2, int16_t)             \
    X(INT32, "int32", "INT32", 4, int32_t)             \
    X(INT64, "int64", "INT64", 8, int64_t)             \
    X(FLOAT16, "float16", "FP16", 2, uint16_t)         \
    X(BFLOAT16, "bfloat16", "BF16", 2, uint16_t)       \
    X(FLOAT32, "float32", "FP32", 4, float)            \
    X(FLOAT64, "float64", "FP64", 8, double)

typedef enum od_dtype {
#define OD_X_(e, n, o, s, c) OD_##e,
    OD_DTYPES(OD_X_)
#undef OD_X_
    OD_NUM_DTYPES
} od_dtype;

size_t od_dtype_size(od_dtype dt);
const char *od_dtype_name(od_dtype dt);       /* "float32"; static */
const char *od_dtype_oip_name(od_dtype dt);   /* "FP32"; static */
/* The C++ ScalarType name PyTorch's messages print ("Long", "Float");
 * "Undefined" for an invalid dtype. Static. */
const char *od_dtype_scalar_name(od_dtype dt);
/* Accepts torch names, their aliases ("float", "double", "half", "long",
 * "int", "short", "torch.float32") and OIP names. OD_NUM_DTYPES if unknown. */
od_dtype od_dtype_from_name(const char *name);
bool od_dtype_is_floating(od_dtype dt);
bool od_dtype_is_integral(od_dtype dt, bool include_bool);

/* PyTorch's promoteTypes table (c10/core/ScalarType.h). */
od_dtype od_promote_types(od_dtype a, od_dtype b);
/* c10::canCast: may an in-place result of dtype from be written into to?
 * Not floating into integral, not anything but bool into bool. */
bool od_dtype_can_cast(od_dtype from, od_dtype to);
/* v as an integer (or bool) dtype dt holds it, wrapping as C++'s
 * conversions do (uint8's -9 is 247); v itself for int64 and the floats. */
static inline int64_t od_int_wrap(int64_t v, od_dtype dt)
{
    switch (dt) {
    case OD_BOOL: return v != 0;
    case OD_UINT8: return (uint8_t)v;
    case OD_INT8: return (int8_t)v;
    case OD_INT16: return (int16_t)v;
    case OD_INT32: return (int32_t)v;
    default: return v;
    }
}
/* torch.get_default_dtype(): float32. */
#define OD_DEFAULT_FLOAT OD_FLOAT32

typedef enum od_device_type { OD_DEV_CPU, OD_DEV_CUDA, OD_DEV_META, OD_NUM_DEVICE_TYPES } od_device_type;

typedef struct od_device {
    od_device_type type;
    int index; /* CUDA ordinal; 0 for cpu and meta */
} od_device;

/* Parses "cpu", "cuda", "cuda:1", "meta". Returns OD_EINVAL with a message. */
od_status od_device_parse(const char *s, od_device *out, od_error *err);
/* Writes "cpu" / "cuda:0" / "meta"; returns the length needed. */
int od_device_print(od_device d, char *buf, size_t cap);
/* "cpu", "cuda", "meta" (static). */
const char *od_device_type_name(od_device_type t);
bool od_device_eq(od_device a, od_device b);
od_key od_device_key(od_device d); /* CPU, CUDA or Meta */

/* A device allocator. Backends register one per device type; the runtime owns
 * the CPU allocator. alloc returns NULL and fills err on failure. */
typedef struct od_allocator {
    void *(*alloc)(void *ctx, int device_index, size_t nbytes, od_error *err);
    void (*free)(void *ctx, int device_index, void *ptr, size_t nbytes);
    void *ctx;
} od_allocator;

/* Borrowed: the allocator must outlive every storage it allocates. */
void od_register_allocator(od_device_type type, const od_allocator *a);

typedef struct od_storage {
    atomic_long refcount;
    void *data;       /* NULL for meta and for zero bytes */
    size_t nbytes;
    od_device device;
    const od_allocator *allocator; /* NULL: data is not ours to free */
    void (*deleter)(void *ctx, void *data); /* for wrapped external memory */
    void *deleter_ctx;
    /* PyTorch's version counter, shared by every view of the storage: an
     * in-place operator bumps it (the dispatcher does, at the backend key),
     * and autograd compares it with the version a saved tensor had. */
    atomic_uint version;
} od_storage;

/* New storage of nbytes on device. CPU storage reads as zeros: no byte an
 * earlier user of the memory wrote can be seen through it. */
od_status od_storage_new(od_device device, size_t nbytes, od_storage **out, od_error *err);
/* New storage around external memory; deleter (may be NULL) runs on last release. */
od_status od_storage_wrap(od_device device, void *data, size_t nbytes,
                          void (*deleter)(void *ctx, void *data), void *deleter_ctx,
                          od_storage **out, od_error *err);
void od_storage_retain(od_storage *s);
void od_storage_release(od_storage *s);

/* Registered allocator of a device type, or NULL (borrowed). */
const od_allocator *od_get_allocator(od_device_type type);

/* Per-thread cap on the bytes of one allocation (0 = unlimited, the default).
 * od_storage_new (so od_tensor_empty and every output) checks it before
 * allocating and fails with OD_ETOOLARGE "output of N bytes exceeds the limit
 * of M bytes". It applies to meta storages too, which allocate nothing, so
 * running a call on Meta checks its outputs against the limit for free.
 * od_storage_wrap is not limited (the memory already exists). */
void od_set_alloc_limit(size_t max_bytes);
size_t od_get_alloc_limit(void);

/* ---- the CPU allocator (alloc.c) ----
 * 64-byte aligned. Blocks of at least OD_CPU_CACHE_MIN_BLOCK bytes are rounded
 * up to a size class (4 classes per power of two, at most 25% slack) and kept
 * in a cache when freed, so a repeated large allocation reuses memory that is
 * already mapped and faulted in. Smaller blocks go straight to the C library.
 * Thread-safe. The free callback must receive the nbytes given to alloc. */
#define OD_CPU_CACHE_MIN_BLOCK ((size_t)256 * 1024)
#define OD_CPU_CACHE_DEFAULT_LIMIT ((size_t)1 << 30)
const od_allocator *od_cpu_allocator(void); /* static; registered for OD_DEV_CPU */
/* The allocator hands out zeroed blocks. This one does not: only for a
 * caller that writes every byte before anyone reads it (a request body).
 * New block (NULL + err on failure); give it back with od_cpu_free. */
void *od_cpu_alloc_uninit(size_t nbytes, od_error *err);
/* Like od_cpu_alloc_uninit, but filled with 0xA5 in poison mode: for tensor
 * data a kernel promises to overwrite (od_tensor_empty_uninit). */
void *od_cpu_alloc_overwrite(size_t nbytes, od_error *err);
void od_cpu_set_poison(bool on);
bool od_cpu_get_poison(void);
void od_cpu_free(void *ptr, size_t nbytes); /* nbytes as given to the alloc */

typedef struct od_cpu_alloc_info {
    size_t in_use_bytes;  /* requested bytes of live CPU allocations */
    size_t cached_bytes;  /* bytes of free blocks held by the cache */
    size_t cache_limit;   /* cap on cached_bytes */
    uint64_t hits;        /* large allocations served from the cache */
    uint64_t misses;      /* large allocations that went to the system */
    uint64_t evictions;   /* cached blocks returned to the system */
} od_cpu_alloc_info;
void od_cpu_alloc_stats(od_cpu_alloc_info *out); /* out: caller's */
/* Sets the cap (default OD_CPU_CACHE_DEFAULT_LIMIT; 0 disables caching) and
 * evicts down to it at once. */
void od_cpu_cache_set_limit(size_t max_bytes);
/* Returns every cached block to the system. */
void od_cpu_cache_empty(void);

typedef struct od_tensor {
    atomic_long refcount;
    od_storage *storage; /* owned reference */
    od_dtype dtype;
    od_device device;
    int ndim;
    int64_t sizes[OD_MAX_DIMS];
    int64_t strides[OD_MAX_DIMS]; /* in elements */
    int64_t offset;               /* in elements */
    bool requires_grad;
    /* PyTorch's wrapped number: a Python number passed where a Tensor is
     * declared, held as a 0-dim int64/float64/bool tensor that takes part in
     * type promotion as a Scalar would (int8 + 1 stays int8). */
    bool wrapped_number;
    od_keyset keys;
    /* Batched wrapper (vmap): value is the physical tensor, bdim its batch
     * dimension, level the vmap level; NULL value for ordinary tensors. */
    struct od_tensor *batched_value;
    int bdim, level;
    /* Autograd metadata, owned by the autograd engine (NULL when none). */
    void *autograd;
    void (*autograd_free)(void *autograd);
} od_tensor;

/* The version counter of t's storage, and one in-place modification of it. */
static inline unsigned od_tensor_version(const od_tensor *t)
{
    return t->storage ? atomic_load_explicit(&t->storage->version, memory_order_relaxed) : 0;
}
static inline void od_tensor_bump_version(od_tensor *t)
{
    if (t->storage)
        atomic_fetch_add_explicit(&t->storage->version, 1, memory_order_relaxed);
}

/* ---- creation (all return a new reference in *out) ---- */

/* Contiguous; CPU data reads as zeros. Checks sizes (non-negative, rank,
 * overflow). */
od_status od_tensor_empty(const int64_t *sizes, int ndim, od_dtype dtype, od_device device,
                          od_tensor **out, od_error *err);
/* The same with unspecified contents, for a kernel that writes every
 * element before anything can read it (it saves clearing the memory). In
 * poison mode (od_cpu_set_poison, or OD_CPU_POISON=1 in the environment;
 * the test suites turn it on) the bytes are 0xA5 instead, so a kernel that
 * misses elements fails its tests rather than leaking old bytes. */
od_status od_tensor_empty_uninit(const int64_t *sizes, int ndim, od_dtype dtype, od_device device,
                                 od_tensor **out, od_error *err);
/* Contiguous tensor over an existing storage (storage: borrowed, retained). */
od_status od_tensor_from_storage(od_storage *storage, const int64_t *sizes, int ndim,
                                 od_dtype dtype, od_tensor **out, od_error *err);
/* Uninitialised tensor with the same sizes, dtype and device as t (contiguous). */
od_status od_tensor_empty_like(const od_tensor *t, od_tensor **out, od_error *err);
/* 0-dim CPU tensor holding v converted to dtype. */
od_status od_tensor_scalar(double v, od_dtype dtype, od_tensor **out, od_error *err);

void od_tensor_retain(od_tensor *t);
void od_tensor_release(od_tensor *t);
/* Recomputes t->keys from device, requires_grad and batched_value. */
void od_tensor_refresh_keys(od_tensor *t);

/* ---- shape helpers (borrowed arrays) ---- */
/* Product of sizes with the creation checks: ndim in [0, OD_MAX_DIMS]
 * (OD_EINVAL), every size >= 0 (OD_EINVAL naming the dim), no int64 overflow
 * (OD_ETOOLARGE). */
od_status od_shape_numel(const int64_t *sizes, int ndim, int64_t *numel, od_error *err);
/* Row-major strides of a contiguous tensor, as torch computes them: stride[i]
 * is the product of max(size[j], 1) over j > i. */
void od_contiguous_strides(const int64_t *sizes, int ndim, int64_t *strides);

/* ---- queries (borrowed t) ---- */
int64_t od_tensor_numel(const od_tensor *t);
size_t od_tensor_nbytes(const od_tensor *t); /* numel * element size */
/* (SIZE_MAX when an expanded view names more bytes than size_t holds.) */
bool od_tensor_is_contiguous(const od_tensor *t);

/* torch.memory_format, numbered like c10::MemoryFormat. Our tensors are
 * strided, so channels_last is a stride order: (N, C, H, W) laid out as
 * N, H, W, C (and N, D, H, W, C for channels_last_3d). */
typedef enum od_memory_format {
    OD_MF_CONTIGUOUS = 0,
    OD_MF_PRESERVE = 1,
    OD_MF_CHANNELS_LAST = 2,
    OD_MF_CHANNELS_LAST_3D = 3,
} od_memory_format;
/* "contiguous_format", "torch.channels_last", ...; static. */
const char *od_memory_format_name(od_memory_format mf);
/* The strides (caller's array of ndim) of a dense tensor of sizes laid out in
 * mf (not PRESERVE), as c10's get_channels_last_strides_2d/3d compute them.
 * OD_EINVAL "required rank 4 tensor to use channels_last format". */
od_status od_memory_format_strides(const int64_t *sizes, int ndim, od_memory_format mf, int64_t *strides,
                                   od_error *err);
/* t->is_contiguous(memory_format): size-1 dims are ignored; PRESERVE and a
 * rank that does not fit the format read as plain contiguity / false. */
bool od_tensor_is_contiguous_as(const od_tensor *t, od_memory_format mf);
/* t.suggest_memory_format(): channels_last(_3d) for a tensor whose strides
 * are that layout and not also plain contiguous, else contiguous. */
od_memory_format od_tensor_suggest_memory_format(const od_tensor *t);
/* torch's is_non_overlapping_and_dense: the dims of size > 1, ordered by
 * stride, tile the storage exactly (and nothing is empty). */
bool od_tensor_is_non_overlapping_and_dense(const od_tensor *t);
/* The strides empty_like(t, memory_format=mf) gives: PRESERVE keeps t's
 * strides when t is non-overlapping and dense, else takes its suggested
 * format. Errors as od_memory_format_strides. */
od_status od_memory_format_strides_like(const od_tensor *t, od_memory_format mf, int64_t *strides,
                                        od_error *err);
/* Address of element [0,...,0] (storage data + offset). NULL for meta. */
void *od_tensor_data(const od_tensor *t);
/* Writes "[2, 3]"; returns length needed. */
int od_shape_print(const int64_t *sizes, int ndim, char *buf, size_t cap);
/* Wraps a possibly negative dim into [0, ndim); for ndim == 0 accepts -1 and 0
 * (PyTorch's scalar rule). Error names the op's argument "dim". */
od_status od_wrap_dim(int64_t dim, int ndim, int *out, od_error *err);
/* The same without the scalar rule, as torch's tensor.size(dim) reads a dim:
 * a 0-dim tensor has none ("Dimension specified as -2 but tensor has no
 * dimensions"). */
od_status od_wrap_dim_strict(int64_t dim, int ndim, int *out, od_error *err);
/* t->sizes at dim wrapped that way (t borrowed): torch's t.size(dim) */
od_status od_tensor_size_at(const od_tensor *t, int64_t dim, int64_t *out, od_error *err);

/* ---- views: new tensor sharing t's storage (t borrowed) ---- */
/* A view holds its own reference on the storage, not on t, so it outlives t.
 * Views are plain tensors: requires_grad false, no autograd metadata, not
 * batched (the autograd and vmap kernels add those). Errors use PyTorch's
 * messages; OD_EINVAL for bad arguments (dims, indices, steps), OD_EMISMATCH
 * for shapes that do not fit (view, expand, as_strided bounds). */
od_status od_tensor_as_strided(od_tensor *t, const int64_t *sizes, const int64_t *strides, int ndim,
                             int64_t offset, od_tensor **out, od_error *err);
/* view(): fails with OD_EMISMATCH when strides are incompatible (like torch). */
od_status od_tensor_view(od_tensor *t, const int64_t *sizes, int ndim, od_tensor **out, od_error *err);
/* Infers one -1 in sizes against numel; writes the result into out_sizes. */
od_status od_infer_size(const int64_t *sizes, int ndim, int64_t numel, int64_t *out_sizes,
                        od_error *err);
/* True when view() of t to sizes is possible without a copy; fills strides. */
bool od_compute_view_strides(const od_tensor *t, const int64_t *sizes, int ndim, int64_t *strides);
od_status od_tensor_transpose(od_tensor *t, int64_t d0, int64_t d1, od_tensor **out, od_error *err);
od_status od_tensor_t(od_tensor *t, od_tensor **out, od_error *err); /* ndim <= 2 */
od_status od_tensor_permute(od_tensor *t, const int64_t *dims, int ndims, od_tensor **out, od_error *err);
od_status od_tensor_slice(od_tensor *t, int64_t dim, int64_t start, int64_t end, int64_t step,
                   od_tensor **out, od_error *err); /* clamps like torch; step > 0 */
od_status od_tensor_select(od_tensor *t, int64_t dim, int64_t index, od_tensor **out, od_error *err);
od_status od_tensor_expand(od_tensor *t, const int64_t *sizes, int ndim, od_tensor **out, od_error *err);
od_status od_tensor_squeeze(od_tensor *t, od_tensor **out, od_error *err);
od_status od_tensor_squeeze_dim(od_tensor *t, int64_t dim, od_tensor **out, od_error *err);
od_status od_tensor_unsqueeze(od_tensor *t, int64_t dim, od_tensor **out, od_error *err);

/* ---- broadcasting and type promotion ---- */

/* Broadcast shape of a and b (torch.broadcast_shapes); error names both shapes. */
od_status od_broadcast_shapes(const int64_t *a, int na, const int64_t *b, int nb, int64_t *out,
                              int *nout, od_error *err);

/* One participant of torch.result_type: a tensor (borrowed), or a Python
 * scalar (bool, int or float literal with no dtype of its own). */
typedef struct od_result_arg {
    const od_tensor *tensor; /* NULL for a scalar */
    enum { OD_SCALAR_BOOL, OD_SCALAR_INT, OD_SCALAR_FLOAT } scalar_kind;
} od_result_arg;

/* torch.result_type: dimensioned tensors > 0-dim tensors > Python scalars,
 * a higher category (bool < integral < floating) lifting the result. */
od_dtype od_result_type(const od_result_arg *args, int n);
/* (n == 0 gives OD_NUM_DTYPES. A Python float counts as OD_DEFAULT_FLOAT, an
 * int as int64, a bool as bool.) */

#endif
