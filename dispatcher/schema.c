/* schema.c — PyTorch function schemas: parser and printer (see od_schema.h).
 *
 * Invariants:
 *  - The parser is one left-to-right pass with one token of lookahead, so it
 *    is linear in the input. Type nesting is capped at
 *    OD_SCHEMA_MAX_TYPE_DEPTH, so recursion in parse, print and free is
 *    bounded whatever the input (int[][][]... of any length fails cleanly).
 *  - Every node has exactly one owner. Argument slots are zeroed before they
 *    are filled and counted as soon as they exist, so on any error the
 *    partial schema is released by the same od_schema_free as a good one:
 *    no error path needs its own cleanup list.
 *  - The first error wins: later failures (a lexer error seen again by the
 *    parser) never overwrite the message that names the real column.
 *  - Printing follows PyTorch's FunctionSchema/Argument operator<<, with
 *    defaults printed from their parsed values the way IValue prints them,
 *    so print(parse(x)) == x for every schema PyTorch prints.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "od_schema.h"

/* ---- names --------------------------------------------------------------- */

static const char *const kind_names[OD_NUM_TYPE_KINDS] = {
    [OD_TY_TENSOR] = "Tensor",
    [OD_TY_INT] = "int",
    [OD_TY_SYMINT] = "SymInt",
    [OD_TY_FLOAT] = "float",
    [OD_TY_BOOL] = "bool",
    [OD_TY_STR] = "str",
    [OD_TY_SCALAR] = "Scalar",
    [OD_TY_SCALARTYPE] = "ScalarType",
    [OD_TY_LAYOUT] = "Layout",
    [OD_TY_DEVICE] = "Device",
    [OD_TY_MEMORYFORMAT] = "MemoryFormat",
    [OD_TY_GENERATOR] = "Generator",
    [OD_TY_DIMNAME] = "Dimname",
    [OD_TY_QSCHEME] = "QScheme",
    [OD_TY_STREAM] = "Stream",
    [OD_TY_STORAGE] = "Storage",
    [OD_TY_ANY] = "Any",
    [OD_TY_COMPLEX] = "complex",
    [OD_TY_NONE] = "NoneType",
    [OD_TY_ANY_ENUM] = "AnyEnumType",
    [OD_TY_ANY_CLASS] = "AnyClassType",
};

/* Base type names of the schema language. "None" is PyTorch's spelling of
 * NoneType inside schemas; it prints back as NoneType, as in PyTorch. */
static const struct {
    const char *name;
    od_type_kind kind;
} base_types[] = {
    {"Tensor", OD_TY_TENSOR},       {"int", OD_TY_INT},
    {"SymInt", OD_TY_SYMINT},       {"float", OD_TY_FLOAT},
    {"bool", OD_TY_BOOL},           {"str", OD_TY_STR},
    {"Scalar", OD_TY_SCALAR},       {"ScalarType", OD_TY_SCALARTYPE},
    {"Layout", OD_TY_LAYOUT},       {"Device", OD_TY_DEVICE},
    {"MemoryFormat", OD_TY_MEMORYFORMAT}, {"Generator", OD_TY_GENERATOR},
    {"Dimname", OD_TY_DIMNAME},     {"QScheme", OD_TY_QSCHEME},
    {"Stream", OD_TY_STREAM},       {"Storage", OD_TY_STORAGE},
    {"Any", OD_TY_ANY},             {"complex", OD_TY_COMPLEX},
    {"NoneType", OD_TY_NONE},       {"None", OD_TY_NONE},
    {"AnyEnumType", OD_TY_ANY_ENUM}, {"AnyClassType", OD_TY_ANY_CLASS},
};

/* Built-in types with no behaviour here: kept as opaque named (CLASS) types
 * so that they print back as written. */
static const char *const opaque_types[] = {
    "Capsule", "Quantizer", "ConstQuantizerPtr", "DeviceIndex", "DimVector",
};

/* Bare names PyTorch accepts as defaults, with its enum numbers
 * (c10::MemoryFormat, c10::Layout, at::Reduction). */
static const struct {
    const char *name;
    int64_t value;
} enum_defaults[] = {
    {"contiguous_format", 0}, {"preserve_format", 1}, {"channels_last", 2},
    {"channels_last_3d", 3},  {"strided", 0},         {"sparse_coo", 1},
    {"sparse_csr", 2},        {"sparse_csc", 4},      {"sparse_bsr", 5},
    {"sparse_bsc", 6},        {"Mean", 1},            {"Sum", 2},
};

/* c10::ScalarType numbers, which is how PyTorch stores and prints a dtype
 * default ("ScalarType? dtype=4" is long). -1: no PyTorch number. */
static int torch_scalar_type_number(od_dtype dt)
{
    switch (dt) {
    case OD_UINT8: return 0;
    case OD_INT8: return 1;
    case OD_INT16: return 2;
    case OD_INT32: return 3;
    case OD_INT64: return 4;
    case OD_FLOAT16: return 5;
    case OD_FLOAT32: return 6;
    case OD_FLOAT64: return 7;
    case OD_BOOL: return 11;
    case OD_BFLOAT16: return 15;
    default: return -1;
    }
}

static od_dtype dtype_from_torch_number(int64_t n)
{
    for (int d = 0; d < OD_NUM_DTYPES; d++)
        if (torch_scalar_type_number((od_dtype)d) == n)
            return (od_dtype)d;
    return OD_NUM_DTYPES;
}

/* ---- ownership ------------------------------------------------------------ */

static void type_free(od_type *t)
{
    if (!t)
        return;
    type_free(t->elem);
    for (int i = 0; i < t->nitems; i++)
        type_free(t->items[i]);
    free(t->items);
    free(t->name);
    free(t);
}

static void alias_free(od_alias *a)
{
    if (!a)
        return;
    free(a->before);
    free(a->after);
    free(a);
}

static void arg_free(od_arg *a)
{
    free(a->name);
    type_free(a->type);
    alias_free(a->alias);
    free(a->default_text);
    od_value_release(&a->default_value);
}

void od_schema_free(od_schema *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->nargs; i++)
        arg_free(&s->args[i]);
    for (int i = 0; i < s->nrets; i++)
        arg_free(&s->rets[i]);
    free(s->args);
    free(s->rets);
    free(s->ns);
    free(s->name);
    free(s->overload);
    free(s);
}

/* ---- lexer ---------------------------------------------------------------- */

