/* value.c — ownership operations on tagged values (see od_value.h). */
#include <stdlib.h>
#include <string.h>

#include "od_value.h"

static size_t list_elem_size(od_tag tag)
{
    switch (tag) {
    case OD_T_INT_LIST: return sizeof(int64_t);
    case OD_T_DOUBLE_LIST: return sizeof(double);
    case OD_T_BOOL_LIST: return sizeof(bool);
    case OD_T_TENSOR_LIST: return sizeof(od_tensor *);
    default: return 0;
    }
}

void od_value_release(od_value *v)
{
    if (!v)
        return;
    switch (v->tag) {
    case OD_T_TENSOR:
        od_tensor_release(v->u.t);
        break;
    case OD_T_TENSOR_LIST: {
        od_tensor **ts = v->u.list.items;
        for (size_t i = 0; i < v->u.list.n; i++)
            od_tensor_release(ts[i]);
        free(ts);
        break;
    }
    case OD_T_INT_LIST:
    case OD_T_DOUBLE_LIST:
    case OD_T_BOOL_LIST:
        free(v->u.list.items);
        break;
    case OD_T_STRING:
        free((char *)v->u.s);
        break;
    default:
        break;
    }
    *v = od_none();
}

od_status od_value_clone(const od_value *src, od_value *dst, od_error *err)
{
    *dst = *src;
    switch (src->tag) {
    case OD_T_TENSOR:
        od_tensor_retain(src->u.t);
        return OD_OK;
    case OD_T_STRING:
        dst->u.s = strdup(src->u.s);
        if (!dst->u.s) {
            *dst = od_none();
            return od_error_set(err, OD_ENOMEM, "out of memory copying a string value");
        }
        return OD_OK;
    case OD_T_INT_LIST:
    case OD_T_DOUBLE_LIST:
    case OD_T_BOOL_LIST:
    case OD_T_TENSOR_LIST: {
        size_t bytes = list_elem_size(src->tag) * src->u.list.n;
        void *items = malloc(bytes ? bytes : 1);
        if (!items) {
            *dst = od_none();
            return od_error_set(err, OD_ENOMEM, "out of memory copying a list value");
        }
        if (bytes)
            memcpy(items, src->u.list.items, bytes);
        dst->u.list.items = items;
        if (src->tag == OD_T_TENSOR_LIST) {
            od_tensor **ts = items;
            for (size_t i = 0; i < src->u.list.n; i++)
                if (ts[i])
                    od_tensor_retain(ts[i]);
        }
        return OD_OK;
    }
    default:
        return OD_OK;
    }
}

const char *od_tag_name(od_tag tag)
{
    static const char *const names[OD_NUM_TAGS] = {
        "None", "bool", "int", "float", "str", "ScalarType", "Device",
        "Tensor", "int[]", "float[]", "bool[]", "Tensor[]",
    };
    return (unsigned)tag < OD_NUM_TAGS ? names[tag] : "?";
}

void od_stack_release_rets(od_stack *s)
{
    for (int i = 0; i < s->nrets; i++)
        od_value_release(&s->rets[i]);
    s->nrets = 0;
}

int od_memory_format_of_value(const od_value *v)
{
    if (v->tag == OD_T_NONE)
        return OD_MF_PRESERVE;
    if (v->tag == OD_T_INT)
        return v->u.i >= OD_MF_CONTIGUOUS && v->u.i <= OD_MF_CHANNELS_LAST_3D ? (int)v->u.i : -1;
    if (v->tag != OD_T_STRING || !v->u.s)
        return -2;
    const char *name = strncmp(v->u.s, "torch.", 6) == 0 ? v->u.s + 6 : v->u.s;
    for (int mf = OD_MF_CONTIGUOUS; mf <= OD_MF_CHANNELS_LAST_3D; mf++)
        if (!strcmp(name, od_memory_format_name((od_memory_format)mf)))
            return mf;
    return -1;
}
