/* mode.c — the mode stack: registry of mode classes, the Mode fallback,
 * od_mode_continue.
 *
 * Invariants: see od_mode.h. The stack an entered request uses lives in the
 * request's memory and is reached through od_tls.modes; only its thread
 * reads or writes it, so no lock is needed. Every path that pops a mode
 * restores the active count and the TLS before it returns.
 */
#include <stdio.h>
#include <string.h>

#include "od_mode.h"

#define MAX_CLASSES 64
static const od_mode_class *g_classes[MAX_CLASSES];
static int g_nclasses;
static _Thread_local int t_depth;

od_status od_mode_register(const od_mode_class *cls, od_error *err)
{
    if (od_registry_frozen())
        return od_error_set(err, OD_EFROZEN, "cannot register mode '%s': the registry is frozen after start-up",
                            cls && cls->name ? cls->name : "?");
    if (!cls || !cls->name || !cls->handle)
        return od_error_set(err, OD_EINVAL, "a mode class needs a name and a handle function");
    if (od_mode_find(cls->name))
        return od_error_set(err, OD_EDUPLICATE, "a mode named '%s' is already registered", cls->name);
    if (g_nclasses == MAX_CLASSES)
        return od_error_set(err, OD_ETOOLARGE, "too many mode classes (at most %d)", MAX_CLASSES);
    g_classes[g_nclasses++] = cls;
    return OD_OK;
}

const od_mode_class *od_mode_find(const char *name)
{
    for (int i = 0; i < g_nclasses; i++)
        if (!strcmp(g_classes[i]->name, name))
            return g_classes[i];
    return NULL;
}

int od_mode_class_count(void) { return g_nclasses; }
const od_mode_class *od_mode_class_at(int i) { return i >= 0 && i < g_nclasses ? g_classes[i] : NULL; }

od_status od_mode_stack_push(od_mode_stack *st, const char *name, const od_mode_param *params, int nparams,
                             od_error *err)
{
    const od_mode_class *cls = od_mode_find(name);
    if (!cls) {
        char names[512];
        size_t len = 0;
        names[0] = '\0';
        for (int i = 0; i < g_nclasses && len < sizeof names; i++)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", g_classes[i]->name);
        return od_error_set(err, OD_EINVAL, "unknown mode '%.64s' (modes: %s)", name, names);
    }
    if (st->n == OD_MODE_MAX)
        return od_error_set(err, OD_ETOOLARGE, "at most %d modes on one stack", OD_MODE_MAX);
    void *state = NULL;
    if (cls->create) {
        od_status s = cls->create(params, nparams, &state, err);
        if (s) {
            od_error_prefix(err, "mode '%s'", name);
            return s;
        }
    }
    st->cls[st->n] = cls;
    st->state[st->n] = state;
    st->n++;
    st->active = st->n;
    return OD_OK;
}

void od_mode_stack_clear(od_mode_stack *st)
{
    for (int i = 0; i < st->n; i++)
        if (st->cls[i]->destroy)
            st->cls[i]->destroy(st->state[i]);
    st->n = st->active = 0;
}

static void set_active(od_mode_stack *st, int active)
{
    st->active = active;
    od_keyset inc = od_tls_included();
    od_tls_set_included(active > 0 ? inc | OD_KS(OD_KEY_Mode) : inc & ~OD_KS(OD_KEY_Mode));
}

od_tls od_modes_enter(od_mode_stack *st)
{
    od_tls prev = od_tls_save();
    if (!st || st->n == 0)
        return prev;
    od_tls_get()->modes = st;
    set_active(st, st->n);
    return prev;
}

int od_mode_depth(void) { return t_depth; }

static od_status mode_fallback(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ctx;
    od_mode_stack *st = od_tls_get()->modes;
    if (!st || st->active <= 0) /* Mode in the key set with nothing to run */
        return od_redispatch(op, ks, s, err);
    int idx = st->active - 1;
    od_tls saved = od_tls_save();
    set_active(st, idx);
    t_depth++;
    od_status r = st->cls[idx]->handle(st->state[idx], op, ks, s, err);
    t_depth--;
    st->active = idx + 1;
    od_tls_restore(&saved);
    return r;
}

od_status od_mode_continue(const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    od_mode_stack *st = od_tls_get()->modes;
    if (st && st->active > 0) /* the next mode down */
        return od_call_with_keys(op, ks | OD_KS(OD_KEY_Mode), s, err);
    /* below the last mode: the kernels, with every mode watching the calls
     * they make */
    od_tls saved = od_tls_save();
    int was = st ? st->active : 0;
    if (st)
        set_active(st, st->n);
    od_status r = od_call_with_keys(op, ks & od_ks_below(OD_KEY_Mode), s, err);
    if (st)
        st->active = was;
    od_tls_restore(&saved);
    return r;
}

od_status od_register_mode_fallback(od_error *err)
{
    return od_fallback(OD_KEY_Mode, mode_fallback, NULL, "mode_stack", __FILE__, __LINE__, err);
}