enum {
    TK_EOF = 0,
    /* single characters stand for themselves: ( ) [ ] , ? ! | * = : . - */
    TK_IDENT = 256,
    TK_NUMBER,
    TK_STRING,
    TK_ARROW, /* -> */
    TK_DOTS,  /* ... */
    TK_ERROR, /* the lexer has already reported it */
};

typedef struct token {
    int kind;
    size_t start, end; /* byte offsets into the source */
} token;

typedef struct parser {
    const char *src;
    size_t len;
    size_t pos;      /* next byte the lexer reads */
    token tok;       /* current token */
    size_t prev_end; /* end of the last consumed token */
    od_error *err;
    od_status st;    /* first error, OD_OK while parsing */
} parser;

static void failv(parser *p, size_t offset, const char *fmt, va_list ap)
{
    if (p->st != OD_OK)
        return;
    char msg[768];
    vsnprintf(msg, sizeof msg, fmt, ap);
    p->st = OD_EINVAL;
    od_error_set(p->err, OD_EINVAL, "column %zu: %s", offset + 1, msg);
}

static void fail_at(parser *p, size_t offset, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail_at(parser *p, size_t offset, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    failv(p, offset, fmt, ap);
    va_end(ap);
}

static void fail_oom(parser *p)
{
    if (p->st != OD_OK)
        return;
    p->st = OD_ENOMEM;
    od_error_set(p->err, OD_ENOMEM, "out of memory parsing a schema");
}

/* Printable rendering of one byte for messages. */
static void char_desc(unsigned char c, char *buf, size_t cap)
{
    if (c >= 0x20 && c < 0x7f)
        snprintf(buf, cap, "'%c'", c);
    else
        snprintf(buf, cap, "byte 0x%02x", c);
}

/* "'text'" for the current token (long tokens shortened), "end of input". */
static const char *tok_desc(const parser *p, char *buf, size_t cap)
{
    const token *t = &p->tok;
    if (t->kind == TK_EOF)
        return "end of input";
    size_t n = t->end - t->start;
    if (n == 1 && t->kind < 256) {
        char_desc((unsigned char)p->src[t->start], buf, cap);
        return buf;
    }
    const size_t max = 40;
    snprintf(buf, cap, "'%.*s%s'", (int)(n > max ? max : n), p->src + t->start,
             n > max ? "..." : "");
    for (char *c = buf; *c; c++) /* string literals may hold control bytes */
        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
            *c = '?';
    return buf;
}

static void fail_expected(parser *p, const char *what)
{
    char d[64];
    fail_at(p, p->tok.start, "expected %s, got %s", what, tok_desc(p, d, sizeof d));
}

static bool is_ident_start(char c) { return isalpha((unsigned char)c) || c == '_'; }
static bool is_ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Reads the next token into p->tok. */
static void next(parser *p)
{
    const char *s = p->src;
    size_t n = p->len, i = p->pos;
    p->prev_end = p->tok.end;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    token t = {TK_EOF, i, i};
    if (i >= n) {
        p->tok = t;
        p->pos = i;
        return;
    }
    char c = s[i];
    if (is_ident_start(c)) {
        while (i < n && is_ident_char(s[i]))
            i++;
        t.kind = TK_IDENT;
    } else if (is_digit(c) || (c == '.' && i + 1 < n && is_digit(s[i + 1]))) {
        while (i < n && is_digit(s[i]))
            i++;
        if (i < n && s[i] == '.') {
            i++;
            while (i < n && is_digit(s[i]))
                i++;
        }
        if (i < n && (s[i] == 'e' || s[i] == 'E')) {
            size_t e = i++;
            if (i < n && (s[i] == '+' || s[i] == '-'))
                i++;
            if (i >= n || !is_digit(s[i])) {
                fail_at(p, e, "malformed number: expected digits after the exponent '%c'", s[e]);
                t.kind = TK_ERROR;
            }
            while (i < n && is_digit(s[i]))
                i++;
        }
        if (t.kind != TK_ERROR)
            t.kind = TK_NUMBER;
    } else if (c == '"' || c == '\'') {
        i++;
        while (i < n && s[i] != c)
            i += s[i] == '\\' ? 2 : 1;
        if (i >= n) {
            fail_at(p, t.start, "unterminated string literal (no closing %c)", c);
            t.kind = TK_ERROR;
            i = n;
        } else {
            i++;
            t.kind = TK_STRING;
        }
    } else if (c == '-' && i + 1 < n && s[i + 1] == '>') {
        i += 2;
        t.kind = TK_ARROW;
    } else if (c == '.' && i + 2 < n && s[i + 1] == '.' && s[i + 2] == '.') {
        i += 3;
        t.kind = TK_DOTS;
    } else if (strchr("()[],?!|*=:.-", c)) {
        i++;
        t.kind = (unsigned char)c;
    } else {
        char d[32];
        char_desc((unsigned char)c, d, sizeof d);
        fail_at(p, i, "unexpected character %s", d);
        t.kind = TK_ERROR;
        i++;
    }
    t.end = i;
    p->tok = t;
    p->pos = i;
}

static bool tok_is(const parser *p, const char *word)
{
    size_t n = p->tok.end - p->tok.start;
    return p->tok.kind == TK_IDENT && strlen(word) == n &&
           memcmp(p->src + p->tok.start, word, n) == 0;
}

/* Consumes a token of `kind`, or fails with "expected <what>, got ...". */
static bool expect(parser *p, int kind, const char *what)
{
    if (p->tok.kind != kind) {
        fail_expected(p, what);
        return false;
    }
    next(p);
    return true;
}

/* New string with the current token's text; the token is consumed. */
static char *take_ident(parser *p)
{
    char *s = strndup(p->src + p->tok.start, p->tok.end - p->tok.start);
    if (!s)
        fail_oom(p);
    else
        next(p);
    return s;
}

/* ---- growable string (only for alias sets) ------------------------------- */

typedef struct dstr {
    char *s;
    size_t len, cap;
    bool oom;
} dstr;

static void dstr_add(dstr *d, const char *s, size_t n)
{
    if (d->oom)
        return;
    if (d->len + n + 1 > d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 16;
        while (cap < d->len + n + 1)
            cap *= 2;
        char *ns = realloc(d->s, cap);
        if (!ns) {
            d->oom = true;
            return;
        }
        d->s = ns;
        d->cap = cap;
    }
    memcpy(d->s + d->len, s, n);
    d->len += n;
    d->s[d->len] = '\0';
}

/* ---- types ---------------------------------------------------------------- */

/* Where a top-level argument type puts its (single) alias annotation. */
typedef struct alias_slot {
    od_alias *alias;
    const od_type *at;
} alias_slot;

static od_type *type_new(parser *p, od_type_kind kind)
{
    od_type *t = calloc(1, sizeof *t);
    if (!t) {
        fail_oom(p);
        return NULL;
    }
    t->kind = kind;
    t->fixed_len = -1;
    return t;
}

/* Capacity doubles at 4, 8, 16, ... items (od_type keeps no capacity
 * field), so a huge tuple type still parses in linear time. */
static bool type_add_item(parser *p, od_type *t, od_type *item)
{
    int n = t->nitems;
    if (n == 0 || (n >= 4 && (n & (n - 1)) == 0)) {
        if (n > INT_MAX / 2) {
            type_free(item);
            fail_at(p, p->tok.start, "too many tuple elements");
            return false;
        }
        od_type **items = realloc(t->items, sizeof *items * (size_t)(n ? n * 2 : 4));
        if (!items) {
            type_free(item);
            fail_oom(p);
            return false;
        }
        t->items = items;
    }
    t->items[t->nitems++] = item;
    return true;
}

/* One alias set: NAME or '*', joined by '|'. */
static void parse_alias_set(parser *p, dstr *d)
{
    for (;;) {
        if (p->tok.kind == '*' || p->tok.kind == TK_IDENT) {
            dstr_add(d, p->src + p->tok.start, p->tok.end - p->tok.start);
            next(p);
        } else {
            fail_expected(p, "an alias set name or '*' in the alias annotation");
            return;
        }
        if (p->tok.kind != '|')
            return;
        dstr_add(d, "|", 1);
        next(p);
    }
}

/* (a), (a!), (a|b), (a -> *), (a! -> a|b), at the current '('. */
static bool parse_alias(parser *p, alias_slot *slot, const od_type *at)
{
    size_t col = p->tok.start;
    if (!slot) {
        fail_at(p, col, "alias annotations are not allowed inside a tuple, Dict, Future or RRef type");
        return false;
    }
    if (slot->alias) {
        fail_at(p, col, "only one alias annotation is allowed per argument");
        return false;
    }
    od_alias *a = calloc(1, sizeof *a);
    if (!a) {
        fail_oom(p);
        return false;
    }
    next(p); /* ( */
    dstr before = {0}, after = {0};
    bool arrow = false;
    parse_alias_set(p, &before);
    if (p->st == OD_OK && p->tok.kind == '!') {
        a->is_write = true;
        next(p);
    }
    if (p->st == OD_OK && p->tok.kind == TK_ARROW) {
        arrow = true;
        next(p);
        parse_alias_set(p, &after);
    }
    if (p->st == OD_OK)
        expect(p, ')', "')' to close the alias annotation");
    if (before.oom || after.oom)
        fail_oom(p);
    if (p->st != OD_OK) {
        free(before.s);
        free(after.s);
        free(a);
        return false;
    }
    a->before = before.s;
    /* PyTorch prints the arrow only when the sets differ: (a -> a) is (a). */
    if (arrow && strcmp(before.s, after.s) != 0)
        a->after = after.s;
    else
        free(after.s);
    slot->alias = a;
    slot->at = at;
    return true;
}

static bool height_ok(parser *p, int h, size_t col)
{
    if (h > OD_SCHEMA_MAX_TYPE_DEPTH) {
        fail_at(p, col, "type nested deeper than %d levels", OD_SCHEMA_MAX_TYPE_DEPTH);
        return false;
    }
    return true;
}

static od_type *parse_type(parser *p, int depth, int *height, alias_slot *slot);

/* Name(T) or Name(K, V) after the name: Future, RRef, Dict. */
static bool parse_type_args(parser *p, od_type *t, int nargs, int depth, int *h)
{
    if (!expect(p, '(', "'(' after the type name"))
        return false;
    for (int i = 0; i < nargs; i++) {
        if (i > 0 && !expect(p, ',', "',' between the Dict key and value types"))
            return false;
        int ch = 0;
        od_type *sub = parse_type(p, depth + 1, &ch, NULL);
        if (!sub)
            return false;
        if (nargs == 1)
            t->elem = sub;
        else if (!type_add_item(p, t, sub))
            return false;
        if (ch + 1 > *h)
            *h = ch + 1;
    }
    return expect(p, ')', nargs == 1 ? "')' to close the type" : "')' to close the Dict type");
}

/* Named type at an identifier: base, opaque, dotted class, or type variable. */
static od_type *parse_named_type(parser *p)
{
    size_t start = p->tok.start, n = p->tok.end - p->tok.start;
    const char *s = p->src + start;
    bool dotted = false;
    next(p);
    /* __torch__.torch.classes.ns.Name: the dots join words with no spaces */
    while (p->tok.kind == '.' && p->tok.start == p->prev_end) {
        next(p);
        if (p->tok.kind != TK_IDENT || p->tok.start != p->prev_end) {
            char d[64];
            fail_at(p, p->prev_end, "expected a name right after '.' in a qualified class name, got %s",
                    p->tok.start != p->prev_end ? "a space" : tok_desc(p, d, sizeof d));
            return NULL;
        }
        dotted = true;
        n = p->tok.end - start;
        next(p);
    }
    if (!dotted) {
        for (size_t i = 0; i < sizeof base_types / sizeof base_types[0]; i++)
            if (strlen(base_types[i].name) == n && memcmp(base_types[i].name, s, n) == 0)
                return type_new(p, base_types[i].kind);
    }
    bool opaque = dotted;
    for (size_t i = 0; !opaque && i < sizeof opaque_types / sizeof opaque_types[0]; i++)
        opaque = strlen(opaque_types[i]) == n && memcmp(opaque_types[i], s, n) == 0;
    /* Like PyTorch: unknown lower-case names are type variables (t, tVal). */
    bool var = !opaque && islower((unsigned char)s[0]);
    if (!opaque && !var) {
        fail_at(p, start, "unknown type '%.*s'", (int)(n > 60 ? 60 : n), s);
        return NULL;
    }
    od_type *t = type_new(p, var ? OD_TY_VAR : OD_TY_CLASS);
    if (!t)
        return NULL;
    t->name = strndup(s, n);
    if (!t->name) {
        free(t);
        fail_oom(p);
        return NULL;
    }
    return t;
}

/* type := ( '(' [type {',' type}] ')' | Dict(K, V) | Future(T) | RRef(T) | name )
 *         [alias] { '[' [N] ']' [alias] | '?' }
 * slot is NULL inside compound types, where PyTorch keeps no alias. */
static od_type *parse_type(parser *p, int depth, int *height, alias_slot *slot)
{
    size_t col = p->tok.start;
    if (!height_ok(p, depth + 1, col))
        return NULL;
    od_type *t = NULL;
    int h = 1;
    if (p->tok.kind == '(') {
        if (!(t = type_new(p, OD_TY_TUPLE)))
            return NULL;
        next(p);
        if (p->tok.kind != ')') {
            for (;;) {
                int ch = 0;
                od_type *item = parse_type(p, depth + 1, &ch, NULL);
                if (!item || !type_add_item(p, t, item))
                    goto fail;
                if (ch + 1 > h)
                    h = ch + 1;
                if (p->tok.kind == ',') {
                    next(p);
                    continue;
                }
                if (p->tok.kind == ')')
                    break;
                fail_expected(p, "')' or ',' in the tuple type");
                goto fail;
            }
        }
        next(p); /* ) */
    } else if (tok_is(p, "Dict") || tok_is(p, "Future") || tok_is(p, "RRef")) {
        bool dict = tok_is(p, "Dict");
        od_type_kind k = dict ? OD_TY_DICT : tok_is(p, "Future") ? OD_TY_FUTURE : OD_TY_RREF;
        if (!(t = type_new(p, k)))
            return NULL;
        next(p);
        if (!parse_type_args(p, t, dict ? 2 : 1, depth, &h))
            goto fail;
    } else if (p->tok.kind == TK_IDENT) {
        if (!(t = parse_named_type(p)))
            return NULL;
    } else {
        fail_expected(p, "a type");
        return NULL;
    }
    if (!height_ok(p, depth + h, col))
        goto fail;
    if (p->tok.kind == '(' && !parse_alias(p, slot, t))
        goto fail;
    for (;;) {
        size_t scol = p->tok.start;
        if (p->tok.kind == '[') {
            if (!height_ok(p, depth + h + 1, scol))
                goto fail;
            next(p);
            int64_t len = -1;
            if (p->tok.kind == TK_NUMBER) {
                len = 0;
                for (size_t i = p->tok.start; i < p->tok.end; i++) {
                    if (!is_digit(p->src[i])) {
                        fail_at(p, p->tok.start, "list length must be a non-negative integer");
                        goto fail;
                    }
                    len = len * 10 + (p->src[i] - '0');
                    if (len > 65536) {
                        fail_at(p, p->tok.start, "list length larger than 65536");
                        goto fail;
                    }
                }
                next(p);
            }
            if (!expect(p, ']', len < 0 ? "']' or a length in the list type" : "']' after the list length"))
                goto fail;
            od_type *l = type_new(p, OD_TY_LIST);
            if (!l)
                goto fail;
            l->elem = t;
            l->fixed_len = len;
            t = l;
            h++;
            if (p->tok.kind == '(' && !parse_alias(p, slot, t))
                goto fail;
        } else if (p->tok.kind == '?') {
            if (!height_ok(p, depth + h + 1, scol))
                goto fail;
            next(p);
            od_type *o = type_new(p, OD_TY_OPTIONAL);
            if (!o)
                goto fail;
            o->elem = t;
            t = o;
            h++;
        } else {
            break;
        }
    }
    *height = h;
    return t;
fail:
    type_free(t);
    return NULL;
}

/* ---- defaults ------------------------------------------------------------- */

/* PyTorch's parseStringLiteral: \\ \' \" \a \b \f \n \r \t \v and \ooo. */
static char *unescape_string(parser *p)
{
    const char *s = p->src + p->tok.start + 1;
    size_t n = p->tok.end - p->tok.start - 2;
    char *out = malloc(n + 1), *o = out;
    if (!out) {
        fail_oom(p);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\') {
            *o++ = s[i];
            continue;
        }
        size_t col = p->tok.start + 1 + i;
        char c = s[++i]; /* the lexer guarantees a character after '\' */
        switch (c) {
        case '\\': case '\'': case '"': case '\n': *o++ = c; break;
        case 'a': *o++ = '\a'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'v': *o++ = '\v'; break;
        default: {
            int v = 0;
            bool ok = i + 2 < n;
            for (size_t k = 0; ok && k < 3; k++) {
                ok = s[i + k] >= '0' && s[i + k] <= '7';
                v = v * 8 + (s[i + k] - '0');
            }
            if (!ok || v >= 256 || v == 0) {
                fail_at(p, col, ok && v == 0 ? "string default contains a NUL character"
                                             : "bad escape sequence in string literal "
                                               "(expected \\\\, \\', \\\", \\a, \\b, \\f, "
                                               "\\n, \\r, \\t, \\v or \\ooo)");
                free(out);
                return NULL;
            }
            *o++ = (char)v;
            i += 2;
        }
        }
    }
    *o = '\0';
    return out;
}

