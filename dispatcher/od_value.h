/* od_value.h — tagged values and the boxed call stack.
 *
 * Invariants (the boxed calling convention):
 *  - On entry to a kernel, s->args[0..nargs) hold exactly the operator's
 *    arguments in schema order, defaults already filled. They are BORROWED:
 *    the caller keeps them alive for the call; a kernel never releases them.
 *  - On OD_OK the kernel has written s->rets[0..nrets) with nrets equal to the
 *    schema's return count. They are NEW references: whoever made the call
 *    owns them and releases each with od_value_release().
 *  - On error the kernel leaves nrets == 0 (it releases anything it made).
 *  - An owned value owns its tensor reference and its list buffer (and each
 *    tensor in a tensor list); a borrowed copy owns nothing.
 */
#ifndef OD_VALUE_H
#define OD_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "od_tensor.h"

typedef enum od_tag {
    OD_T_NONE,
    OD_T_BOOL,
    OD_T_INT,
    OD_T_DOUBLE,
    OD_T_STRING,
    OD_T_DTYPE,
    OD_T_DEVICE,
    OD_T_TENSOR,
    OD_T_INT_LIST,
    OD_T_DOUBLE_LIST,
    OD_T_BOOL_LIST,
    OD_T_TENSOR_LIST, /* elements may be NULL for Tensor?[] */
    OD_NUM_TAGS
} od_tag;

typedef struct od_value {
    od_tag tag;
    union {
        bool b;
        int64_t i;
        double d;
        const char *s; /* NUL-terminated */
        od_dtype dtype;
        od_device device;
        od_tensor *t;
        struct {
            void *items; /* int64_t*, double*, bool* or od_tensor** */
            size_t n;
        } list;
    } u;
} od_value;

static inline od_value od_none(void) { od_value v = {OD_T_NONE, {0}}; return v; }
static inline od_value od_bool(bool b) { od_value v = {OD_T_BOOL, {.b = b}}; return v; }
static inline od_value od_int(int64_t i) { od_value v = {OD_T_INT, {.i = i}}; return v; }
static inline od_value od_double(double d) { od_value v = {OD_T_DOUBLE, {.d = d}}; return v; }
static inline od_value od_str(const char *s) { od_value v = {OD_T_STRING, {.s = s}}; return v; }
static inline od_value od_dtype_v(od_dtype dt) { od_value v = {OD_T_DTYPE, {.dtype = dt}}; return v; }
static inline od_value od_device_v(od_device d) { od_value v = {OD_T_DEVICE, {.device = d}}; return v; }
/* Borrowed or owned depending on who holds the value (see the invariants). */
static inline od_value od_tensor_v(od_tensor *t) { od_value v = {OD_T_TENSOR, {.t = t}}; return v; }
static inline od_value od_list_v(od_tag tag, void *items, size_t n)
{
    od_value v = {tag, {.list = {items, n}}};
    return v;
}

/* Releases what an owned value owns and sets it to None. Safe on None. */
void od_value_release(od_value *v);
/* Deep-enough copy for ownership: retains tensors, duplicates list buffers
 * and strings. *dst is new. */
od_status od_value_clone(const od_value *src, od_value *dst, od_error *err);
const char *od_tag_name(od_tag tag);
/* A MemoryFormat argument: None (read as preserve), an int 0-3 or a name
 * ("channels_last", "torch.channels_last"). -1: an unknown int or name;
 * -2: not an int, a string or None. */
int od_memory_format_of_value(const od_value *v);

/* Numeric accessors for Scalar-typed arguments: bool, int or double. */
static inline bool od_value_is_number(const od_value *v)
{
    return v->tag == OD_T_BOOL || v->tag == OD_T_INT || v->tag == OD_T_DOUBLE;
}
static inline double od_value_as_double(const od_value *v)
{
    return v->tag == OD_T_DOUBLE ? v->u.d : v->tag == OD_T_INT ? (double)v->u.i : (double)v->u.b;
}

#define OD_MAX_ARGS 32
#define OD_MAX_RETURNS 8

typedef struct od_stack {
    od_value *args; /* borrowed for the call */
    int nargs;
    od_value rets[OD_MAX_RETURNS]; /* new references, owned by the caller after OD_OK */
    int nrets;
} od_stack;

static inline void od_stack_init(od_stack *s, od_value *args, int nargs)
{
    s->args = args;
    s->nargs = nargs;
    s->nrets = 0;
}
/* Releases every return value and resets nrets to 0. */
void od_stack_release_rets(od_stack *s);

#endif
