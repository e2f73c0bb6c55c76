/* tensor.c — devices, storages, tensors, views and broadcasting.
 *
 * Invariants:
 *  - Every tensor this file hands out satisfies od_tensor.h's invariants:
 *    ndim <= OD_MAX_DIMS, sizes >= 0, strides >= 0, offset >= 0, and (for a
 *    tensor with a storage) every element it can address lies inside the
 *    storage. Public view functions validate their arguments; make_view()
 *    trusts geometry that was derived from a valid tensor.
 *  - A view holds its own reference on the storage, never on the base
 *    tensor, so a view outlives its base. Views are plain tensors: no
 *    autograd metadata, no batched wrapper, requires_grad false.
 *  - Error messages follow PyTorch's wording so a PyTorch user recognises
 *    them; every failure leaves *out untouched and allocates nothing.
 */
#include <inttypes.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "od_half.h"
#include "od_tensor.h"

/* ---- devices ---- */

static const char *const device_type_names[OD_NUM_DEVICE_TYPES] = {
    [OD_DEV_CPU] = "cpu", [OD_DEV_CUDA] = "cuda", [OD_DEV_META] = "meta"};

const char *od_device_type_name(od_device_type t)
{
    return (unsigned)t < OD_NUM_DEVICE_TYPES ? device_type_names[t] : "?";
}

/* A device a storage may live on: only CUDA has ordinals. */
static bool device_valid(od_device d)
{
    return (unsigned)d.type < OD_NUM_DEVICE_TYPES && d.index >= 0 &&
           (d.type == OD_DEV_CUDA || d.index == 0);
}

od_status od_device_parse(const char *s, od_device *out, od_error *err)
{
    if (!s)
        s = "";
    const char *colon = strchr(s, ':');
    size_t tlen = colon ? (size_t)(colon - s) : strlen(s);
    int type = -1;
    for (int i = 0; i < OD_NUM_DEVICE_TYPES; i++)
        if (strlen(device_type_names[i]) == tlen && strncmp(s, device_type_names[i], tlen) == 0)
            type = i;
    if (type < 0)
        return od_error_set(err, OD_EINVAL,
                            "Expected one of cpu, cuda, meta device type at start of device "
                            "string: %s",
                            s);
    long index = 0;
    if (colon) {
        const char *p = colon + 1;
        size_t n = strlen(p);
        bool ok = n > 0 && n <= 9 && (n == 1 || p[0] != '0'); /* no sign, no leading zeros */
        for (size_t i = 0; ok && i < n; i++)
            ok = p[i] >= '0' && p[i] <= '9';
        if (!ok)
            return od_error_set(err, OD_EINVAL,
                                "Invalid device string: '%s' (the device index must be a "
                                "non-negative integer)",
                                s);
        index = strtol(p, NULL, 10);
    }
    if (type == OD_DEV_CPU && index != 0)
        return od_error_set(err, OD_EINVAL, "CPU device index must be -1 or zero, got %ld", index);
    if (type == OD_DEV_META && index != 0)
        return od_error_set(err, OD_EINVAL, "meta device index must be zero, got %ld", index);
    out->type = (od_device_type)type;
    out->index = (int)index;
    return OD_OK;
}

int od_device_print(od_device d, char *buf, size_t cap)
{
    if ((unsigned)d.type >= OD_NUM_DEVICE_TYPES)
        return snprintf(buf, cap, "unknown");
    if (d.type == OD_DEV_CUDA)
        return snprintf(buf, cap, "cuda:%d", d.index);
    /* a copy, not snprintf("%s"): every call's dispatch record prints one */
    const char *name = device_type_names[d.type];
    size_t len = strlen(name);
    if (cap) {
        size_t k = len < cap - 1 ? len : cap - 1;
        memcpy(buf, name, k);
        buf[k] = '\0';
    }
    return (int)len;
}

bool od_device_eq(od_device a, od_device b) { return a.type == b.type && a.index == b.index; }

od_key od_device_key(od_device d)
{
    switch (d.type) {
    case OD_DEV_CPU: return OD_KEY_CPU;
    case OD_DEV_CUDA: return OD_KEY_CUDA;
    case OD_DEV_META: return OD_KEY_Meta;
    default: return OD_KEY_Undefined;
    }
}

/* ---- allocators and the allocation limit ---- */

static _Atomic(const od_allocator *) allocators[OD_NUM_DEVICE_TYPES];

void od_register_allocator(od_device_type type, const od_allocator *a)
{
    if ((unsigned)type < OD_NUM_DEVICE_TYPES)
        atomic_store(&allocators[type], a);
}

const od_allocator *od_get_allocator(od_device_type type)
{
    if ((unsigned)type >= OD_NUM_DEVICE_TYPES)
        return NULL;
    const od_allocator *a = atomic_load(&allocators[type]);
    if (!a && type == OD_DEV_CPU)
        a = od_cpu_allocator(); /* the runtime owns the CPU allocator */
    return a;
}

static _Thread_local size_t alloc_limit;

void od_set_alloc_limit(size_t max_bytes) { alloc_limit = max_bytes; }
size_t od_get_alloc_limit(void) { return alloc_limit; }

/* ---- storage ---- */

/* Small-object caches. Creating and dropping tiny tensors is the common case
 * of a service handling scalar-sized calls, and malloc/free (plus aligned
 * allocation of a few bytes) dominated that path. Each thread keeps a short
 * free list of storage blocks and tensor structs; a block released on
 * another thread simply joins that thread's list. Lists are bounded and
 * drained by a thread-exit destructor. */
#define OD_SMALL_INLINE 64 /* bytes of data kept inside the storage block */
#if defined(__SANITIZE_ADDRESS__)
#define OD_FREELIST_MAX 0 /* recycle nothing, so ASan still sees use-after-free */
#else
#define OD_FREELIST_MAX 256
#endif

typedef struct storage_block {
    od_storage s;
    _Alignas(64) unsigned char small[OD_SMALL_INLINE];
    struct storage_block *next_free;
} storage_block;

typedef struct tensor_block {
    od_tensor t;
    struct tensor_block *next_free;
} tensor_block;

typedef struct freelists {
    storage_block *storages;
    tensor_block *tensors;
    int nstorages, ntensors;
} freelists;

static _Thread_local freelists t_free;
static pthread_key_t g_free_key;
static pthread_once_t g_free_once = PTHREAD_ONCE_INIT;