/* A number token (with an optional leading '-' already consumed). */
static bool parse_number(parser *p, bool negative, bool want_double, od_value *v)
{
    size_t n = p->tok.end - p->tok.start;
    size_t col = p->tok.start - (negative ? 1 : 0);
    char buf[80];
    if (n + 2 > sizeof buf) {
        fail_at(p, col, "number too long in default value");
        return false;
    }
    snprintf(buf, sizeof buf, "%s%.*s", negative ? "-" : "", (int)n, p->src + p->tok.start);
    bool is_float = want_double || strpbrk(buf, ".eE") != NULL;
    errno = 0;
    if (is_float) {
        double d = strtod(buf, NULL);
        if (isinf(d)) {
            fail_at(p, col, "float default %s is out of range", buf);
            return false;
        }
        *v = od_double(d);
    } else {
        long long i = strtoll(buf, NULL, 10);
        if (errno == ERANGE) {
            fail_at(p, col, "integer default %s is out of range for int64", buf);
            return false;
        }
        *v = od_int(i);
    }
    next(p);
    return true;
}

/* One constant: True, False, None, a string, a name or a number, read the
 * way PyTorch's parseSingleConstant reads it for an element of `kind`. */
static bool parse_single(parser *p, od_type_kind kind, od_value *v)
{
    *v = od_none();
    if (tok_is(p, "True") || tok_is(p, "False")) {
        *v = od_bool(tok_is(p, "True"));
        next(p);
        return true;
    }
    if (tok_is(p, "None")) {
        next(p);
        return true;
    }
    if (p->tok.kind == TK_STRING) {
        size_t col = p->tok.start;
        char *s = unescape_string(p);
        if (!s)
            return false;
        if (kind == OD_TY_DEVICE) {
            od_device dev;
            od_error derr;
            if (od_device_parse(s, &dev, &derr) != OD_OK) {
                fail_at(p, col, "bad Device default: %s", derr.message);
                free(s);
                return false;
            }
            free(s);
            *v = od_device_v(dev);
        } else {
            *v = od_str(s);
        }
        next(p);
        return true;
    }
    if (p->tok.kind == TK_IDENT) {
        /* A name (Mean, long, ...) stands for an integer, which a float
         * argument would print as "1" and read back as 1.0: refused, as
         * PyTorch refuses it. */
        if (kind == OD_TY_FLOAT) {
            fail_expected(p, "a number for a float default");
            return false;
        }
        size_t n = p->tok.end - p->tok.start;
        const char *s = p->src + p->tok.start;
        for (size_t i = 0; i < sizeof enum_defaults / sizeof enum_defaults[0]; i++)
            if (strlen(enum_defaults[i].name) == n && memcmp(enum_defaults[i].name, s, n) == 0) {
                *v = od_int(enum_defaults[i].value);
                next(p);
                return true;
            }
        char *name = strndup(s, n);
        if (!name) {
            fail_oom(p);
            return false;
        }
        od_dtype dt = od_dtype_from_name(name);
        if (dt != OD_NUM_DTYPES) {
            free(name);
            *v = od_dtype_v(dt);
        } else {
            *v = od_str(name); /* a name we do not know: kept as written */
        }
        next(p);
        return true;
    }
    bool negative = false;
    if (p->tok.kind == '-') {
        negative = true;
        next(p);
        if (p->tok.kind != TK_NUMBER) {
            fail_expected(p, "a number after '-'");
            return false;
        }
    }
    if (p->tok.kind != TK_NUMBER) {
        fail_expected(p, "a default value (a number, True, False, None, a string or a name)");
        return false;
    }
    if (!parse_number(p, negative, kind == OD_TY_FLOAT, v))
        return false;
    if (kind == OD_TY_SCALARTYPE && v->tag == OD_T_INT) {
        od_dtype dt = dtype_from_torch_number(v->u.i);
        if (dt != OD_NUM_DTYPES)
            *v = od_dtype_v(dt);
    }
    return true;
}

