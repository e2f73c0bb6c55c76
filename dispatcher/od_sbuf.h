/* od_sbuf.h — a growable string for text the library builds (dumps, mode
 * reports): printf onto the end, take the result.
 *
 * Invariants: after an allocation failure the buffer stays failed and
 * od_sbuf_finish returns NULL; the finished string is NUL-terminated and
 * belongs to the caller (new, free() it).
 */
#ifndef OD_SBUF_H
#define OD_SBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct od_sbuf {
    char *p;
    size_t len, cap;
    bool failed;
} od_sbuf;

void od_sbuf_printf(od_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The text (new; "" when nothing was written), or NULL after a failure. */
char *od_sbuf_finish(od_sbuf *b);

#endif