static void drain_freelists(void *arg)
{
    freelists *fl = arg;
    while (fl->storages) {
        storage_block *b = fl->storages;
        fl->storages = b->next_free;
        free(b);
    }
    while (fl->tensors) {
        tensor_block *b = fl->tensors;
        fl->tensors = b->next_free;
        free(b);
    }
    fl->nstorages = fl->ntensors = 0;
}

static void make_free_key(void) { pthread_key_create(&g_free_key, drain_freelists); }

/* Registers this thread's lists for draining at thread exit (once per thread). */
static void note_freelist_owner(void)
{
    static _Thread_local bool registered;
    if (!registered) {
        registered = true;
        pthread_once(&g_free_once, make_free_key);
        pthread_setspecific(g_free_key, &t_free);
    }
}

__attribute__((destructor)) static void drain_main_thread_freelists(void) { drain_freelists(&t_free); }

static storage_block *storage_block_get(void)
{
    storage_block *b = t_free.storages;
    if (b) {
        t_free.storages = b->next_free;
        t_free.nstorages--;
        return b;
    }
    return aligned_alloc(_Alignof(storage_block), sizeof(storage_block));
}

static void storage_block_put(storage_block *b)
{
    if (t_free.nstorages >= OD_FREELIST_MAX) {
        free(b);
        return;
    }
    note_freelist_owner();
    b->next_free = t_free.storages;
    t_free.storages = b;
    t_free.nstorages++;
}

static od_status new_storage_struct(od_device device, od_storage **out, od_error *err)
{
    storage_block *b = storage_block_get();
    if (!b)
        return od_error_set(err, OD_ENOMEM, "out of memory allocating a storage");
    od_storage *s = &b->s;
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    s->data = NULL;
    s->nbytes = 0;
    s->device = device;
    s->allocator = NULL;
    s->deleter = NULL;
    s->deleter_ctx = NULL;
    *out = s;
    return OD_OK;
}

/* Releases a storage struct that never got data (error paths). */
static void free_storage_struct(od_storage *s) { storage_block_put((storage_block *)s); }

static od_status storage_new(od_device device, size_t nbytes, bool overwrite, od_storage **out,
                             od_error *err)
{
    if (!device_valid(device))
        return od_error_set(err, OD_EINVAL, "invalid device (type %d, index %d)", (int)device.type,
                            device.index);
    if (alloc_limit && nbytes > alloc_limit)
        return od_error_set(err, OD_ETOOLARGE, "output of %zu bytes exceeds the limit of %zu bytes",
                            nbytes, alloc_limit);
    const od_allocator *a = NULL;
    if (device.type != OD_DEV_META) {
        a = od_get_allocator(device.type);
        if (!a)
            return od_error_set(err, OD_EUNAVAIL,
                                "no allocator for device %s: the %s backend is not available",
                                device_type_names[device.type],
                                device.type == OD_DEV_CUDA ? "CUDA" : "CPU");
    }
    od_storage *s = NULL;
    od_status st = new_storage_struct(device, &s, err);
    if (st != OD_OK)
        return st;
    s->nbytes = nbytes;
    if (device.type == OD_DEV_CPU && nbytes <= OD_SMALL_INLINE) {
        /* Tiny CPU data lives in the block itself: allocator stays NULL, so
         * release frees nothing but the block. */
        s->data = nbytes ? ((storage_block *)s)->small : NULL;
        if (nbytes && (!overwrite || od_cpu_get_poison())) /* the block is recycled: clear */
            memset(s->data, overwrite ? 0xA5 : 0, nbytes);
        *out = s;
        return OD_OK;
    }
    s->allocator = a;
    if (a && nbytes > 0) {
        od_error aerr;
        od_error_clear(&aerr);
        s->data = overwrite && device.type == OD_DEV_CPU ? od_cpu_alloc_overwrite(nbytes, &aerr)
                                                        : a->alloc(a->ctx, device.index, nbytes, &aerr);
        if (!s->data) {
            free_storage_struct(s);
            /* An allocator that forgot to fill its error still yields one. */
            if (aerr.status == OD_OK) {
                char dev[32];
                od_device_print(device, dev, sizeof dev);
                od_error_set(&aerr, device.type == OD_DEV_CPU ? OD_ENOMEM : OD_EDEVMEM,
                             "failed to allocate %zu bytes on %s", nbytes, dev);
            }
            if (err)
                *err = aerr;
            return aerr.status;
        }
    }
    *out = s;
    return OD_OK;
}

od_status od_storage_new(od_device device, size_t nbytes, od_storage **out, od_error *err)
{
    return storage_new(device, nbytes, false, out, err);
}

od_status od_storage_wrap(od_device device, void *data, size_t nbytes,
                          void (*deleter)(void *ctx, void *data), void *deleter_ctx,
                          od_storage **out, od_error *err)
{
    if (!device_valid(device))
        return od_error_set(err, OD_EINVAL, "invalid device (type %d, index %d)", (int)device.type,
                            device.index);
    if (!data && nbytes > 0 && device.type != OD_DEV_META)
        return od_error_set(err, OD_EINVAL, "od_storage_wrap: NULL data for %zu bytes", nbytes);
    od_storage *s = NULL;
    od_status st = new_storage_struct(device, &s, err);
    if (st != OD_OK)
        return st;
    s->data = data;
    s->nbytes = nbytes;
    s->deleter = deleter;
    s->deleter_ctx = deleter_ctx;
    *out = s;
    return OD_OK;
}

void od_storage_retain(od_storage *s)
{
    if (s)
        atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed);
}

void od_storage_release(od_storage *s)
{
    if (!s || atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) != 1)
        return;
    if (s->deleter)
        s->deleter(s->deleter_ctx, s->data);
    else if (s->allocator && s->data)
        s->allocator->free(s->allocator->ctx, s->device.index, s->data, s->nbytes);
    storage_block_put((storage_block *)s);
}

/* ---- shape helpers ---- */

int od_shape_print(const int64_t *sizes, int ndim, char *buf, size_t cap)
{
    size_t len = 0;
    char tmp[32];
#define APPEND_(str)                                      \
    do {                                                  \
        const char *s_ = (str);                           \
        size_t n_ = strlen(s_);                           \
        if (buf && len < cap) {                           \
            size_t room_ = cap - 1 - len;                 \
            memcpy(buf + len, s_, n_ < room_ ? n_ : room_); \
        }                                                 \
        len += n_;                                        \
    } while (0)
    APPEND_("[");
    for (int i = 0; i < ndim; i++) {
        snprintf(tmp, sizeof tmp, "%s%" PRId64, i ? ", " : "", sizes[i]);
        APPEND_(tmp);
    }
    APPEND_("]");
#undef APPEND_
    if (buf && cap)
        buf[len < cap ? len : cap - 1] = '\0';
    return (int)len;
}