/* Which list tag a list of `elem` becomes; OD_NUM_TAGS when none does. */
static od_tag list_tag_for(const od_type *elem)
{
    switch (elem->kind) {
    case OD_TY_INT:
    case OD_TY_SYMINT: return OD_T_INT_LIST;
    case OD_TY_FLOAT: return OD_T_DOUBLE_LIST;
    case OD_TY_BOOL: return OD_T_BOOL_LIST;
    case OD_TY_TENSOR: return OD_T_TENSOR_LIST;
    case OD_TY_OPTIONAL: return elem->elem->kind == OD_TY_TENSOR ? OD_T_TENSOR_LIST : OD_NUM_TAGS;
    default: return OD_NUM_TAGS;
    }
}

/* Stores one parsed element into a list buffer of `tag`, converting int to
 * double for float lists the way PyTorch's convertToList does. */
static bool list_store(parser *p, od_tag tag, void *items, size_t i, const od_value *e, size_t col)
{
    switch (tag) {
    case OD_T_INT_LIST:
        if (e->tag == OD_T_INT) {
            ((int64_t *)items)[i] = e->u.i;
            return true;
        }
        break;
    case OD_T_DOUBLE_LIST:
        if (e->tag == OD_T_INT || e->tag == OD_T_DOUBLE) {
            ((double *)items)[i] = od_value_as_double(e);
            return true;
        }
        break;
    case OD_T_BOOL_LIST:
        if (e->tag == OD_T_BOOL) {
            ((bool *)items)[i] = e->u.b;
            return true;
        }
        break;
    default: break;
    }
    const char *want = tag == OD_T_INT_LIST ? "an int" : tag == OD_T_DOUBLE_LIST ? "a float" : "True or False";
    fail_at(p, col, "expected %s in the default list, got %s", want, od_tag_name(e->tag));
    return false;
}

