/* od_error.h — status codes and the error record every fallible call fills.
 *
 * Invariants: a function that returns a status other than OD_OK has written
 * a NUL-terminated message into the od_error it was given (when non-NULL).
 * Kernels never abort on user input; they return one of these. The mapping
 * from status to HTTP status lives in proto/ (the dispatcher knows no HTTP),
 * but the stable machine-readable code string lives here so every layer
 * names an error the same way.
 */
#ifndef OD_ERROR_H
#define OD_ERROR_H

#include <stdarg.h>

typedef enum od_status {
    OD_OK = 0,
    OD_EINVAL,       /* malformed input: bad schema text, bad value          */
    OD_ENOTFOUND,    /* unknown operator, key or route                        */
    OD_EMISMATCH,    /* shape / dtype / argument does not fit the schema      */
    OD_EUNSUPPORTED, /* valid request the kernel does not support (dtype ...) */
    OD_ENOKERNEL,    /* no kernel for the computed dispatch key               */
    OD_EUNAVAIL,     /* device unavailable (no CUDA driver / device)          */
    OD_ENOMEM,       /* host allocation failed                                */
    OD_EDEVMEM,      /* device allocation failed                              */
    OD_ETOOLARGE,    /* a configured limit would be exceeded                  */
    OD_EDUPLICATE,   /* duplicate definition or registration                  */
    OD_EFROZEN,      /* registration after the registry was frozen            */
    OD_ETIMEOUT,     /* the call ran past its time budget and was cancelled   */
    OD_EINTERNAL,    /* a bug or an unexpected library failure                */
    OD_NUM_STATUS
} od_status;

#define OD_ERROR_MSG_MAX 1024

typedef struct od_error {
    od_status status;
    char message[OD_ERROR_MSG_MAX];
} od_error;

/* Fills err (may be NULL) and returns st, so callers can write
 * `return od_error_set(err, OD_EINVAL, "...", ...);`. */
od_status od_error_set(od_error *err, od_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
od_status od_error_vset(od_error *err, od_status st, const char *fmt, va_list ap);

/* Prepends "prefix: " to an already-set message (context while unwinding). */
void od_error_prefix(od_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void od_error_clear(od_error *err);

/* Stable lower_snake_case code for a status ("invalid_argument", ...).
 * Returns a static string (borrowed, never NULL). */
const char *od_status_code(od_status st);

#endif
