/* keys.c — key names, alias expansion and key-set printing.
 * Tables are generated from the X-macro lists in od_keys.h, so a key added
 * there appears everywhere at once. */
#include <stdio.h>
#include <string.h>

#include "od_keys.h"

static const char *const key_names[OD_NUM_KEYS] = {
#define OD_X_(name, desc) [OD_KEY_##name] = #name,
    OD_RUNTIME_KEYS(OD_X_) OD_ALIAS_KEYS(OD_X_)
#undef OD_X_
};

static const char *const key_descs[OD_NUM_KEYS] = {
#define OD_X_(name, desc) [OD_KEY_##name] = desc,
    OD_RUNTIME_KEYS(OD_X_) OD_ALIAS_KEYS(OD_X_)
#undef OD_X_
};

const char *od_key_name(od_key k)
{
    return (unsigned)k < OD_NUM_KEYS ? key_names[k] : "UNKNOWN_KEY";
}

const char *od_key_description(od_key k)
{
    return (unsigned)k < OD_NUM_KEYS ? key_descs[k] : "";
}

od_key od_key_from_name(const char *name)
{
    for (int k = 0; k < OD_NUM_KEYS; k++)
        if (strcmp(key_names[k], name) == 0)
            return (od_key)k;
    return OD_NUM_KEYS;
}

od_keyset od_key_runtime_set(od_key k)
{
    switch (k) {
    case OD_KEY_Undefined: return OD_KS_EMPTY;
    case OD_KEY_Autograd: return OD_KS_AUTOGRAD;
    case OD_KEY_CompositeExplicitAutograd: return OD_KS_BACKENDS;
    case OD_KEY_CompositeImplicitAutograd: return OD_KS_BACKENDS | OD_KS_AUTOGRAD;
    default: return (unsigned)k < OD_NUM_RUNTIME_KEYS ? OD_KS(k) : OD_KS_EMPTY;
    }
}

od_key od_key_autograd_of(od_key backend)
{
    switch (backend) {
    case OD_KEY_CPU: return OD_KEY_AutogradCPU;
    case OD_KEY_CUDA: return OD_KEY_AutogradCUDA;
    default: return OD_KEY_AutogradOther;
    }
}

od_key od_key_backend_of_autograd(od_key autograd)
{
    switch (autograd) {
    case OD_KEY_AutogradCPU: return OD_KEY_CPU;
    case OD_KEY_AutogradCUDA: return OD_KEY_CUDA;
    default: return OD_KEY_Undefined;
    }
}

int od_ks_print(od_keyset s, char *buf, size_t cap)
{
    size_t len = 0;
    int n = snprintf(buf, cap, "DispatchKeySet(");
    len += (size_t)n;
    bool first = true;
    for (int k = 1; k < OD_NUM_RUNTIME_KEYS; k++) {
        if (!od_ks_has(s, (od_key)k))
            continue;
        n = snprintf(len < cap ? buf + len : NULL, len < cap ? cap - len : 0, "%s%s",
                     first ? "" : ", ", key_names[k]);
        len += (size_t)n;
        first = false;
    }
    n = snprintf(len < cap ? buf + len : NULL, len < cap ? cap - len : 0, ")");
    return (int)(len + (size_t)n);
}