static size_t list_elem_size(od_tag tag)
{
    return tag == OD_T_INT_LIST ? sizeof(int64_t) : tag == OD_T_DOUBLE_LIST ? sizeof(double) : sizeof(bool);
}

/* '[' [c {',' c}] ']' for a list of `elem`. */
static bool parse_const_list(parser *p, const od_type *elem, od_value *v)
{
    od_tag tag = list_tag_for(elem);
    size_t open = p->tok.start;
    next(p); /* [ */
    if (p->tok.kind == ']') {
        if (tag == OD_NUM_TAGS) {
            fail_at(p, open, "list defaults are only supported for int, float, bool and Tensor lists");
            return false;
        }
        next(p);
        void *items = malloc(1);
        if (!items) {
            fail_oom(p);
            return false;
        }
        *v = od_list_v(tag, items, 0);
        return true;
    }
    if (tag == OD_NUM_TAGS || tag == OD_T_TENSOR_LIST) {
        fail_at(p, open, "list defaults are only supported for int, float and bool lists "
                         "(and [] for Tensor lists)");
        return false;
    }
    size_t esize = list_elem_size(tag), n = 0, cap = 4;
    void *items = malloc(esize * cap);
    if (!items) {
        fail_oom(p);
        return false;
    }
    for (;;) {
        size_t col = p->tok.start;
        od_value e;
        if (!parse_single(p, elem->kind, &e))
            goto fail;
        if (n == cap) {
            void *grown = realloc(items, esize * cap * 2);
            if (!grown) {
                od_value_release(&e);
                fail_oom(p);
                goto fail;
            }
            items = grown;
            cap *= 2;
        }
        bool ok = list_store(p, tag, items, n, &e, col);
        od_value_release(&e);
        if (!ok)
            goto fail;
        n++;
        if (p->tok.kind == ',') {
            next(p);
            continue;
        }
        if (p->tok.kind == ']') {
            next(p);
            break;
        }
        fail_expected(p, "',' or ']' in the default list");
        goto fail;
    }
    *v = od_list_v(tag, items, n);
    return true;
fail:
    free(items);
    return false;
}

