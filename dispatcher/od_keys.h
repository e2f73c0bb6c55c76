/* od_keys.h — dispatch keys and key sets.
 *
 * Invariants: a key set is one uint64_t with bit k set for runtime key k;
 * priority is bit position, so the highest-priority key of a set is found
 * with count-leading-zeros. Undefined (0) owns no bit: the empty set's
 * highest key is Undefined. Alias keys (>= OD_NUM_RUNTIME_KEYS) never appear
 * in a key set; they exist only at registration and expand to runtime sets.
 */
#ifndef OD_KEYS_H
#define OD_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* X(name, description): runtime keys in ascending priority. */
#define OD_RUNTIME_KEYS(X)                                                        \
    X(Undefined, "no tensor arguments: factories and other tensorless calls")     \
    X(Meta, "shape and dtype functions; no data is touched")                      \
    X(CPU, "host kernels (OpenBLAS for matrix products)")                         \
    X(CUDA, "device kernels and cuBLAS")                                          \
    X(BackendSelect, "factories choose a backend from their device argument")     \
    X(AutogradOther, "autograd for backends without their own Autograd key")      \
    X(AutogradCPU, "autograd: record a graph node, then redispatch to CPU")       \
    X(AutogradCUDA, "autograd: record a graph node, then redispatch to CUDA")     \
    X(AutocastCPU, "cast matmul-class inputs to lower precision on CPU")          \
    X(AutocastCUDA, "cast matmul-class inputs to lower precision on CUDA")        \
    X(Batched, "vmap: batching rules and the slow per-slice fallback")            \
    X(Mode, "the request's mode stack (trace, profile, validate, override)")

#define OD_ALIAS_KEYS(X)                                                          \
    X(Autograd, "alias: every Autograd key")                                      \
    X(CompositeExplicitAutograd, "alias: every backend key")                      \
    X(CompositeImplicitAutograd, "alias: every backend and every Autograd key")

typedef enum od_key {
#define OD_X_(name, desc) OD_KEY_##name,
    OD_RUNTIME_KEYS(OD_X_)
    OD_NUM_RUNTIME_KEYS,
    OD_FIRST_ALIAS_KEY = OD_NUM_RUNTIME_KEYS,
    OD_KEY_Autograd_ = OD_FIRST_ALIAS_KEY - 1, /* keeps the alias enumerators consecutive */
    OD_ALIAS_KEYS(OD_X_)
#undef OD_X_
    OD_NUM_KEYS
} od_key;

typedef uint64_t od_keyset;

#define OD_KS(k) ((od_keyset)1 << (k))
#define OD_KS_EMPTY ((od_keyset)0)

static inline bool od_key_is_alias(od_key k) { return k >= OD_FIRST_ALIAS_KEY && k < OD_NUM_KEYS; }
static inline bool od_key_is_backend(od_key k)
{
    return k == OD_KEY_CPU || k == OD_KEY_CUDA || k == OD_KEY_Meta;
}
static inline bool od_key_is_autograd(od_key k)
{
    return k == OD_KEY_AutogradCPU || k == OD_KEY_AutogradCUDA || k == OD_KEY_AutogradOther;
}

static inline od_keyset od_ks_add(od_keyset s, od_key k) { return s | OD_KS(k); }
static inline od_keyset od_ks_remove(od_keyset s, od_key k) { return s & ~OD_KS(k); }
static inline bool od_ks_has(od_keyset s, od_key k) { return (s >> k) & 1u; }

/* Highest-priority key in s; OD_KEY_Undefined for the empty set. */
static inline od_key od_ks_highest(od_keyset s)
{
    return s ? (od_key)(63 - __builtin_clzll(s)) : OD_KEY_Undefined;
}

/* Every key strictly below k (what a kernel at k redispatches into). */
static inline od_keyset od_ks_below(od_key k) { return OD_KS(k) - 1; }

#define OD_KS_BACKENDS (OD_KS(OD_KEY_Meta) | OD_KS(OD_KEY_CPU) | OD_KS(OD_KEY_CUDA))
#define OD_KS_AUTOGRAD \
    (OD_KS(OD_KEY_AutogradOther) | OD_KS(OD_KEY_AutogradCPU) | OD_KS(OD_KEY_AutogradCUDA))
#define OD_KS_AUTOCAST (OD_KS(OD_KEY_AutocastCPU) | OD_KS(OD_KEY_AutocastCUDA))

/* The defaults of the thread-local sets, as docs/ARCHITECTURE.md gives them. */
#define OD_KS_DEFAULT_INCLUDED OD_KS(OD_KEY_BackendSelect)
#define OD_KS_DEFAULT_EXCLUDED OD_KS_AUTOCAST

/* Runtime keys an alias key stands for (a runtime key stands for itself). */
od_keyset od_key_runtime_set(od_key k);

/* Autograd key of a backend key (AutogradCPU for CPU; AutogradOther for Meta),
 * and the backend of an Autograd key (OD_KEY_Undefined for AutogradOther). */
od_key od_key_autograd_of(od_key backend);
od_key od_key_backend_of_autograd(od_key autograd);

/* Name <-> key. Names are PyTorch's ("AutogradCPU"). Returns a static string;
 * od_key_from_name returns OD_NUM_KEYS for an unknown name. */
const char *od_key_name(od_key k);
const char *od_key_description(od_key k);
od_key od_key_from_name(const char *name);

/* Writes "DispatchKeySet(CPU, AutogradCPU)" (lowest priority first) into buf.
 * Returns the length it needed, like snprintf. */
int od_ks_print(od_keyset s, char *buf, size_t cap);

#endif