/* Big enough for OD_MAX_DIMS sizes of 20 digits each. */
typedef struct {
    char s[OD_MAX_DIMS * 24 + 8];
} shape_buf;

static const char *shape_str(shape_buf *b, const int64_t *sizes, int ndim)
{
    if (ndim < 0)
        ndim = 0;
    if (ndim > OD_MAX_DIMS)
        ndim = OD_MAX_DIMS; /* messages about too many dims print the first ones */
    od_shape_print(sizes, ndim, b->s, sizeof b->s);
    return b->s;
}

static od_status check_ndim(int ndim, const char *what, od_error *err)
{
    if (ndim < 0 || ndim > OD_MAX_DIMS)
        return od_error_set(err, OD_EINVAL, "%s: a tensor has between 0 and %d dimensions, got %d",
                            what, OD_MAX_DIMS, ndim);
    return OD_OK;
}

od_status od_shape_numel(const int64_t *sizes, int ndim, int64_t *numel, od_error *err)
{
    od_status st = check_ndim(ndim, "shape", err);
    if (st != OD_OK)
        return st;
    shape_buf b;
    for (int i = 0; i < ndim; i++)
        if (sizes[i] < 0)
            return od_error_set(err, OD_EINVAL,
                                "Trying to create tensor with negative dimension %" PRId64
                                ": %s (dim %d)",
                                sizes[i], shape_str(&b, sizes, ndim), i);
    /* A zero anywhere makes the product 0; only a product of non-zero sizes
     * can overflow. */
    int64_t n = 1;
    bool overflow = false;
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] == 0) {
            *numel = 0;
            return OD_OK;
        }
        if (!overflow && __builtin_mul_overflow(n, sizes[i], &n))
            overflow = true;
    }
    if (overflow)
        return od_error_set(err, OD_ETOOLARGE,
                            "shape %s has too many elements: the count overflows int64",
                            shape_str(&b, sizes, ndim));
    *numel = n;
    return OD_OK;
}

void od_contiguous_strides(const int64_t *sizes, int ndim, int64_t *strides)
{
    int64_t z = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = z;
        /* Sizes were checked at creation, so this product does not overflow
         * for a non-empty shape; an empty shape keeps its strides finite. */
        int64_t s = sizes[i] > 1 ? sizes[i] : 1;
        if (__builtin_mul_overflow(z, s, &z))
            z = INT64_MAX;
    }
}

/* Bytes of numel elements of dt, checked against size_t. */
static od_status numel_bytes(int64_t numel, od_dtype dt, const int64_t *sizes, int ndim,
                             size_t *out, od_error *err)
{
    size_t bytes = 0;
    if ((uint64_t)numel > SIZE_MAX || __builtin_mul_overflow((size_t)numel, od_dtype_size(dt), &bytes)) {
        shape_buf b;
        return od_error_set(err, OD_ETOOLARGE,
                            "tensor of shape %s and dtype %s is too large: its byte size "
                            "overflows size_t",
                            shape_str(&b, sizes, ndim), od_dtype_name(dt));
    }
    *out = bytes;
    return OD_OK;
}

static od_status check_dtype(od_dtype dt, od_error *err)
{
    if ((unsigned)dt >= OD_NUM_DTYPES)
        return od_error_set(err, OD_EINVAL, "invalid dtype %d", (int)dt);
    return OD_OK;
}

/* ---- tensors ---- */

/* New tensor over s (retained here) with the given geometry (trusted). */
static od_status make_tensor(od_storage *s, od_dtype dtype, od_device device, int ndim,
                             const int64_t *sizes, const int64_t *strides, int64_t offset,
                             od_tensor **out, od_error *err)
{
    tensor_block *b = t_free.tensors;
    if (b) {
        t_free.tensors = b->next_free;
        t_free.ntensors--;
    } else if (!(b = malloc(sizeof *b))) {
        return od_error_set(err, OD_ENOMEM, "out of memory allocating a tensor");
    }
    od_tensor *t = &b->t;
    atomic_init(&t->refcount, 1);
    t->requires_grad = false;
    t->wrapped_number = false;
    t->batched_value = NULL;
    t->bdim = t->level = 0;
    t->autograd = NULL;
    t->autograd_free = NULL;
    od_storage_retain(s);
    t->storage = s;
    t->dtype = dtype;
    t->device = device;
    t->ndim = ndim;
    if (ndim > 0) {
        memcpy(t->sizes, sizes, (size_t)ndim * sizeof *sizes);
        memcpy(t->strides, strides, (size_t)ndim * sizeof *strides);
    }
    t->offset = offset;
    od_tensor_refresh_keys(t);
    *out = t;
    return OD_OK;
}

static od_status make_view(od_tensor *t, int ndim, const int64_t *sizes, const int64_t *strides,
                           int64_t offset, od_tensor **out, od_error *err)
{
    return make_tensor(t->storage, t->dtype, t->device, ndim, sizes, strides, offset, out, err);
}

static od_status tensor_empty(const int64_t *sizes, int ndim, od_dtype dtype, od_device device,
                              bool overwrite, od_tensor **out, od_error *err)
{
    int64_t numel = 0;
    size_t bytes = 0;
    od_status st = check_dtype(dtype, err);
    if (st == OD_OK)
        st = od_shape_numel(sizes, ndim, &numel, err);
    if (st == OD_OK)
        st = numel_bytes(numel, dtype, sizes, ndim, &bytes, err);
    if (st != OD_OK)
        return st;
    od_storage *s = NULL;
    st = storage_new(device, bytes, overwrite, &s, err);
    if (st != OD_OK)
        return st;
    int64_t strides[OD_MAX_DIMS];
    od_contiguous_strides(sizes, ndim, strides);
    st = make_tensor(s, dtype, device, ndim, sizes, strides, 0, out, err);
    od_storage_release(s); /* the tensor holds its own reference */
    return st;
}

od_status od_tensor_empty(const int64_t *sizes, int ndim, od_dtype dtype, od_device device,
                          od_tensor **out, od_error *err)
{
    return tensor_empty(sizes, ndim, dtype, device, false, out, err);
}

