/* od_mode.h — the mode stack: PyTorch's TorchDispatchMode in C.
 *
 * Invariants:
 *  - A mode class is registered once, at start-up (built-ins and plugins),
 *    by a unique name; a request instantiates the classes it names into an
 *    od_mode_stack, outermost first, and enters it on its thread.
 *  - While a stack is entered with modes active, the Mode key is in the
 *    thread's included set, so every operator call (nested calls inside
 *    composite kernels and backward formulas too) reaches the Mode fallback
 *    first. With no stack the key is absent and calls never see it.
 *  - The fallback pops the innermost active mode and runs its handler; a
 *    handler re-calling the operator therefore reaches the next mode down,
 *    never itself. od_mode_continue carries the call on: to the next mode,
 *    and below the last one to the kernels with the whole stack active
 *    again, so the operators a kernel calls are seen by every mode.
 */
#ifndef OD_MODE_H
#define OD_MODE_H

#include "od_dispatch.h"

/* One setting of a mode, as the request gave it ("mm" -> "mm_reference"). */
typedef struct od_mode_param {
    const char *key, *value;
} od_mode_param;

typedef struct od_mode_class {
    const char *name; /* "trace" */
    const char *help; /* one line */
    /* *state new; params borrowed for the call only. */
    od_status (*create)(const od_mode_param *params, int nparams, void **state, od_error *err);
    /* Sees op before the kernels, with this mode popped; continues with
     * od_mode_continue or answers itself (s->rets, as a kernel). */
    od_status (*handle)(void *state, const od_op *op, od_keyset ks, od_stack *s, od_error *err);
    /* What the mode saw, as a malloc'd JSON value (new); NULL only when it
     * cannot be allocated (the call then answers 507). May be NULL: no report. */
    char *(*report)(void *state);
    void (*destroy)(void *state); /* may be NULL */
} od_mode_class;

/* Registers cls (borrowed, must live forever) before the registry freezes.
 * A second class with the same name is OD_EDUPLICATE. */
od_status od_mode_register(const od_mode_class *cls, od_error *err);
const od_mode_class *od_mode_find(const char *name); /* borrowed; NULL if none */
int od_mode_class_count(void);
const od_mode_class *od_mode_class_at(int i);

#define OD_MODE_MAX 8
typedef struct od_mode_stack {
    const od_mode_class *cls[OD_MODE_MAX];
    void *state[OD_MODE_MAX];
    int n;      /* modes, outermost first */
    int active; /* modes the next call sees: the innermost n - active are popped */
} od_mode_stack;

/* Adds a mode of class name with params to the top of st (innermost). */
od_status od_mode_stack_push(od_mode_stack *st, const char *name, const od_mode_param *params, int nparams,
                             od_error *err);
/* Destroys every mode of st (their reports must be taken first). */
void od_mode_stack_clear(od_mode_stack *st);

/* Enters st (borrowed until restored) on this thread; returns the TLS to
 * give back to od_tls_restore. An empty stack changes nothing. */
od_tls od_modes_enter(od_mode_stack *st);
/* From a handler: the call goes on to the next mode down, or the kernels. */
od_status od_mode_continue(const od_op *op, od_keyset ks, od_stack *s, od_error *err);
/* Depth of mode handling on this thread: how many handlers are running
 * (a handler's own calls run at depth >= 1). */
int od_mode_depth(void);

/* Registers the Mode fallback (od_init does). */
od_status od_register_mode_fallback(od_error *err);

#endif