/* The text after '='; fills default_value and default_text. */
static bool parse_default(parser *p, od_arg *a)
{
    size_t start = p->tok.start;
    const od_type *base = od_type_unwrap_optional(a->type);
    od_value v = od_none();
    if (tok_is(p, "None")) {
        next(p);
    } else if (base->kind == OD_TY_LIST) {
        if (p->tok.kind == '[') {
            if (!parse_const_list(p, base->elem, &v))
                return false;
        } else if (base->fixed_len >= 0) {
            /* int[2] stride=1 means [1, 1] */
            od_tag tag = list_tag_for(base->elem);
            if (tag == OD_NUM_TAGS || tag == OD_T_TENSOR_LIST) {
                fail_expected(p, "'[' or None for this list default");
                return false;
            }
            size_t col = p->tok.start;
            od_value e;
            if (!parse_single(p, base->elem->kind, &e))
                return false;
            /* Convert once (this also type-checks N == 0), then replicate. */
            union { int64_t i; double d; bool b; } one;
            bool ok = list_store(p, tag, &one, 0, &e, col);
            od_value_release(&e);
            if (!ok)
                return false;
            size_t n = (size_t)base->fixed_len, esize = list_elem_size(tag);
            void *items = malloc(n ? n * esize : 1);
            if (!items) {
                fail_oom(p);
                return false;
            }
            for (size_t i = 0; i < n; i++)
                memcpy((char *)items + i * esize, &one, esize);
            v = od_list_v(tag, items, n);
        } else {
            fail_expected(p, "a list '[...]' or None as the default of a list argument");
            return false;
        }
    } else if (base->kind == OD_TY_TENSOR || base->kind == OD_TY_GENERATOR) {
        fail_expected(p, base->kind == OD_TY_TENSOR ? "None as the default of a Tensor argument"
                                                    : "None as the default of a Generator argument");
        return false;
    } else if (!parse_single(p, base->kind, &v)) {
        return false;
    }
    a->default_value = v;
    a->has_default = true;
    a->default_text = strndup(p->src + start, p->prev_end - start);
    if (!a->default_text) {
        fail_oom(p);
        return false;
    }
    return true;
}

/* ---- declarations ---------------------------------------------------------- */

static bool parse_argument(parser *p, od_arg *a, bool is_return)
{
    alias_slot slot = {0};
    int h = 0;
    a->type = parse_type(p, 0, &h, &slot);
    a->alias = slot.alias;
    a->alias_at = a->type ? slot.at : NULL;
    if (!a->type)
        return false;
    if (p->tok.kind == TK_IDENT) {
        if (!(a->name = take_ident(p)))
            return false;
    } else if (!is_return) {
        fail_expected(p, "an argument name after the type");
        return false;
    }
    if (!is_return && p->tok.kind == '=') {
        next(p);
        return parse_default(p, a);
    }
    return true;
}

/* Appends a zeroed slot and counts it at once, so a failure while filling it
 * is cleaned up by od_schema_free. */
static od_arg *push_arg(parser *p, od_arg **arr, int *n, int *cap)
{
    if (*n == *cap) {
        if (*cap > INT_MAX / 2) {
            fail_at(p, p->tok.start, "too many arguments");
            return NULL;
        }
        int nc = *cap ? *cap * 2 : 8;
        od_arg *grown = realloc(*arr, sizeof *grown * (size_t)nc);
        if (!grown) {
            fail_oom(p);
            return NULL;
        }
        *arr = grown;
        *cap = nc;
    }
    od_arg *a = &(*arr)[(*n)++];
    memset(a, 0, sizeof *a);
    return a;
}

static bool parse_name(parser *p, od_schema *s)
{
    if (p->tok.kind != TK_IDENT) {
        fail_expected(p, "an operator name");
        return false;
    }
    char *first = take_ident(p);
    if (!first)
        return false;
    if (p->tok.kind == ':') {
        s->ns = first;
        next(p);
        if (!expect(p, ':', "'::' after the namespace"))
            return false;
        if (p->tok.kind != TK_IDENT) {
            fail_expected(p, "an operator name after '::'");
            return false;
        }
        if (!(s->name = take_ident(p)))
            return false;
    } else {
        s->name = first;
    }
    if (p->tok.kind == '.') {
        next(p);
        if (p->tok.kind != TK_IDENT) {
            fail_expected(p, "an overload name after '.'");
            return false;
        }
        s->overload = take_ident(p);
    } else {
        s->overload = strdup("");
        if (!s->overload)
            fail_oom(p);
    }
    return s->overload != NULL;
}

static bool parse_arguments(parser *p, od_schema *s)
{
    if (!expect(p, '(', "'(' after the operator name"))
        return false;
    if (p->tok.kind == ')') {
        next(p);
        return true;
    }
    int cap = 0;
    bool kwarg_only = false, kw_pending = false; /* a '*' not yet followed by an argument */
    for (;;) {
        size_t col = p->tok.start;
        if (s->is_vararg) {
            fail_at(p, col, "'...' must be the last argument");
            return false;
        }
        if (p->tok.kind == '*') {
            if (kwarg_only) {
                fail_at(p, col, "'*' appears twice in the argument list");
                return false;
            }
            kwarg_only = kw_pending = true;
            next(p);
            if (p->tok.kind != ',') {
                fail_expected(p, "',' and a keyword-only argument after '*'");
                return false;
            }
        } else if (p->tok.kind == TK_DOTS) {
            if (kw_pending) {
                fail_at(p, col, "'*' must be followed by a keyword-only argument, not '...'");
                return false;
            }
            s->is_vararg = true;
            next(p);
        } else {
            kw_pending = false;
            od_arg *a = push_arg(p, &s->args, &s->nargs, &cap);
            if (!a)
                return false;
            a->kwarg_only = kwarg_only;
            if (!parse_argument(p, a, false))
                return false;
        }
        if (p->tok.kind == ',') {
            next(p);
            continue;
        }
        if (p->tok.kind == ')') {
            next(p);
            return true;
        }
        fail_expected(p, "')' or ',' after argument");
        return false;
    }
}