od_status od_tensor_empty_uninit(const int64_t *sizes, int ndim, od_dtype dtype, od_device device,
                                 od_tensor **out, od_error *err)
{
    return tensor_empty(sizes, ndim, dtype, device, true, out, err);
}

od_status od_tensor_from_storage(od_storage *storage, const int64_t *sizes, int ndim,
                                 od_dtype dtype, od_tensor **out, od_error *err)
{
    int64_t numel = 0;
    size_t bytes = 0;
    if (!storage)
        return od_error_set(err, OD_EINVAL, "od_tensor_from_storage: NULL storage");
    od_status st = check_dtype(dtype, err);
    if (st == OD_OK)
        st = od_shape_numel(sizes, ndim, &numel, err);
    if (st == OD_OK)
        st = numel_bytes(numel, dtype, sizes, ndim, &bytes, err);
    if (st != OD_OK)
        return st;
    int64_t strides[OD_MAX_DIMS];
    od_contiguous_strides(sizes, ndim, strides);
    if (bytes > storage->nbytes) {
        shape_buf a, b;
        return od_error_set(err, OD_EMISMATCH,
                            "setStorage: sizes %s, strides %s, storage offset 0, and itemsize %zu "
                            "requiring a storage size of %zu are out of bounds for storage of size "
                            "%zu",
                            shape_str(&a, sizes, ndim), shape_str(&b, strides, ndim),
                            od_dtype_size(dtype), bytes, storage->nbytes);
    }
    return make_tensor(storage, dtype, storage->device, ndim, sizes, strides, 0, out, err);
}

od_status od_tensor_empty_like(const od_tensor *t, od_tensor **out, od_error *err)
{
    return od_tensor_empty(t->sizes, t->ndim, t->dtype, t->device, out, err);
}

od_status od_tensor_scalar(double v, od_dtype dtype, od_tensor **out, od_error *err)
{
    od_tensor *t;
    od_device cpu = {OD_DEV_CPU, 0};
    od_status st = od_tensor_empty(NULL, 0, dtype, cpu, &t, err);
    if (st != OD_OK)
        return st;
    void *p = od_tensor_data(t);
    /* Integers: C's conversion in range, torch-on-x86's wrap-around beyond
     * (see od_half.h). */
    int64_t i64 = od_double_to_i64(v);
    int32_t i32 = od_double_to_i32(v);
    switch (dtype) {
    case OD_BOOL: *(bool *)p = v != 0; break; /* NaN is true, as in C */
    case OD_UINT8: *(uint8_t *)p = (uint8_t)i64; break;
    case OD_INT8: *(int8_t *)p = (int8_t)(uint8_t)i32; break;
    case OD_INT16: *(int16_t *)p = (int16_t)(uint16_t)i32; break;
    case OD_INT32: *(int32_t *)p = i32; break;
    case OD_INT64: *(int64_t *)p = i64; break;
    case OD_FLOAT16: *(uint16_t *)p = od_double_to_half(v); break;
    case OD_BFLOAT16: *(uint16_t *)p = od_double_to_bf16(v); break;
    case OD_FLOAT32: *(float *)p = (float)v; break;
    case OD_FLOAT64: *(double *)p = v; break;
    default: break; /* unreachable: od_tensor_empty checked dtype */
    }
    *out = t;
    return OD_OK;
}

void od_tensor_retain(od_tensor *t)
{
    if (t)
        atomic_fetch_add_explicit(&t->refcount, 1, memory_order_relaxed);
}

void od_tensor_release(od_tensor *t)
{
    if (!t || atomic_fetch_sub_explicit(&t->refcount, 1, memory_order_acq_rel) != 1)
        return;
    if (t->autograd && t->autograd_free)
        t->autograd_free(t->autograd);
    od_tensor_release(t->batched_value);
    od_storage_release(t->storage);
    tensor_block *b = (tensor_block *)t;
    if (t_free.ntensors >= OD_FREELIST_MAX) {
        free(b);
        return;
    }
    note_freelist_owner();
    b->next_free = t_free.tensors;
    t_free.tensors = b;
    t_free.ntensors++;
}

void od_tensor_refresh_keys(od_tensor *t)
{
    od_key backend = od_device_key(t->device);
    od_keyset ks = backend == OD_KEY_Undefined ? OD_KS_EMPTY : OD_KS(backend);
    if (t->requires_grad)
        ks = od_ks_add(ks, od_key_autograd_of(backend));
    if (t->batched_value)
        ks = od_ks_add(ks, OD_KEY_Batched);
    t->keys = ks;
}

/* Product of sizes that passed od_shape_numel: a zero anywhere makes it 0
 * (the other sizes alone may overflow), otherwise it fits in int64. */
static int64_t checked_shape_numel(const int64_t *sizes, int ndim)
{
    for (int i = 0; i < ndim; i++)
        if (sizes[i] == 0)
            return 0;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= sizes[i];
    return n;
}

int64_t od_tensor_numel(const od_tensor *t) { return checked_shape_numel(t->sizes, t->ndim); }

size_t od_tensor_nbytes(const od_tensor *t)
{
    /* An expanded view can name more bytes than exist: saturate. */
    size_t n;
    if (__builtin_mul_overflow((size_t)od_tensor_numel(t), od_dtype_size(t->dtype), &n))
        return SIZE_MAX;
    return n;
}

bool od_tensor_is_contiguous(const od_tensor *t)
{
    if (od_tensor_numel(t) == 0)
        return true;
    int64_t z = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->sizes[i] == 1) /* a size-1 dim's stride is never used */
            continue;
        if (t->strides[i] != z)
            return false;
        z *= t->sizes[i];
    }
    return true;
}

const char *od_memory_format_name(od_memory_format mf)
{
    switch (mf) {
    case OD_MF_CONTIGUOUS: return "contiguous_format";
    case OD_MF_PRESERVE: return "preserve_format";
    case OD_MF_CHANNELS_LAST: return "channels_last";
    case OD_MF_CHANNELS_LAST_3D: return "channels_last_3d";
    }
    return "?";
}

/* The dims of a channels_last(_3d) tensor from the innermost out: C, then
 * the spatial dims from the last, then N. */
static int channels_last_order(int ndim, int *order)
{
    int n = 0;
    order[n++] = 1;
    for (int d = ndim - 1; d >= 2; d--)
        order[n++] = d;
    order[n++] = 0;
    return n;
}

