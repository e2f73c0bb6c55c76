/* od_error.h — status codes and the error record every fallible call fills.
 *
 * Invariants: a function that returns a status other than OD_OK has written
 * a NUL-terminated message into the od_error it was given (when non-NULL).
 * Kernels never abort on user input; they return one of these. OD_STATUS_TABLE
 * is the one list of statuses: the enum, the stable code string every layer
 * names an error by, and the HTTP status the service answers with all come
 * from it (proto/PROTOCOL.md and proto/openapi.yaml list exactly its codes;
 * a test compares them).
 */
#ifndef OD_ERROR_H
#define OD_ERROR_H

#include <stdarg.h>

/* X(enum, code, HTTP status, meaning) */
#define OD_STATUS_TABLE(X)                                                                        \
    X(OD_OK, "ok", 200, "success")                                                                \
    X(OD_EINVAL, "invalid_argument", 400,                                                         \
      "malformed input: JSON, UTF-8, binary framing, a bad value or an unknown field")           \
    X(OD_EUNAUTHORIZED, "unauthorized", 401, "no valid bearer token (see WWW-Authenticate)")    \
    X(OD_EFORBIDDEN, "forbidden", 403, "a token without the route's scope, or a route not enabled") \
    X(OD_ENOTFOUND, "not_found", 404, "unknown route, operator, model, version or key")          \
    X(OD_EMETHOD, "method_not_allowed", 405, "wrong method for the route (see Allow)")          \
    X(OD_EREQTIMEOUT, "request_timeout", 408, "the request did not arrive in time")             \
    X(OD_EDUPLICATE, "duplicate", 409, "duplicate definition or registration")                  \
    X(OD_EGONE, "gone", 410, "a stored tensor that was evicted to stay under the high-water mark") \
    X(OD_EFROZEN, "registry_frozen", 409, "registration after the registry was frozen")         \
    X(OD_ETOOLARGE, "too_large", 413, "a configured limit would be exceeded")                   \
    X(OD_EMEDIATYPE, "unsupported_media_type", 415, "a Content-Type the route does not take")   \
    X(OD_EMISMATCH, "mismatch", 422, "shape, dtype or argument does not fit the schema")        \
    X(OD_EUNSUPPORTED, "unsupported", 422, "a valid request the kernel does not support")       \
    X(OD_EINTERNAL, "internal", 500, "a bug or an unexpected library failure")                  \
    X(OD_ENOKERNEL, "no_kernel", 501, "no kernel for the computed dispatch key")                \
    X(OD_EUNAVAIL, "device_unavailable", 503, "the device asked for is not available")          \
    X(OD_EBUSY, "unavailable", 503, "shutting down, or at a limit of work in flight; retry")    \
    X(OD_ETIMEOUT, "deadline_exceeded", 504, "the call ran past its time budget: cancelled")    \
    X(OD_ENOMEM, "out_of_memory", 507, "host memory exhausted")                                 \
    X(OD_EQUOTA, "over_budget", 507, "a session's budget for stored tensors would be exceeded") \
    X(OD_EDEVMEM, "out_of_device_memory", 507, "device memory exhausted")

typedef enum od_status {
#define OD_STATUS_ENUM_(e, code, http, meaning) e,
    OD_STATUS_TABLE(OD_STATUS_ENUM_)
#undef OD_STATUS_ENUM_
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
/* The HTTP status the service answers a status with (500 when unknown). */
int od_status_http(od_status st);
/* One line of meaning (static). */
const char *od_status_meaning(od_status st);

#endif
