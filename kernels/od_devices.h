/* od_devices.h — every backend's devices behind one small interface, like
 * ggml's backend device interface: what the service shows under
 * /v1/devices and needs to choose a device, without knowing a backend.
 *
 * Invariants:
 *  - od_backends() lists the backends of this build in a fixed order, CPU
 *    first; a backend compiled out is still listed (compiled false) so the
 *    reason it is unavailable can be shown.
 *  - Facts are plain key/value pairs. A key "a.b" belongs to the group "a"
 *    (the keys of a group are contiguous), so a renderer can nest them
 *    without knowing what they mean. Values are text, integers or booleans.
 *  - Every function is safe on a machine without the device: counts are 0
 *    and why_unavailable says why (computed once per process).
 */
#ifndef OD_DEVICES_H
#define OD_DEVICES_H

#include <stdbool.h>
#include <stdint.h>

#include "od_error.h"

#define OD_PROPS_MAX 32

typedef enum od_prop_kind { OD_PROP_TEXT, OD_PROP_INT, OD_PROP_BOOL } od_prop_kind;

typedef struct od_prop {
    const char *key; /* static */
    od_prop_kind kind;
    int64_t i;       /* INT, BOOL */
    char text[256];  /* TEXT */
} od_prop;

typedef struct od_props {
    int n;
    od_prop p[OD_PROPS_MAX];
} od_props;

typedef struct od_backend {
    const char *name;       /* "cpu", "cuda": as in device strings */
    bool compiled;          /* built into this binary */
    /* Usable devices now (0: none, and why_unavailable says why). */
    int (*device_count)(void);
    /* "" when the backend has a usable device, else one line (static). */
    const char *(*why_unavailable)(void);
    /* Facts of the backend as a whole (may be NULL) and of device index,
     * into *out (caller's, overwritten). */
    void (*backend_props)(od_props *out);
    od_status (*device_props)(int index, od_props *out);
} od_backend;

/* The backends of this build (static table); their number in *n. */
const od_backend *od_backends(int *n);
/* The backend called name ("cpu", "cuda"), or NULL. */
const od_backend *od_backend_named(const char *name);

/* Appending facts (silently drops what does not fit). */
void od_props_text(od_props *ps, const char *key, const char *text);
void od_props_int(od_props *ps, const char *key, int64_t v);
void od_props_bool(od_props *ps, const char *key, bool v);

#endif