static bool parse_returns(parser *p, od_schema *s)
{
    if (p->tok.kind == TK_DOTS) {
        s->is_varret = true;
        next(p);
        return true;
    }
    int cap = 0;
    if (p->tok.kind != '(') {
        od_arg *r = push_arg(p, &s->rets, &s->nrets, &cap);
        return r && parse_argument(p, r, true);
    }
    s->rets_tuple = true;
    next(p);
    if (p->tok.kind == ')') {
        next(p);
        return true;
    }
    for (;;) {
        if (s->is_varret) {
            fail_at(p, p->tok.start, "'...' must be the last return");
            return false;
        }
        if (p->tok.kind == TK_DOTS) {
            s->is_varret = true;
            next(p);
        } else {
            od_arg *r = push_arg(p, &s->rets, &s->nrets, &cap);
            if (!r || !parse_argument(p, r, true))
                return false;
        }
        if (p->tok.kind == ',') {
            next(p);
            continue;
        }
        if (p->tok.kind == ')') {
            next(p);
            return true;
        }
        fail_expected(p, "')' or ',' after return");
        return false;
    }
}

od_status od_schema_parse(const char *text, od_schema **out, od_error *err)
{
    if (out)
        *out = NULL;
    if (!text || !out)
        return od_error_set(err, OD_EINVAL, "od_schema_parse: %s is NULL", text ? "out" : "schema text");
    parser p = {.src = text, .len = strlen(text), .err = err};
    od_schema *s = calloc(1, sizeof *s);
    if (!s)
        return od_error_set(err, OD_ENOMEM, "out of memory parsing a schema");
    next(&p);
    if (p.st == OD_OK && parse_name(&p, s) && parse_arguments(&p, s) &&
        expect(&p, TK_ARROW, "'->' after the argument list") && parse_returns(&p, s) &&
        p.tok.kind != TK_EOF)
        fail_expected(&p, "end of schema");
    if (p.st != OD_OK) {
        od_schema_free(s);
        return p.st;
    }
    *out = s;
    return OD_OK;
}

/* ---- printing -------------------------------------------------------------- */

/* snprintf-style sink: counts everything, stores what fits. */
typedef struct sbuf {
    char *buf;
    size_t cap, len;
} sbuf;

static void put_n(sbuf *b, const char *s, size_t n)
{
    if (b->len + 1 < b->cap) {
        size_t room = b->cap - 1 - b->len;
        memcpy(b->buf + b->len, s, n < room ? n : room);
    }
    b->len += n;
}

static void put(sbuf *b, const char *s) { put_n(b, s, strlen(s)); }

