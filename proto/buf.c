/* buf.c — the growable response buffer and the error model.
 *
 * Invariants: an od_buf that ran out of memory stays in that state (oom) and
 * ignores appends, so encoders never check every call; whoever sends the
 * buffer checks oom once. Error bodies are always valid JSON whatever bytes
 * the message holds (invalid UTF-8 is replaced).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto_int.h"

void od_buf_init(od_buf *b)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->limit = 0;
    b->oom = b->over = false;
}

void od_buf_free(od_buf *b)
{
    free(b->data);
    od_buf_init(b);
}

bool od_buf_reserve(od_buf *b, size_t extra)
{
    if (b->oom)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    if (extra > SIZE_MAX / 2 - b->len) {
        b->oom = true;
        return false;
    }
    if (b->limit && b->len + extra > b->limit) {
        b->oom = b->over = true;
        return false;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    if (b->limit && cap > b->limit + 1)
        cap = b->limit + 1; /* encoders write freely within cap: keep it within the limit */
    char *p = realloc(b->data, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}

void od_buf_append(od_buf *b, const void *p, size_t n)
{
    if (!od_buf_reserve(b, n))
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void od_buf_putc(od_buf *b, char c)
{
    if (!od_buf_reserve(b, 1))
        return;
    b->data[b->len++] = c;
    b->data[b->len] = '\0';
}

void od_buf_printf(od_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        od_buf_append(b, small, (size_t)n);
        return;
    }
    if (!od_buf_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Length of a valid UTF-8 sequence at s (n bytes left), or 0. */
size_t od_utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned min;
    if ((c & 0xe0) == 0xc0) {
        len = 2;
        min = 0x80;
        c &= 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3;
        min = 0x800;
        c &= 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        len = 4;
        min = 0x10000;
        c &= 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    return len;
}

/* No byte of v needs escaping: none below 0x20, none from 0x80 (UTF-8 is
 * checked byte by byte), no '"' or '\\'. Each test sets a byte's high bit
 * only where that byte (or one below it that also fails) fails, so the
 * answer is exact. */
static inline bool plain8(uint64_t v)
{
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t q = v ^ (ones * '"'), bs = v ^ (ones * '\\');
    return (((v - ones * 0x20) | v | ((q - ones) & ~q) | ((bs - ones) & ~bs)) & high) == 0;
}

/* The end of the run of plain bytes from i: whole words first, then bytes. */
static size_t plain_end(const char *s, size_t i, size_t n)
{
    for (uint64_t v; i + 8 <= n && (memcpy(&v, s + i, 8), plain8(v)); i += 8)
        ;
    while (i < n && (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] < 0x80 && s[i] != '"' && s[i] != '\\')
        i++;
    return i;
}

void od_buf_json_strn(od_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    if (!od_buf_reserve(b, n + 2))
        return;
    /* Most strings (names, keys, dtypes) need no escape: one scan, one copy
     * into the room just reserved. */
    size_t i = 0, run = plain_end(s, 0, n);
    if (run == n) {
        char *d = b->data + b->len;
        d[0] = '"';
        memcpy(d + 1, s, n);
        d[n + 1] = '"';
        d[n + 2] = '\0';
        b->len += n + 2;
        return;
    }
    od_buf_putc(b, '"');
    for (;;) { /* a run of plain bytes (perhaps none), then one byte or character that needs care */
        od_buf_append(b, s + i, run - i);
        if ((i = run) >= n)
            break;
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            od_buf_append(b, e, 2);
            i++;
        } else if (c < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            if (c == '\n')
                od_buf_append(b, "\\n", 2);
            else if (c == '\t')
                od_buf_append(b, "\\t", 2);
            else if (c == '\r')
                od_buf_append(b, "\\r", 2);
            else
                od_buf_append(b, e, 6);
            i++;
        } else {
            size_t l = od_utf8_len((const unsigned char *)s + i, n - i);
            if (l) {
                od_buf_append(b, s + i, l);
                i += l;
            } else {
                od_buf_append(b, "\\ufffd", 6);
                i++;
            }
        }
        run = plain_end(s, i, n);
    }
    od_buf_putc(b, '"');
}

void od_buf_json_str(od_buf *b, const char *s) { od_buf_json_strn(b, s, strlen(s)); }

void od_buf_i64(od_buf *b, int64_t v)
{
    if (!od_buf_reserve(b, 24))
        return;
    b->len += (size_t)od_fmt_i64(v, b->data + b->len);
}

void od_buf_i64s(od_buf *b, const int64_t *v, int n)
{
    od_buf_putc(b, '[');
    for (int i = 0; i < n; i++) {
        if (i)
            od_buf_putc(b, ',');
        od_buf_i64(b, v[i]);
    }
    od_buf_putc(b, ']');
}

static bool nonfinite(od_buf *b, double d)
{
    if (isnan(d))
        od_buf_puts(b, "\"NaN\"");
    else if (isinf(d))
        od_buf_puts(b, d < 0 ? "\"-Infinity\"" : "\"Infinity\"");
    else
        return false;
    return true;
}

void od_buf_f32(od_buf *b, float f)
{
    if (nonfinite(b, f) || !od_buf_reserve(b, OD_FMT_F32_ROOM))
        return;
    b->len += (size_t)od_fmt_f32(f, b->data + b->len);
}

void od_buf_f64(od_buf *b, double d)
{
    if (nonfinite(b, d) || !od_buf_reserve(b, 40))
        return;
    b->len += (size_t)od_fmt_f64(d, b->data + b->len);
}

static int dump_cb(const char *buffer, size_t size, void *data)
{
    od_buf_append(data, buffer, size);
    return 0;
}

void od_buf_json(od_buf *b, const json_t *v)
{
    if (!v) {
        od_buf_puts(b, "null");
        return;
    }
    json_dump_callback(v, dump_cb, b, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
}

char *od_buf_steal(od_buf *b, size_t *len)
{
    if (b->oom) {
        od_buf_free(b);
        if (len)
            *len = 0;
        return NULL;
    }
    if (!b->data && !od_buf_reserve(b, 0))
        return NULL;
    char *d = b->data;
    if (len)
        *len = b->len;
    od_buf_init(b);
    return d;
}

/* ---- errors -------------------------------------------------------------- */

void od_buf_keyset(od_buf *b, od_keyset ks)
{
    od_buf_putc(b, '[');
    bool first = true;
    for (int k = OD_NUM_RUNTIME_KEYS - 1; k >= 1; k--) /* highest priority first */
        if (od_ks_has(ks, (od_key)k)) {
            if (!first)
                od_buf_putc(b, ',');
            first = false;
            od_buf_json_str(b, od_key_name((od_key)k));
        }
    od_buf_putc(b, ']');
}

char *od_error_body(const char *code, const char *message, size_t *len)
{
    od_buf b;
    od_buf_init(&b);
    od_buf_puts(&b, "{\"error\":{\"code\":");
    od_buf_json_str(&b, code);
    od_buf_puts(&b, ",\"message\":");
    od_buf_json_str(&b, message);
    od_buf_puts(&b, "}}");
    return od_buf_steal(&b, len);
}

char *od_oip_error_body(const char *message, size_t *len)
{
    od_buf b;
    od_buf_init(&b);
    od_buf_puts(&b, "{\"error\":");
    od_buf_json_str(&b, message);
    od_buf_putc(&b, '}');
    return od_buf_steal(&b, len);
}

char *od_proto_error(const od_error *err, int *http, size_t *len)
{
    od_status st = err->status == OD_OK ? OD_EINTERNAL : err->status;
    *http = od_status_http(st);
    return od_error_body(od_status_code(st), err->message[0] ? err->message : "unknown error",
                         len);
}
