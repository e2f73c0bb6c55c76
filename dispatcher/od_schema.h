/* od_schema.h — PyTorch function schemas: parse, print, inspect.
 *
 * Invariants: od_schema_print(od_schema_parse(text)) == text for every schema
 * as PyTorch prints it (the 4165-line corpus in tests/data). A parsed
 * schema owns all of its strings and type nodes; od_schema_free releases the
 * whole tree. Types are trees: Optional and List wrap an element type, so
 * `int[1]?` is Optional(List(int, len 1)) and `Tensor?[]` is
 * List(Optional(Tensor)).
 */
#ifndef OD_SCHEMA_H
#define OD_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "od_error.h"
#include "od_value.h"

typedef enum od_type_kind {
    OD_TY_TENSOR,
    OD_TY_INT,
    OD_TY_SYMINT,
    OD_TY_FLOAT,
    OD_TY_BOOL,
    OD_TY_STR,
    OD_TY_SCALAR,
    OD_TY_SCALARTYPE,
    OD_TY_LAYOUT,
    OD_TY_DEVICE,
    OD_TY_MEMORYFORMAT,
    OD_TY_GENERATOR,
    OD_TY_DIMNAME,
    OD_TY_QSCHEME,
    OD_TY_STREAM,
    OD_TY_STORAGE,
    OD_TY_ANY,
    OD_TY_CLASS,    /* opaque named type, e.g. __torch__.torch.classes.x.Y */
    OD_TY_OPTIONAL, /* elem? */
    OD_TY_LIST,     /* elem[] or elem[N] */
    OD_TY_TUPLE,    /* (T1, T2) as a type, where the corpus uses one */
    /* TorchScript types the schema corpus uses (prim::, aten:: list/dict ops). */
    OD_TY_COMPLEX,   /* complex */
    OD_TY_VAR,       /* type variable (t, t1, tVal): name holds it */
    OD_TY_DICT,      /* Dict(K, V): items[0] = K, items[1] = V, nitems = 2 */
    OD_TY_FUTURE,    /* Future(T): elem */
    OD_TY_RREF,      /* RRef(T): elem */
    OD_TY_NONE,      /* NoneType (also written None) */
    OD_TY_ANY_ENUM,  /* AnyEnumType */
    OD_TY_ANY_CLASS, /* AnyClassType */
    OD_NUM_TYPE_KINDS
} od_type_kind;

typedef struct od_type {
    od_type_kind kind;
    struct od_type *elem;    /* OPTIONAL, LIST */
    int64_t fixed_len;       /* LIST: N of T[N], or -1 for T[] */
    char *name;              /* CLASS: the qualified name; otherwise NULL */
    struct od_type **items;  /* TUPLE elements */
    int nitems;
} od_type;

/* Alias annotation of a Tensor: (a), (a!), (a -> *), (a|b), ... */
typedef struct od_alias {
    char *before;     /* set names before "->", e.g. "a" or "a|b" */
    char *after;      /* after "->" ("*" or names); NULL when no arrow */
    bool is_write;    /* the "!" */
} od_alias;

typedef struct od_arg {
    char *name;         /* may be NULL for unnamed returns */
    od_type *type;
    od_alias *alias;    /* NULL when not annotated */
    bool kwarg_only;    /* after the "*" marker */
    bool has_default;
    char *default_text; /* exactly as written, for printing */
    od_value default_value; /* owned; parsed form of default_text (see od_schema_parse) */
    /* Borrowed pointer into `type`: the node whose text the alias annotation
     * follows. Tensor(a)[] -> the Tensor element, t[](a!) -> the list,
     * Tensor(a!)? -> the Tensor. NULL means PyTorch's default place (after
     * the type without its outer Optional). Set by the parser. */
    const od_type *alias_at;
} od_arg;

typedef struct od_schema {
    char *ns;        /* "aten"; NULL when the name has no namespace */
    char *name;      /* "add" */
    char *overload;  /* "Tensor"; "" for the default overload */
    od_arg *args;
    int nargs;
    od_arg *rets;
    int nrets;
    bool rets_tuple;  /* returns written as a parenthesised list */
    bool is_vararg;   /* "..." among arguments */
    bool is_varret;   /* "..." among returns */
} od_schema;

/* Types nest at most this deep (int[][]... or ((...))); deeper is OD_EINVAL,
 * so parsing, printing and freeing never recurse further than this. */
#define OD_SCHEMA_MAX_TYPE_DEPTH 32

/* Parses one schema. On error returns OD_EINVAL with a message naming the
 * 1-based column and what was expected ("column 17: expected ')' ..."). *out
 * is new; free with od_schema_free.
 *
 * default_value by default text (the type decides where PyTorch's does):
 *   None -> OD_T_NONE; True/False -> OD_T_BOOL; 1 -> OD_T_INT; 1.5, or any
 *   number for a float argument -> OD_T_DOUBLE; [..] -> OD_T_INT_LIST /
 *   OD_T_DOUBLE_LIST / OD_T_BOOL_LIST by element type ([] of Tensor ->
 *   empty OD_T_TENSOR_LIST); an int for int[N] -> OD_T_INT_LIST of N copies;
 *   "s" or 's' -> OD_T_STRING (unescaped), or OD_T_DEVICE for a Device
 *   argument; dtype names (long, float, ...) and, for ScalarType arguments,
 *   PyTorch's ScalarType numbers (4 = long) -> OD_T_DTYPE; memory formats
 *   (contiguous_format 0, preserve_format 1, channels_last 2,
 *   channels_last_3d 3), layouts (strided 0, sparse_coo 1, ...) and
 *   reductions (Mean 1, Sum 2) -> OD_T_INT with PyTorch's numbers; any other
 *   bare name -> OD_T_STRING holding the name. */
od_status od_schema_parse(const char *text, od_schema **out, od_error *err);
void od_schema_free(od_schema *s);

/* Prints the canonical text, as PyTorch's FunctionSchema printer does:
 * defaults are printed from their values (reduction=Mean prints as
 * reduction=1, eps=1e-5 as eps=1.0000000000000001e-05), except device
 * strings and bare names, which print as written. buf may be NULL when cap
 * is 0. Returns the length needed (like snprintf); buf is always
 * NUL-terminated when cap > 0. The same holds for every printer below. */
int od_schema_print(const od_schema *s, char *buf, size_t cap);
/* Prints just the type ("Tensor?[]"). */
int od_type_print(const od_type *t, char *buf, size_t cap);
/* Prints the dump form of the inferred signature used by _dispatch_dump:
 * "(Tensor _0, Tensor _1, Scalar _2) -> Tensor _0". Like PyTorch's schema
 * inferred from a kernel's C++ signature: no name, arguments and returns
 * named _0, _1, ..., no alias annotations, defaults, '*' marker or fixed
 * list lengths (int[1]? prints as int[]?); several returns print as
 * "-> (Tensor _0, Tensor _1)", none as "-> ()". */
int od_schema_print_signature(const od_schema *s, char *buf, size_t cap);

/* "aten::add.Tensor" (ns::name[.overload]). */
int od_schema_print_name(const od_schema *s, char *buf, size_t cap);

/* Tensor, Tensor?, Tensor[], Tensor?[] (and Tensor[]?, Tensor?[]?): arguments
 * the key set is built from. NULL-safe (false). */
bool od_type_is_tensor_like(const od_type *t);
/* Strips one Optional (returns t itself otherwise; NULL for NULL). Borrowed. */
const od_type *od_type_unwrap_optional(const od_type *t);
bool od_type_is_optional(const od_type *t);

#endif