od_status od_memory_format_strides(const int64_t *sizes, int ndim, od_memory_format mf, int64_t *strides,
                                   od_error *err)
{
    if (mf == OD_MF_CHANNELS_LAST || mf == OD_MF_CHANNELS_LAST_3D) {
        int want = mf == OD_MF_CHANNELS_LAST ? 4 : 5;
        if (ndim != want)
            return od_error_set(err, OD_EINVAL, "required rank %d tensor to use %s format", want,
                                od_memory_format_name(mf));
        int order[5];
        channels_last_order(ndim, order);
        int64_t z = 1;
        for (int i = 0; i < ndim; i++) {
            strides[order[i]] = z;
            z *= sizes[order[i]] > 1 ? sizes[order[i]] : 1;
        }
        return OD_OK;
    }
    int64_t z = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = z;
        z *= sizes[d] > 1 ? sizes[d] : 1;
    }
    return OD_OK;
}

bool od_tensor_is_contiguous_as(const od_tensor *t, od_memory_format mf)
{
    if (mf != OD_MF_CHANNELS_LAST && mf != OD_MF_CHANNELS_LAST_3D)
        return od_tensor_is_contiguous(t);
    if (t->ndim != (mf == OD_MF_CHANNELS_LAST ? 4 : 5))
        return false;
    if (od_tensor_numel(t) == 0)
        return true;
    int order[5];
    channels_last_order(t->ndim, order);
    int64_t z = 1;
    for (int i = 0; i < t->ndim; i++) {
        int d = order[i];
        if (t->sizes[d] == 1)
            continue;
        if (t->strides[d] != z)
            return false;
        z *= t->sizes[d];
    }
    return true;
}

od_memory_format od_tensor_suggest_memory_format(const od_tensor *t)
{
    if (od_tensor_is_contiguous(t))
        return OD_MF_CONTIGUOUS;
    if (od_tensor_is_contiguous_as(t, OD_MF_CHANNELS_LAST))
        return OD_MF_CHANNELS_LAST;
    if (od_tensor_is_contiguous_as(t, OD_MF_CHANNELS_LAST_3D))
        return OD_MF_CHANNELS_LAST_3D;
    return OD_MF_CONTIGUOUS;
}

bool od_tensor_is_non_overlapping_and_dense(const od_tensor *t)
{
    int idx[OD_MAX_DIMS], m = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->sizes[d] == 0)
            return false;
        if (t->sizes[d] != 1)
            idx[m++] = d;
    }
    for (int i = 1; i < m; i++) /* insertion sort by stride; m <= 16 */
        for (int j = i; j > 0 && t->strides[idx[j]] < t->strides[idx[j - 1]]; j--) {
            int x = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = x;
        }
    int64_t expect = 1;
    for (int j = 0; j < m; j++) {
        if (t->strides[idx[j]] != expect)
            return false;
        expect *= t->sizes[idx[j]];
    }
    return true;
}

od_status od_memory_format_strides_like(const od_tensor *t, od_memory_format mf, int64_t *strides,
                                        od_error *err)
{
    if (mf == OD_MF_PRESERVE) {
        if (od_tensor_is_non_overlapping_and_dense(t) && !od_tensor_is_contiguous(t)) {
            memcpy(strides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
            return OD_OK;
        }
        mf = od_tensor_suggest_memory_format(t);
    }
    return od_memory_format_strides(t->sizes, t->ndim, mf, strides, err);
}

void *od_tensor_data(const od_tensor *t)
{
    if (!t->storage || !t->storage->data)
        return NULL;
    return (char *)t->storage->data + t->offset * (int64_t)od_dtype_size(t->dtype);
}

od_status od_wrap_dim_strict(int64_t dim, int ndim, int *out, od_error *err)
{
    if (ndim == 0)
        return od_error_set(err, OD_EINVAL, "Dimension specified as %" PRId64 " but tensor has no dimensions", dim);
    return od_wrap_dim(dim, ndim, out, err);
}

od_status od_tensor_size_at(const od_tensor *t, int64_t dim, int64_t *out, od_error *err)
{
    int d;
    od_status st = od_wrap_dim_strict(dim, t->ndim, &d, err);
    if (!st)
        *out = t->sizes[d];
    return st;
}

od_status od_wrap_dim(int64_t dim, int ndim, int *out, od_error *err)
{
    int64_t n = ndim <= 0 ? 1 : ndim; /* a 0-dim tensor accepts -1 and 0 */
    if (dim < -n || dim >= n)
        return od_error_set(err, OD_EINVAL,
                            "Dimension out of range (expected to be in range of [%" PRId64
                            ", %" PRId64 "], but got %" PRId64 ")",
                            -n, n - 1, dim);
    *out = (int)(dim < 0 ? dim + n : dim);
    return OD_OK;
}

/* ---- views ---- */

/* a * b for non-negative stride arithmetic; saturates instead of overflowing
 * (a size-1 dim may carry any stride, so products of strides can be huge). */
static int64_t mul_sat(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/* torch's computeStorageNbytes: bytes a geometry needs, 0 when it is empty.
 * false on overflow. */
static bool storage_bytes_needed(const int64_t *sizes, const int64_t *strides, int ndim,
                                 int64_t offset, size_t itemsize, uint64_t *out)
{
    uint64_t span = 1; /* 1 + index of the last element */
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] == 0) {
            *out = 0;
            return true;
        }
    }
    for (int i = 0; i < ndim; i++) {
        uint64_t step;
        if (__builtin_mul_overflow((uint64_t)strides[i], (uint64_t)(sizes[i] - 1), &step) ||
            __builtin_add_overflow(span, step, &span))
            return false;
    }
    return !__builtin_add_overflow(span, (uint64_t)offset, &span) &&
           !__builtin_mul_overflow(span, (uint64_t)itemsize, out);
}