static void putf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(sbuf *b, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        put_n(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static int finish(sbuf *b)
{
    if (b->cap)
        b->buf[b->len < b->cap ? b->len : b->cap - 1] = '\0';
    return b->len > INT_MAX ? INT_MAX : (int)b->len;
}

static void put_alias(sbuf *b, const od_alias *a)
{
    put(b, "(");
    put(b, a->before ? a->before : "");
    if (a->is_write)
        put(b, "!");
    if (a->after) {
        put(b, " -> ");
        put(b, a->after);
    }
    put(b, ")");
}

/* sig: the inferred-signature form, which has no fixed list lengths. The
 * alias (if any) is written right after node `at`. */
static void put_type(sbuf *b, const od_type *t, bool sig, const od_alias *al, const od_type *at)
{
    switch (t->kind) {
    case OD_TY_OPTIONAL:
        put_type(b, t->elem, sig, al, at);
        put(b, "?");
        break;
    case OD_TY_LIST:
        put_type(b, t->elem, sig, al, at);
        if (!sig && t->fixed_len >= 0)
            putf(b, "[%lld]", (long long)t->fixed_len);
        else
            put(b, "[]");
        break;
    case OD_TY_TUPLE:
        put(b, "(");
        for (int i = 0; i < t->nitems; i++) {
            if (i)
                put(b, ", ");
            put_type(b, t->items[i], sig, NULL, NULL);
        }
        put(b, ")");
        break;
    case OD_TY_DICT:
        put(b, "Dict(");
        for (int i = 0; i < t->nitems; i++) {
            if (i)
                put(b, ", ");
            put_type(b, t->items[i], sig, NULL, NULL);
        }
        put(b, ")");
        break;
    case OD_TY_FUTURE:
    case OD_TY_RREF:
        put(b, t->kind == OD_TY_FUTURE ? "Future(" : "RRef(");
        if (t->elem)
            put_type(b, t->elem, sig, NULL, NULL);
        put(b, ")");
        break;
    case OD_TY_CLASS:
    case OD_TY_VAR:
        put(b, t->name ? t->name : "");
        break;
    default:
        put(b, (unsigned)t->kind < OD_NUM_TYPE_KINDS && kind_names[t->kind] ? kind_names[t->kind] : "?");
        break;
    }
    if (al && t == at)
        put_alias(b, al);
}

/* IValue's double printing: integral values as "1.", else 17 digits. */
static void put_double(sbuf *b, double d)
{
    int c = fpclassify(d);
    if ((c == FP_NORMAL || c == FP_ZERO) && fabs(d) < 1e10) {
        int64_t i = (int64_t)d;
        if ((double)i == d) {
            if (i == 0 && signbit(d))
                put(b, "-0.");
            else
                putf(b, "%lld.", (long long)i);
            return;
        }
    }
    putf(b, "%.17g", d);
}

/* c10::printQuotedString. */
static void put_quoted(sbuf *b, const char *s)
{
    put(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        switch (*c) {
        case '\\': put(b, "\\\\"); break;
        case '\'': put(b, "\\'"); break;
        case '"': put(b, "\\\""); break;
        case '\a': put(b, "\\a"); break;
        case '\b': put(b, "\\b"); break;
        case '\f': put(b, "\\f"); break;
        case '\n': put(b, "\\n"); break;
        case '\r': put(b, "\\r"); break;
        case '\t': put(b, "\\t"); break;
        case '\v': put(b, "\\v"); break;
        default:
            if (*c >= 0x20 && *c < 0x7f)
                put_n(b, (const char *)c, 1);
            else
                putf(b, "\\%03o", *c);
        }
    }
    put(b, "\"");
}

static void put_default(sbuf *b, const od_arg *a)
{
    const od_value *v = &a->default_value;
    const char *text = a->default_text ? a->default_text : "";
    const od_type *base = od_type_unwrap_optional(a->type);
    switch (v->tag) {
    case OD_T_NONE: put(b, "None"); return;
    case OD_T_BOOL: put(b, v->u.b ? "True" : "False"); return;
    case OD_T_INT: putf(b, "%lld", (long long)v->u.i); return;
    case OD_T_DOUBLE: put_double(b, v->u.d); return;
    case OD_T_STRING:
        if (text[0] == '"' || text[0] == '\'')
            put_quoted(b, v->u.s);
        else
            put(b, text); /* a bare name we do not know */
        return;
    case OD_T_DTYPE: {
        int n = torch_scalar_type_number(v->u.dtype);
        if (n >= 0)
            putf(b, "%d", n);
        else
            put(b, text);
        return;
    }
    case OD_T_INT_LIST: {
        const int64_t *xs = v->u.list.items;
        size_t n = v->u.list.n;
        bool same = n > 0;
        for (size_t i = 1; i < n; i++)
            same = same && xs[i] == xs[0];
        /* PyTorch writes int[2] stride=1 rather than [1, 1]; under Optional
         * we keep the form that was written. (PyTorch also collapses int[]
         * x=[1, 1] to x=1, which does not parse back; we don't.) */
        bool int_list = base && base->kind == OD_TY_LIST &&
                        (base->elem->kind == OD_TY_INT || base->elem->kind == OD_TY_SYMINT);
        bool collapse = same && int_list && base->fixed_len >= 0 &&
                        (a->type->kind == OD_TY_LIST ? n > 1 : text[0] != '[');
        if (collapse) {
            putf(b, "%lld", (long long)xs[0]);
            return;
        }
        put(b, "[");
        for (size_t i = 0; i < n; i++)
            putf(b, i ? ", %lld" : "%lld", (long long)xs[i]);
        put(b, "]");
        return;
    }
    case OD_T_DOUBLE_LIST:
    case OD_T_BOOL_LIST: {
        put(b, "[");
        for (size_t i = 0; i < v->u.list.n; i++) {
            if (i)
                put(b, ", ");
            if (v->tag == OD_T_DOUBLE_LIST)
                put_double(b, ((const double *)v->u.list.items)[i]);
            else
                put(b, ((const bool *)v->u.list.items)[i] ? "True" : "False");
        }
        put(b, "]");
        return;
    }
    case OD_T_TENSOR_LIST:
        if (v->u.list.n == 0) {
            put(b, "[]");
            return;
        }
        put(b, text);
        return;
    default: /* devices and anything built by hand: as written */
        put(b, text);
        return;
    }
}

static void put_arg(sbuf *b, const od_arg *a, bool sig, int idx)
{
    if (!a->type) {
        put(b, "?");
    } else if (sig) {
        put_type(b, a->type, true, NULL, NULL);
    } else {
        const od_type *at = a->alias_at ? a->alias_at : od_type_unwrap_optional(a->type);
        put_type(b, a->type, false, a->alias, at);
    }
    if (sig) {
        putf(b, " _%d", idx);
        return;
    }
    if (a->name && a->name[0]) {
        put(b, " ");
        put(b, a->name);
    }
    if (a->has_default) {
        put(b, "=");
        put_default(b, a);
    }
}

/* A return whose text starts with '(' (a tuple, or list of tuples) needs
 * parentheses around the return list to parse back as one return. */
static bool starts_with_paren(const od_type *t)
{
    while (t && (t->kind == OD_TY_LIST || t->kind == OD_TY_OPTIONAL))
        t = t->elem;
    return t && t->kind == OD_TY_TUPLE;
}

static void put_name(sbuf *b, const od_schema *s)
{
    if (s->ns) {
        put(b, s->ns);
        put(b, "::");
    }
    put(b, s->name ? s->name : "");
    if (s->overload && s->overload[0]) {
        put(b, ".");
        put(b, s->overload);
    }
}

static void put_schema(sbuf *b, const od_schema *s, bool sig)
{
    if (!sig)
        put_name(b, s);
    put(b, "(");
    bool seen_kwarg = false;
    for (int i = 0; i < s->nargs; i++) {
        if (i)
            put(b, ", ");
        if (!sig && s->args[i].kwarg_only && !seen_kwarg) {
            put(b, "*, ");
            seen_kwarg = true;
        }
        put_arg(b, &s->args[i], sig, i);
    }
    if (s->is_vararg)
        put(b, s->nargs ? ", ..." : "...");
    put(b, ") -> ");
    bool need_paren = !((s->nrets == 1 && !s->is_varret) || (s->nrets == 0 && s->is_varret));
    if (s->nrets == 1 && !s->is_varret && starts_with_paren(s->rets[0].type))
        need_paren = true;
    if (need_paren)
        put(b, "(");
    for (int i = 0; i < s->nrets; i++) {
        if (i)
            put(b, ", ");
        put_arg(b, &s->rets[i], sig, i);
    }
    if (s->is_varret)
        put(b, s->nrets ? ", ..." : "...");
    if (need_paren)
        put(b, ")");
}

int od_schema_print(const od_schema *s, char *buf, size_t cap)
{
    sbuf b = {buf, buf ? cap : 0, 0};
    if (s)
        put_schema(&b, s, false);
    return finish(&b);
}

int od_schema_print_signature(const od_schema *s, char *buf, size_t cap)
{
    sbuf b = {buf, buf ? cap : 0, 0};
    if (s)
        put_schema(&b, s, true);
    return finish(&b);
}

int od_schema_print_name(const od_schema *s, char *buf, size_t cap)
{
    sbuf b = {buf, buf ? cap : 0, 0};
    if (s)
        put_name(&b, s);
    return finish(&b);
}

int od_type_print(const od_type *t, char *buf, size_t cap)
{
    sbuf b = {buf, buf ? cap : 0, 0};
    if (t)
        put_type(&b, t, false, NULL, NULL);
    return finish(&b);
}

/* ---- queries --------------------------------------------------------------- */

const od_type *od_type_unwrap_optional(const od_type *t)
{
    return t && t->kind == OD_TY_OPTIONAL ? t->elem : t;
}

bool od_type_is_optional(const od_type *t) { return t && t->kind == OD_TY_OPTIONAL; }

bool od_type_is_tensor_like(const od_type *t)
{
    t = od_type_unwrap_optional(t);
    if (!t)
        return false;
    if (t->kind == OD_TY_LIST)
        t = od_type_unwrap_optional(t->elem);
    return t && t->kind == OD_TY_TENSOR;
}