od_status od_tensor_as_strided(od_tensor *t, const int64_t *sizes, const int64_t *strides, int ndim,
                             int64_t offset, od_tensor **out, od_error *err)
{
    od_status st = check_ndim(ndim, "as_strided", err);
    if (st != OD_OK)
        return st;
    shape_buf a, b;
    for (int i = 0; i < ndim; i++)
        if (sizes[i] < 0)
            return od_error_set(err, OD_EINVAL,
                                "as_strided: Trying to create tensor with negative dimension %" PRId64
                                ": %s (dim %d)",
                                sizes[i], shape_str(&a, sizes, ndim), i);
    for (int i = 0; i < ndim; i++)
        if (strides[i] < 0)
            return od_error_set(err, OD_EINVAL,
                                "as_strided: Negative strides are not supported at the moment, got "
                                "strides: %s",
                                shape_str(&a, strides, ndim));
    if (offset < 0)
        return od_error_set(err, OD_EINVAL, "Tensor: invalid storage offset %" PRId64, offset);
    int64_t numel = 0;
    if ((st = od_shape_numel(sizes, ndim, &numel, err)) != OD_OK)
        return st;
    if (t->storage) {
        uint64_t need;
        size_t item = od_dtype_size(t->dtype);
        bool ok = storage_bytes_needed(sizes, strides, ndim, offset, item, &need);
        if (!ok || need > t->storage->nbytes) {
            char needs[32];
            if (ok)
                snprintf(needs, sizeof needs, "%" PRIu64, need);
            else
                snprintf(needs, sizeof needs, "more than 2^64");
            return od_error_set(err, OD_EMISMATCH,
                                "setStorage: sizes %s, strides %s, storage offset %" PRId64
                                ", and itemsize %zu requiring a storage size of %s are out of "
                                "bounds for storage of size %zu",
                                shape_str(&a, sizes, ndim), shape_str(&b, strides, ndim), offset,
                                item, needs, t->storage->nbytes);
        }
    }
    return make_view(t, ndim, sizes, strides, offset, out, err);
}

od_status od_infer_size(const int64_t *sizes, int ndim, int64_t numel, int64_t *out_sizes,
                        od_error *err)
{
    od_status st = check_ndim(ndim, "view", err);
    if (st != OD_OK)
        return st;
    shape_buf b;
    int infer = -1;
    bool has_zero = false;
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] == -1) {
            if (infer >= 0)
                return od_error_set(err, OD_EINVAL, "only one dimension can be inferred");
            infer = i;
        } else if (sizes[i] < 0) {
            return od_error_set(err, OD_EINVAL, "invalid shape dimension %" PRId64, sizes[i]);
        } else if (sizes[i] == 0) {
            has_zero = true;
        }
    }
    /* Product of the given sizes; an overflowing one matches no input. */
    int64_t newsize = 1;
    bool overflow = false;
    for (int i = 0; i < ndim && !has_zero && !overflow; i++)
        if (i != infer)
            overflow = __builtin_mul_overflow(newsize, sizes[i], &newsize);
    if (has_zero)
        newsize = 0;
    if (!overflow && (numel == newsize || (infer >= 0 && newsize > 0 && numel % newsize == 0))) {
        if (infer >= 0) {
            if (newsize == 0)
                return od_error_set(err, OD_EMISMATCH,
                                    "cannot reshape tensor of 0 elements into shape %s because "
                                    "the unspecified dimension size -1 can be any value and is "
                                    "ambiguous",
                                    shape_str(&b, sizes, ndim));
        }
        if (out_sizes != sizes && ndim > 0)
            memmove(out_sizes, sizes, (size_t)ndim * sizeof *sizes);
        if (infer >= 0)
            out_sizes[infer] = numel / newsize;
        return OD_OK;
    }
    return od_error_set(err, OD_EMISMATCH, "shape '%s' is invalid for input of size %" PRId64,
                        shape_str(&b, sizes, ndim), numel);
}

/* torch's computeStride: strides that let `sizes` view (oldsizes, oldstrides)
 * without a copy, walking both shapes from the innermost dim in chunks of
 * dims that are contiguous with each other. */
static bool compute_stride(const int64_t *oldsizes, const int64_t *oldstrides, int oldn,
                           const int64_t *sizes, int n, int64_t *strides)
{
    if (oldn == 0) {
        for (int i = 0; i < n; i++)
            strides[i] = 1;
        return true;
    }
    int64_t numel = checked_shape_numel(oldsizes, oldn);
    if (numel == 0) {
        bool same = oldn == n;
        for (int i = 0; same && i < n; i++)
            same = oldsizes[i] == sizes[i];
        if (same) {
            memcpy(strides, oldstrides, (size_t)n * sizeof *strides);
            return true;
        }
        /* Strides as if freshly allocated (NumPy's choice for empty views). */
        od_contiguous_strides(sizes, n, strides);
        return true;
    }
    int view_d = n - 1;
    int64_t chunk_base_stride = oldstrides[oldn - 1];
    int64_t tensor_numel = 1, view_numel = 1;
    for (int tensor_d = oldn - 1; tensor_d >= 0; tensor_d--) {
        tensor_numel *= oldsizes[tensor_d];
        /* End of a chunk: the next-outer dim is not contiguous with this one. */
        if (tensor_d == 0 || (oldsizes[tensor_d - 1] != 1 &&
                              oldstrides[tensor_d - 1] != mul_sat(tensor_numel, chunk_base_stride))) {
            while (view_d >= 0 && (view_numel < tensor_numel || sizes[view_d] == 1)) {
                strides[view_d] = mul_sat(view_numel, chunk_base_stride);
                view_numel *= sizes[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel)
                return false;
            if (tensor_d > 0) {
                chunk_base_stride = oldstrides[tensor_d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

bool od_compute_view_strides(const od_tensor *t, const int64_t *sizes, int ndim, int64_t *strides)
{
    int64_t numel = 0;
    if (od_shape_numel(sizes, ndim, &numel, NULL) != OD_OK || numel != od_tensor_numel(t))
        return false;
    return compute_stride(t->sizes, t->strides, t->ndim, sizes, ndim, strides);
}

od_status od_tensor_view(od_tensor *t, const int64_t *sizes, int ndim, od_tensor **out, od_error *err)
{
    int64_t inferred[OD_MAX_DIMS], strides[OD_MAX_DIMS];
    od_status st = od_infer_size(sizes, ndim, od_tensor_numel(t), inferred, err);
    if (st != OD_OK)
        return st;
    if (!compute_stride(t->sizes, t->strides, t->ndim, inferred, ndim, strides))
        return od_error_set(err, OD_EMISMATCH,
                            "view size is not compatible with input tensor's size and stride (at "
                            "least one dimension spans across two contiguous subspaces). Use "
                            ".reshape(...) instead.");
    return make_view(t, ndim, inferred, strides, t->offset, out, err);
}

od_status od_tensor_transpose(od_tensor *t, int64_t d0, int64_t d1, od_tensor **out, od_error *err)
{
    int a = 0, b = 0;
    od_status st = od_wrap_dim(d0, t->ndim, &a, err);
    if (st == OD_OK)
        st = od_wrap_dim(d1, t->ndim, &b, err);
    if (st != OD_OK)
        return st;
    int64_t sizes[OD_MAX_DIMS], strides[OD_MAX_DIMS];
    memcpy(sizes, t->sizes, sizeof sizes);
    memcpy(strides, t->strides, sizeof strides);
    if (t->ndim > 0) {
        sizes[a] = t->sizes[b], sizes[b] = t->sizes[a];
        strides[a] = t->strides[b], strides[b] = t->strides[a];
    }
    return make_view(t, t->ndim, sizes, strides, t->offset, out, err);
}

od_status od_tensor_t(od_tensor *t, od_tensor **out, od_error *err)
{
    if (t->ndim > 2)
        return od_error_set(err, OD_EINVAL,
                            "t() expects a tensor with <= 2 dimensions, but self is %dD", t->ndim);
    return od_tensor_transpose(t, 0, t->ndim < 2 ? 0 : 1, out, err);
}

od_status od_tensor_permute(od_tensor *t, const int64_t *dims, int ndims, od_tensor **out, od_error *err)
{
    if (ndims != t->ndim)
        return od_error_set(err, OD_EINVAL,
                            /* torch 1.13's words, sparse_coo even for a strided tensor */
                            "permute(sparse_coo): number of dimensions in the tensor input does not match "
                            "the length of the desired ordering of dimensions i.e. input.dim() = "
                            "%d is not equal to len(dims) = %d",
                            t->ndim, ndims);
    int64_t sizes[OD_MAX_DIMS], strides[OD_MAX_DIMS];
    bool seen[OD_MAX_DIMS] = {false};
    for (int i = 0; i < ndims; i++) {
        int d = 0;
        od_status st = od_wrap_dim(dims[i], t->ndim, &d, err);
        if (st != OD_OK)
            return st;
        if (seen[d])
            return od_error_set(err, OD_EINVAL, "permute(): duplicate dims are not allowed.");
        seen[d] = true;
        sizes[i] = t->sizes[d];
        strides[i] = t->strides[d];
    }
    return make_view(t, ndims, sizes, strides, t->offset, out, err);
}

od_status od_tensor_slice(od_tensor *t, int64_t dim, int64_t start, int64_t end, int64_t step,
                   od_tensor **out, od_error *err)
{
    if (t->ndim == 0)
        return od_error_set(err, OD_EINVAL, "slice() cannot be applied to a 0-dim tensor.");
    int d = 0;
    od_status st = od_wrap_dim(dim, t->ndim, &d, err);
    if (st != OD_OK)
        return st;
    if (step <= 0)
        return od_error_set(err, OD_EINVAL, "slice step must be positive");
    int64_t size = t->sizes[d];
    /* Negative bounds count from the end; then both clamp into [0, size]. */
    if (start < 0)
        start += size;
    if (end < 0)
        end += size;
    if (start < 0)
        start = 0;
    else if (start >= size)
        start = size;
    if (end < start)
        end = start;
    else if (end >= size)
        end = size;
    int64_t len = end - start;
    int64_t sizes[OD_MAX_DIMS], strides[OD_MAX_DIMS];
    memcpy(sizes, t->sizes, sizeof sizes);
    memcpy(strides, t->strides, sizeof strides);
    /* ATen's (len + step - 1) / step, wrapping as it does for a step near
     * INT64_MAX: a negative size is its storage-size error, a wrapped small
     * one its answer (torch.ones(5)[::2**63-1] is empty in 1.13). */
    sizes[d] = (int64_t)((uint64_t)len + (uint64_t)step - 1u) / step;
    strides[d] = (int64_t)((uint64_t)t->strides[d] * (uint64_t)step);
    if (strides[d] < 0) { /* the wrapped product, which as_strided refuses */
        char stv[256];
        od_shape_print(strides, t->ndim, stv, sizeof stv);
        return od_error_set(err, OD_EINVAL, "as_strided: Negative strides are not supported at the moment, got strides: %s",
                            stv);
    }
    if (sizes[d] < 0) {
        char sz[256], stv[256];
        od_shape_print(sizes, t->ndim, sz, sizeof sz);
        od_shape_print(strides, t->ndim, stv, sizeof stv);
        return od_error_set(err, OD_EINVAL, "Storage size calculation overflowed with sizes=%s and strides=%s", sz,
                            stv);
    }
    /* (with one element left the stride is never read, but it stays ATen's
     * product: a later slice multiplies it again, and torch refuses where
     * that wraps negative) */
    /* ATen moves the offset by start even for an empty slice: a later
     * as_strided or _reshape_alias of it reads from there. Only an empty
     * slice can overflow here (a stride left huge by a step near INT64_MAX
     * on a dim of one element); it keeps the offset it had. */
    int64_t offset;
    if (__builtin_mul_overflow(start, t->strides[d], &offset) || __builtin_add_overflow(offset, t->offset, &offset))
        offset = t->offset;
    return make_view(t, t->ndim, sizes, strides, offset, out, err);
}

od_status od_tensor_select(od_tensor *t, int64_t dim, int64_t index, od_tensor **out, od_error *err)
{
    if (t->ndim == 0)
        return od_error_set(err, OD_EINVAL, "select() cannot be applied to a 0-dim tensor.");
    int d = 0;
    od_status st = od_wrap_dim(dim, t->ndim, &d, err);
    if (st != OD_OK)
        return st;
    int64_t size = t->sizes[d];
    if (index < -size || index >= size) {
        shape_buf b;
        return od_error_set(err, OD_EINVAL,
                            "select(): index %" PRId64 " out of range for tensor of size %s at "
                            "dimension %d",
                            index, shape_str(&b, t->sizes, t->ndim), d);
    }
    if (index < 0)
        index += size;
    int64_t sizes[OD_MAX_DIMS], strides[OD_MAX_DIMS];
    for (int i = 0, j = 0; i < t->ndim; i++) {
        if (i == d)
            continue;
        sizes[j] = t->sizes[i];
        strides[j++] = t->strides[i];
    }
    return make_view(t, t->ndim - 1, sizes, strides, t->offset + index * t->strides[d], out, err);
}

/* torch's legacy tensor type name, for expand's message. */
static void tensor_type_name(const od_tensor *t, char *buf, size_t cap)
{
    const char *dev = t->device.type == OD_DEV_CUDA ? "cuda." : t->device.type == OD_DEV_META ? "meta." : "";
    snprintf(buf, cap, "torch.%s%sTensor", dev,
             od_dtype_scalar_name(t->dtype));
}

od_status od_tensor_expand(od_tensor *t, const int64_t *sizes, int ndim, od_tensor **out, od_error *err)
{
    shape_buf a, b;
    if (ndim < t->ndim) {
        char type[48];
        tensor_type_name(t, type, sizeof type);
        return od_error_set(err, OD_EINVAL,
                            "expand(%s{%s}, size=%s): the number of sizes provided (%d) must be "
                            "greater or equal to the number of dimensions in the tensor (%d)",
                            type, shape_str(&a, t->sizes, t->ndim), shape_str(&b, sizes, ndim),
                            ndim, t->ndim);
    }
    od_status st = check_ndim(ndim, "expand", err);
    if (st != OD_OK)
        return st;
    int64_t esizes[OD_MAX_DIMS], estrides[OD_MAX_DIMS];
    for (int i = ndim - 1; i >= 0; i--) {
        int dim = t->ndim - ndim + i; /* the tensor's dim aligned from the right */
        int64_t size = dim >= 0 ? t->sizes[dim] : 1;
        int64_t stride = dim >= 0 ? t->strides[dim]
                         : i + 1 < ndim ? mul_sat(esizes[i + 1], estrides[i + 1])
                                        : 1;
        int64_t target = sizes[i];
        if (target == -1) {
            if (dim < 0)
                return od_error_set(err, OD_EINVAL,
                                    "The expanded size of the tensor (-1) isn't allowed in a "
                                    "leading, non-existing dimension %d",
                                    i);
            target = size;
        }
        if (target < 0)
            return od_error_set(err, OD_EINVAL,
                                "Trying to create tensor with negative dimension %" PRId64 ": %s",
                                target, shape_str(&a, sizes, ndim));
        if (size != target) {
            if (size != 1)
                return od_error_set(err, OD_EMISMATCH,
                                    "The expanded size of the tensor (%" PRId64
                                    ") must match the existing size (%" PRId64
                                    ") at non-singleton dimension %d.  Target sizes: %s.  Tensor "
                                    "sizes: %s",
                                    target, size, i, shape_str(&a, sizes, ndim),
                                    shape_str(&b, t->sizes, t->ndim));
            size = target;
            stride = 0;
        }
        esizes[i] = size;
        estrides[i] = t->ndim ? stride : 0; /* ATen's inferExpandGeometry: a 0-dim tensor's are all 0 */
    }
    int64_t numel = 0;
    if ((st = od_shape_numel(esizes, ndim, &numel, err)) != OD_OK)
        return st;
    return make_view(t, ndim, esizes, estrides, t->offset, out, err);
}

od_status od_tensor_squeeze(od_tensor *t, od_tensor **out, od_error *err)
{
    int64_t sizes[OD_MAX_DIMS], strides[OD_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->sizes[i] == 1)
            continue;
        sizes[n] = t->sizes[i];
        strides[n++] = t->strides[i];
    }
    return make_view(t, n, sizes, strides, t->offset, out, err);
}

od_status od_tensor_squeeze_dim(od_tensor *t, int64_t dim, od_tensor **out, od_error *err)
{
    int d = 0;
    od_status st = od_wrap_dim(dim, t->ndim, &d, err);
    if (st != OD_OK)
        return st;
    if (t->ndim == 0 || t->sizes[d] != 1)
        return make_view(t, t->ndim, t->sizes, t->strides, t->offset, out, err);
    int64_t sizes[OD_MAX_DIMS], strides[OD_MAX_DIMS];
    for (int i = 0, j = 0; i < t->ndim; i++) {
        if (i == d)
            continue;
        sizes[j] = t->sizes[i];
        strides[j++] = t->strides[i];
    }
    return make_view(t, t->ndim - 1, sizes, strides, t->offset, out, err);
}

od_status od_tensor_unsqueeze(od_tensor *t, int64_t dim, od_tensor **out, od_error *err)
{
    if (t->ndim >= OD_MAX_DIMS)
        return od_error_set(err, OD_EINVAL,
                            "unsqueeze: a tensor has at most %d dimensions, and self already has %d",
                            OD_MAX_DIMS, t->ndim);
    int d = 0;
    od_status st = od_wrap_dim(dim, t->ndim + 1, &d, err);
    if (st != OD_OK)
        return st;
    int64_t sizes[OD_MAX_DIMS], strides[OD_MAX_DIMS];
    for (int i = 0, j = 0; i <= t->ndim; i++) {
        if (i == d) {
            sizes[i] = 1;
            /* torch's choice: the stride the dim would have if contiguous
             * with the one it now sits in front of. */
            strides[i] = d >= t->ndim ? 1 : mul_sat(t->sizes[d], t->strides[d]);
            continue;
        }
        sizes[i] = t->sizes[j];
        strides[i] = t->strides[j++];
    }
    return make_view(t, t->ndim + 1, sizes, strides, t->offset, out, err);
}

/* ---- broadcasting ---- */

od_status od_broadcast_shapes(const int64_t *a, int na, const int64_t *b, int nb, int64_t *out,
                              int *nout, od_error *err)
{
    od_status st = check_ndim(na, "broadcast_shapes", err);
    if (st == OD_OK)
        st = check_ndim(nb, "broadcast_shapes", err);
    if (st != OD_OK)
        return st;
    int n = na > nb ? na : nb;
    int64_t res[OD_MAX_DIMS];
    for (int i = n - 1; i >= 0; i--) {
        int da = na - n + i, db = nb - n + i;
        int64_t sa = da >= 0 ? a[da] : 1, sb = db >= 0 ? b[db] : 1;
        if (sa != sb && sa != 1 && sb != 1)
            return od_error_set(err, OD_EMISMATCH,
                                "The size of tensor a (%" PRId64
                                ") must match the size of tensor b (%" PRId64
                                ") at non-singleton dimension %d",
                                sa, sb, i);
        res[i] = sa == 1 ? sb : sa;
    }
    if (n > 0)
        memcpy(out, res, (size_t)n * sizeof *res); /* out may alias a or b */
    *nout = n;
    return OD_OK;
}
