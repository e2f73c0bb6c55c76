/* test_schema.c — the schema parser and printer.
 *
 * The acceptance test reads PyTorch 1.13's 4165 schemas (as PyTorch prints
 * them) and requires each to parse and print back byte-identical; the
 * signature test compares against the "(Tensor _0, ...) -> Tensor _0" forms
 * in PyTorch's own _dispatch_dump output. Test data is found in
 * $OD_TESTDATA (the testdata directory, or the corpus file itself), else
 * tests/data relative to the repository root (a copy of PyTorch 1.13's
 * schemas and dispatch dumps, so a clone tests on its own); missing data is
 * a failure, not a skip.
 *
 * Randomised tests (numeric defaults, mutation fuzzing) draw a fresh seed
 * from /dev/urandom and print it on failure; OD_TEST_SEED=<n> replays one.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "od_schema.h"

/* ---- helpers ---------------------------------------------------------------- */

#define CORPUS_NAME "torch-1.13-schemas.txt"
#define CORPUS_LINES 4165
#ifndef MUT_ITERS
#define MUT_ITERS 20000
#endif

/* Assertions in hot loops: Criterion reports every passing cr_assert to its
 * runner, which hundreds of thousands of times over is slow, so loops only
 * report failures. (No test sets .timeout: under --jobs, Criterion 2.4.1's
 * runner leaks a timeout record, which ASan reports as a leak.) */
#define CHECK(cond, ...)                 \
    do {                                 \
        if (!(cond))                     \
            cr_assert_fail(__VA_ARGS__); \
    } while (0)

static uint64_t g_rng;

static uint64_t rng_next(void)
{
    /* splitmix64: small, good enough for test inputs */
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t fresh_seed(void)
{
    const char *env = getenv("OD_TEST_SEED");
    if (env && *env)
        return strtoull(env, NULL, 0);
    uint64_t s = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&s, sizeof s, 1, f) != 1)
        s = (uint64_t)time(NULL) ^ (uint64_t)clock();
    if (f)
        fclose(f);
    return s;
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The testdata directory; fails the test when there is none. */
static void testdata_dir(char *out, size_t cap)
{
    const char *env = getenv("OD_TESTDATA");
    if (env && *env) {
        if (is_dir(env)) {
            snprintf(out, cap, "%s", env);
            return;
        }
        if (is_file(env)) { /* the corpus file itself */
            snprintf(out, cap, "%s", env);
            char *slash = strrchr(out, '/');
            if (slash)
                *slash = '\0';
            else
                snprintf(out, cap, ".");
            return;
        }
        cr_assert_fail("OD_TESTDATA=%s is neither a directory nor a file", env);
    }
    const char *cands[] = {"tests/data"};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", cands[i], CORPUS_NAME);
        if (is_file(p)) {
            snprintf(out, cap, "%s", cands[i]);
            return;
        }
    }
    cr_assert_fail("test data not found: set OD_TESTDATA or run from the repository root "
             "(looked for tests/data/%s)",
             CORPUS_NAME);
}

static char *corpus_path(void)
{
    static char path[1200];
    const char *env = getenv("OD_TESTDATA");
    if (env && *env && is_file(env)) {
        snprintf(path, sizeof path, "%s", env);
        return path;
    }
    char dir[1024];
    testdata_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/%s", dir, CORPUS_NAME);
    return path;
}

/* Reads the corpus into lines (each malloc'd, without the newline). */
static char **read_corpus(int *n)
{
    const char *path = corpus_path();
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open schema corpus %s", path);
    int cap = 4096, cnt = 0;
    char **lines = malloc(sizeof *lines * (size_t)cap);
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    while ((len = getline(&line, &lcap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (cnt == cap)
            lines = realloc(lines, sizeof *lines * (size_t)(cap *= 2));
        lines[cnt++] = strdup(line);
    }
    free(line);
    fclose(f);
    *n = cnt;
    return lines;
}

static void free_lines(char **lines, int n)
{
    for (int i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
}

static od_schema *parse_ok(const char *text)
{
    od_schema *s = NULL;
    od_error err = {0};
    od_status st = od_schema_parse(text, &s, &err);
    CHECK(st == OD_OK && s, "parse failed for %s: %s", text, err.message);
    return s;
}

/* New string: the printed schema (checks the snprintf contract on the way). */
static char *print_schema(const od_schema *s)
{
    int n = od_schema_print(s, NULL, 0);
    CHECK(n >= 0, "negative print length");
    char *buf = malloc((size_t)n + 1);
    int m = od_schema_print(s, buf, (size_t)n + 1);
    CHECK(m == n && strlen(buf) == (size_t)n, "print length %d differs from sizing %d", m, n);
    return buf;
}

static char *print_sig(const od_schema *s)
{
    int n = od_schema_print_signature(s, NULL, 0);
    char *buf = malloc((size_t)n + 1);
    od_schema_print_signature(s, buf, (size_t)n + 1);
    return buf;
}

/* parse(in) must print as `want`. */
static void expect_print(const char *in, const char *want)
{
    od_schema *s = parse_ok(in);
    char *got = print_schema(s);
    cr_expect_str_eq(got, want, "\n  input:    %s\n  expected: %s\n  got:      %s", in, want, got);
    free(got);
    od_schema_free(s);
}

/* Reads N out of "column N: ..."; 0 when the message does not start so. */
static size_t message_column(const char *msg)
{
    size_t col = 0;
    if (sscanf(msg, "column %zu:", &col) != 1)
        return 0;
    return col;
}

static void expect_error(const char *in, size_t col, const char *substr)
{
    od_schema *s = (od_schema *)0x1;
    od_error err = {0};
    od_status st = od_schema_parse(in, &s, &err);
    cr_assert_eq(st, OD_EINVAL, "expected OD_EINVAL for %.200s, got %d", in, (int)st);
    cr_assert_null(s, "*out must be NULL on error");
    cr_assert_eq(err.status, OD_EINVAL);
    size_t got = message_column(err.message);
    cr_expect_eq(got, col, "input %.200s: expected column %zu, message: %s", in, col, err.message);
    if (substr)
        cr_expect(strstr(err.message, substr) != NULL,
                  "input %.200s: message \"%s\" does not mention \"%s\"", in, err.message, substr);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the corpus ---------------------------------------------------------------- */

Test(schema_corpus, every_schema_round_trips_byte_identical)
{
    int n = 0;
    char **lines = read_corpus(&n);
    cr_assert_eq(n, CORPUS_LINES, "corpus %s has %d lines, expected %d", corpus_path(), n,
                 CORPUS_LINES);
    char report[4096] = "";
    size_t rl = 0;
    int bad = 0;
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        od_schema *s = NULL;
        od_error err = {0};
        if (od_schema_parse(lines[i], &s, &err) != OD_OK) {
            if (bad++ < 5 && rl < sizeof report)
                rl += (size_t)snprintf(report + rl, sizeof report - rl,
                                       "\n  line %d: parse error: %s\n    text: %s", i + 1,
                                       err.message, lines[i]);
            continue;
        }
        char *got = print_schema(s);
        if (strcmp(got, lines[i]) != 0 && bad++ < 5 && rl < sizeof report)
            rl += (size_t)snprintf(report + rl, sizeof report - rl,
                                   "\n  line %d:\n    expected: %s\n    got:      %s", i + 1,
                                   lines[i], got);
        free(got);
        od_schema_free(s);
    }
    double dt = now_s() - t0;
    cr_log_info("parsed and printed %d schemas in %.1f ms (%.2f us each)", n, dt * 1e3,
                dt * 1e6 / n);
    cr_assert_eq(bad, 0, "%d of %d schemas do not round-trip:%s", bad, n, report);
    free_lines(lines, n);
}

/* kernels/ops.def promises PyTorch 1.13's text byte for byte: each built-in
 * schema is a corpus line and round-trips. */
Test(schema_corpus, builtin_op_schemas_are_pytorch_schemas)
{
    static const char *const builtin[] = {
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag) schema,
#include "ops.def"
#undef OD_OP
    };
    int n = 0;
    char **lines = read_corpus(&n);
    size_t nb = sizeof builtin / sizeof builtin[0];
    cr_assert_gt(nb, 0);
    for (size_t i = 0; i < nb; i++) {
        bool found = false;
        for (int k = 0; k < n && !found; k++)
            found = strcmp(lines[k], builtin[i]) == 0;
        cr_expect(found, "ops.def schema is not in the PyTorch 1.13 corpus: %s", builtin[i]);
        expect_print(builtin[i], builtin[i]);
    }
    free_lines(lines, n);
}

/* Every proper prefix of every corpus schema either parses (a valid shorter
 * schema) or fails with OD_EINVAL and a column inside the text; under ASan
 * this is also the leak check for every error path the parser has. */
Test(schema_corpus, every_prefix_fails_cleanly)
{
    int n = 0;
    char **lines = read_corpus(&n);
    cr_assert_gt(n, 0);
    long parsed = 0, failed = 0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(lines[i]);
        char *buf = malloc(len + 1);
        for (size_t k = 0; k < len; k++) {
            memcpy(buf, lines[i], k);
            buf[k] = '\0';
            od_schema *s = NULL;
            od_error err = {0};
            od_status st = od_schema_parse(buf, &s, &err);
            if (st == OD_OK) {
                parsed++;
                char *p = print_schema(s);
                free(p);
                od_schema_free(s);
                continue;
            }
            failed++;
            CHECK(st == OD_EINVAL, "prefix %s: status %d (%s)", buf, (int)st, err.message);
            size_t col = message_column(err.message);
            CHECK(col >= 1 && col <= k + 1, "prefix \"%s\": bad column in \"%s\"", buf,
                      err.message);
        }
        free(buf);
    }
    cr_log_info("prefixes: %ld parsed, %ld rejected", parsed, failed);
    free_lines(lines, n);
}

/* Random byte edits of corpus schemas: whatever parses prints to a canonical
 * text that parses again and prints identically; whatever fails names a
 * column inside the text. */
Test(schema_corpus, mutations_are_rejected_or_canonical)
{
    uint64_t seed = fresh_seed();
    g_rng = seed;
    int n = 0;
    char **lines = read_corpus(&n);
    static const char alphabet[] = "()[],?!|*=:.->\"'\\ aZt09_e\t";
    int accepted = 0;
    for (int iter = 0; iter < MUT_ITERS; iter++) {
        const char *src = lines[rng_next() % (uint64_t)n];
        size_t len = strlen(src);
        char *buf = malloc(len + 8);
        memcpy(buf, src, len + 1);
        int edits = 1 + (int)(rng_next() % 3);
        for (int e = 0; e < edits; e++) {
            size_t at = len ? rng_next() % len : 0;
            char c = alphabet[rng_next() % (sizeof alphabet - 1)];
            switch (rng_next() % 3) {
            case 0: if (len) buf[at] = c; break;
            case 1: if (len) { memmove(buf + at, buf + at + 1, len - at); len--; } break;
            default: memmove(buf + at + 1, buf + at, len - at + 1); buf[at] = c; len++; break;
            }
        }
        od_schema *s = NULL;
        od_error err = {0};
        od_status st = od_schema_parse(buf, &s, &err);
        if (st == OD_OK) {
            accepted++;
            char *p1 = print_schema(s);
            od_schema *s2 = NULL;
            od_error err2 = {0};
            CHECK(od_schema_parse(p1, &s2, &err2) == OD_OK,
                         "seed %" PRIu64 ": printed form of\n  %s\nis\n  %s\nwhich does not parse: %s",
                         seed, buf, p1, err2.message);
            char *p2 = print_schema(s2);
            CHECK(strcmp(p1, p2) == 0, "seed %" PRIu64 ": printing is not idempotent for %s", seed, buf);
            free(p1);
            free(p2);
            od_schema_free(s2);
            od_schema_free(s);
        } else {
            CHECK(st == OD_EINVAL, "seed %" PRIu64 ": %s -> status %d", seed, buf, (int)st);
            size_t col = message_column(err.message);
            CHECK(col >= 1 && col <= len + 1, "seed %" PRIu64 ": input \"%s\": bad column in \"%s\"",
                      seed, buf, err.message);
        }
        free(buf);
    }
    cr_log_info("mutations: %d of %d still parsed (seed %" PRIu64 ")", accepted, MUT_ITERS, seed);
    free_lines(lines, n);
}

/* ---- structure ------------------------------------------------------------------ */

Test(schema_parse, add_tensor_fields)
{
    od_schema *s = parse_ok("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
    cr_assert_str_eq(s->ns, "aten");
    cr_assert_str_eq(s->name, "add");
    cr_assert_str_eq(s->overload, "Tensor");
    cr_assert_eq(s->nargs, 3);
    cr_assert_eq(s->nrets, 1);
    cr_assert_not(s->rets_tuple);
    cr_assert_not(s->is_vararg);
    cr_assert_not(s->is_varret);
    cr_assert_str_eq(s->args[0].name, "self");
    cr_assert_eq(s->args[0].type->kind, OD_TY_TENSOR);
    cr_assert_not(s->args[0].kwarg_only);
    cr_assert_not(s->args[1].kwarg_only);
    cr_assert(s->args[2].kwarg_only);
    cr_assert_eq(s->args[2].type->kind, OD_TY_SCALAR);
    cr_assert(s->args[2].has_default);
    cr_assert_str_eq(s->args[2].default_text, "1");
    cr_assert_eq(s->args[2].default_value.tag, OD_T_INT);
    cr_assert_eq(s->args[2].default_value.u.i, 1);
    cr_assert_null(s->rets[0].name);
    cr_assert_null(s->rets[0].alias);
    char buf[64];
    cr_assert_eq(od_schema_print_name(s, buf, sizeof buf), 16);
    cr_assert_str_eq(buf, "aten::add.Tensor");
    od_schema_free(s);

    s = parse_ok("relu(Tensor self) -> Tensor");
    cr_assert_null(s->ns);
    cr_assert_str_eq(s->overload, "");
    od_schema_print_name(s, buf, sizeof buf);
    cr_assert_str_eq(buf, "relu");
    od_schema_free(s);
}

Test(schema_parse, alias_annotations)
{
    od_schema *s = parse_ok("aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)");
    cr_assert_not_null(s->args[0].alias);
    cr_assert_str_eq(s->args[0].alias->before, "a");
    cr_assert_null(s->args[0].alias->after);
    cr_assert(s->args[0].alias->is_write);
    cr_assert_null(s->args[1].alias);
    cr_assert(s->rets[0].alias && s->rets[0].alias->is_write);
    od_schema_free(s);

    s = parse_ok("aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]");
    cr_assert_str_eq(s->args[0].alias->before, "a");
    cr_assert_str_eq(s->args[0].alias->after, "*");
    cr_assert_not(s->args[0].alias->is_write);
    const od_type *rt = s->rets[0].type;
    cr_assert_eq(rt->kind, OD_TY_LIST);
    cr_assert_eq(rt->elem->kind, OD_TY_TENSOR);
    cr_assert_eq(s->rets[0].alias_at, rt->elem, "Tensor(a)[]: the alias is on the elements");
    od_schema_free(s);

    s = parse_ok("aten::append.t(t[](a!) self, t(c -> *) el) -> t[](a!)");
    cr_assert_eq(s->args[0].type->kind, OD_TY_LIST);
    cr_assert_eq(s->args[0].type->elem->kind, OD_TY_VAR);
    cr_assert_str_eq(s->args[0].type->elem->name, "t");
    cr_assert_eq(s->args[0].alias_at, s->args[0].type, "t[](a!): the alias is on the list");
    cr_assert_str_eq(s->args[1].alias->before, "c");
    cr_assert_str_eq(s->args[1].alias->after, "*");
    od_schema_free(s);

    s = parse_ok("prim::IfThenElse(bool cond, Any(a) x, Any(b) y) -> Any(b|a)");
    cr_assert_str_eq(s->rets[0].alias->before, "b|a");
    od_schema_free(s);

    s = parse_ok("aten::__getitem__.Dict_str(Dict(str, t) self, str key) -> t(*)");
    cr_assert_str_eq(s->rets[0].alias->before, "*");
    od_schema_free(s);

    /* Tensor(a!)? keeps the alias before the '?', as PyTorch prints it. */
    s = parse_ok("x::f(Tensor(a!)? out) -> Tensor(a!)?");
    cr_assert_eq(s->args[0].type->kind, OD_TY_OPTIONAL);
    cr_assert_eq(s->args[0].alias_at, s->args[0].type->elem);
    char *p = print_schema(s);
    cr_assert_str_eq(p, "x::f(Tensor(a!)? out) -> Tensor(a!)?");
    free(p);
    od_schema_free(s);
}

Test(schema_parse, type_trees)
{
    od_schema *s = parse_ok(
        "x::f(int[1]? a, Tensor?[] b, int[2] c, SymInt[] d, str[][] e, Dict(str, Tensor) g, "
        "(Tensor, tVal)[] h, __torch__.torch.classes.quantized.Conv2dPackedParamsBase i, "
        "Future(t) j, RRef(t) k, complex l, AnyEnumType m, Tensor?[]? n, Generator? o) -> NoneType");
    const od_type *t = s->args[0].type;
    cr_assert_eq(t->kind, OD_TY_OPTIONAL);
    cr_assert_eq(t->elem->kind, OD_TY_LIST);
    cr_assert_eq(t->elem->fixed_len, 1);
    cr_assert_eq(t->elem->elem->kind, OD_TY_INT);
    t = s->args[1].type;
    cr_assert_eq(t->kind, OD_TY_LIST);
    cr_assert_eq(t->fixed_len, -1);
    cr_assert_eq(t->elem->kind, OD_TY_OPTIONAL);
    cr_assert_eq(t->elem->elem->kind, OD_TY_TENSOR);
    cr_assert_eq(s->args[2].type->fixed_len, 2);
    cr_assert_eq(s->args[3].type->elem->kind, OD_TY_SYMINT);
    cr_assert_eq(s->args[4].type->elem->kind, OD_TY_LIST);
    t = s->args[5].type;
    cr_assert_eq(t->kind, OD_TY_DICT);
    cr_assert_eq(t->nitems, 2);
    cr_assert_eq(t->items[0]->kind, OD_TY_STR);
    cr_assert_eq(t->items[1]->kind, OD_TY_TENSOR);
    t = s->args[6].type->elem;
    cr_assert_eq(t->kind, OD_TY_TUPLE);
    cr_assert_eq(t->nitems, 2);
    cr_assert_eq(t->items[1]->kind, OD_TY_VAR);
    cr_assert_str_eq(t->items[1]->name, "tVal");
    t = s->args[7].type;
    cr_assert_eq(t->kind, OD_TY_CLASS);
    cr_assert_str_eq(t->name, "__torch__.torch.classes.quantized.Conv2dPackedParamsBase");
    cr_assert_eq(s->args[8].type->kind, OD_TY_FUTURE);
    cr_assert_eq(s->args[8].type->elem->kind, OD_TY_VAR);
    cr_assert_eq(s->args[9].type->kind, OD_TY_RREF);
    cr_assert_eq(s->args[10].type->kind, OD_TY_COMPLEX);
    cr_assert_eq(s->args[11].type->kind, OD_TY_ANY_ENUM);
    cr_assert_eq(s->rets[0].type->kind, OD_TY_NONE);

    static const struct {
        int arg;
        const char *text;
        bool tensor_like;
    } cases[] = {
        {0, "int[1]?", false},
        {1, "Tensor?[]", true},
        {2, "int[2]", false},
        {4, "str[][]", false},
        {5, "Dict(str, Tensor)", false},
        {6, "(Tensor, tVal)[]", false},
        {7, "__torch__.torch.classes.quantized.Conv2dPackedParamsBase", false},
        {8, "Future(t)", false},
        {12, "Tensor?[]?", true},
        {13, "Generator?", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[128];
        int n = od_type_print(s->args[cases[i].arg].type, buf, sizeof buf);
        cr_expect_str_eq(buf, cases[i].text);
        cr_expect_eq(n, (int)strlen(cases[i].text));
        cr_expect_eq(od_type_is_tensor_like(s->args[cases[i].arg].type), cases[i].tensor_like,
                     "is_tensor_like(%s)", cases[i].text);
    }
    od_schema_free(s);

    s = parse_ok("x::g(Tensor a, Tensor? b, Tensor[] c, int d) -> ()");
    cr_assert(od_type_is_tensor_like(s->args[0].type));
    cr_assert(od_type_is_tensor_like(s->args[1].type));
    cr_assert(od_type_is_tensor_like(s->args[2].type));
    cr_assert_not(od_type_is_tensor_like(s->args[3].type));
    cr_assert(od_type_is_optional(s->args[1].type));
    cr_assert_not(od_type_is_optional(s->args[0].type));
    cr_assert_eq(od_type_unwrap_optional(s->args[1].type), s->args[1].type->elem);
    cr_assert_eq(od_type_unwrap_optional(s->args[0].type), s->args[0].type);
    cr_assert_null(od_type_unwrap_optional(NULL));
    cr_assert_not(od_type_is_tensor_like(NULL));
    cr_assert_eq(s->nrets, 0);
    cr_assert(s->rets_tuple);
    od_schema_free(s);
}

Test(schema_parse, varargs_and_returns)
{
    od_schema *s = parse_ok("aten::format(str self, ...) -> str");
    cr_assert(s->is_vararg);
    cr_assert_eq(s->nargs, 1);
    od_schema_free(s);
    s = parse_ok("prim::tolist(...) -> ...");
    cr_assert(s->is_vararg && s->is_varret);
    cr_assert_eq(s->nargs, 0);
    cr_assert_eq(s->nrets, 0);
    od_schema_free(s);
    s = parse_ok("aten::max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)");
    cr_assert_eq(s->nrets, 2);
    cr_assert(s->rets_tuple);
    cr_assert_str_eq(s->rets[0].name, "values");
    cr_assert_str_eq(s->rets[1].name, "indices");
    od_schema_free(s);
    s = parse_ok("aten::popitem.str(Dict(str, t)(a!) self) -> ((str, t))");
    cr_assert_eq(s->nrets, 1);
    cr_assert_eq(s->rets[0].type->kind, OD_TY_TUPLE);
    od_schema_free(s);
    s = parse_ok("aten::items.str(Dict(str, t) self) -> ((str, t)[])");
    cr_assert_eq(s->nrets, 1);
    cr_assert_eq(s->rets[0].type->kind, OD_TY_LIST);
    od_schema_free(s);
    s = parse_ok("_quantized::linear(Tensor X, __torch__.torch.classes.quantized.LinearPackedParamsBase W_prepack, float Y_scale_i, int Y_zero_point_i) -> Tensor Y");
    cr_assert_str_eq(s->rets[0].name, "Y");
    od_schema_free(s);
}

/* ---- default values -------------------------------------------------------------- */

static const od_value *default_of(const od_schema *s, const char *name)
{
    for (int i = 0; i < s->nargs; i++)
        if (s->args[i].name && strcmp(s->args[i].name, name) == 0) {
            cr_assert(s->args[i].has_default, "argument %s has no default", name);
            return &s->args[i].default_value;
        }
    cr_assert_fail("no argument %s", name);
    return NULL;
}

Test(schema_defaults, values_by_type)
{
    od_schema *s = parse_ok(
        "x::f(Tensor self, Tensor? w=None, bool k=True, bool d=False, int i=-1, Scalar a=1, "
        "Scalar b=1., float eps=1.0000000000000001e-05, float p=2, int[2] stride=1, "
        "int[1] dims=[-2, -1], int[2] e=[], bool[3] mask=[True, False, True], "
        "float[] fl=[1, 2.5], str mode=\"nearest\", str ws=\" \\n\\t\\f\\v\", str q='it\\'s', "
        "ScalarType? dtype=long, ScalarType? dt4=4, ScalarType? dt8=8, "
        "MemoryFormat? mf=contiguous_format, MemoryFormat mf2=channels_last, Layout? l=strided, "
        "int reduction=Mean, int red2=Sum, Device? dev=\"cuda:1\", Tensor[] ts=[], "
        "int[1]? dim=None, str? other=weird_name) -> Tensor");
    const od_value *v;
    cr_assert_eq(default_of(s, "w")->tag, OD_T_NONE);
    v = default_of(s, "k");
    cr_assert(v->tag == OD_T_BOOL && v->u.b);
    v = default_of(s, "d");
    cr_assert(v->tag == OD_T_BOOL && !v->u.b);
    v = default_of(s, "i");
    cr_assert(v->tag == OD_T_INT && v->u.i == -1);
    v = default_of(s, "a");
    cr_assert(v->tag == OD_T_INT && v->u.i == 1);
    v = default_of(s, "b");
    cr_assert(v->tag == OD_T_DOUBLE && v->u.d == 1.0);
    v = default_of(s, "eps");
    cr_assert(v->tag == OD_T_DOUBLE && v->u.d == 1e-5);
    v = default_of(s, "p");
    cr_assert(v->tag == OD_T_DOUBLE && v->u.d == 2.0, "a float argument's int default is a double");
    v = default_of(s, "stride");
    cr_assert_eq(v->tag, OD_T_INT_LIST);
    cr_assert_eq(v->u.list.n, 2);
    cr_assert(((int64_t *)v->u.list.items)[0] == 1 && ((int64_t *)v->u.list.items)[1] == 1);
    v = default_of(s, "dims");
    cr_assert(v->tag == OD_T_INT_LIST && v->u.list.n == 2);
    cr_assert(((int64_t *)v->u.list.items)[0] == -2 && ((int64_t *)v->u.list.items)[1] == -1);
    v = default_of(s, "e");
    cr_assert(v->tag == OD_T_INT_LIST && v->u.list.n == 0);
    v = default_of(s, "mask");
    cr_assert(v->tag == OD_T_BOOL_LIST && v->u.list.n == 3);
    bool *bs = v->u.list.items;
    cr_assert(bs[0] && !bs[1] && bs[2]);
    v = default_of(s, "fl");
    cr_assert(v->tag == OD_T_DOUBLE_LIST && v->u.list.n == 2);
    cr_assert(((double *)v->u.list.items)[0] == 1.0 && ((double *)v->u.list.items)[1] == 2.5);
    v = default_of(s, "mode");
    cr_assert(v->tag == OD_T_STRING);
    cr_assert_str_eq(v->u.s, "nearest");
    v = default_of(s, "ws");
    cr_assert_str_eq(v->u.s, " \n\t\f\v");
    v = default_of(s, "q");
    cr_assert_str_eq(v->u.s, "it's");
    v = default_of(s, "dtype");
    cr_assert(v->tag == OD_T_DTYPE && v->u.dtype == OD_INT64);
    v = default_of(s, "dt4");
    cr_assert(v->tag == OD_T_DTYPE && v->u.dtype == OD_INT64, "ScalarType 4 is long");
    v = default_of(s, "dt8");
    cr_assert(v->tag == OD_T_INT && v->u.i == 8, "complex32 has no od dtype: kept as int");
    v = default_of(s, "mf");
    cr_assert(v->tag == OD_T_INT && v->u.i == 0);
    v = default_of(s, "mf2");
    cr_assert(v->tag == OD_T_INT && v->u.i == 2);
    v = default_of(s, "l");
    cr_assert(v->tag == OD_T_INT && v->u.i == 0);
    v = default_of(s, "reduction");
    cr_assert(v->tag == OD_T_INT && v->u.i == 1);
    v = default_of(s, "red2");
    cr_assert(v->tag == OD_T_INT && v->u.i == 2);
    v = default_of(s, "dev");
    cr_assert(v->tag == OD_T_DEVICE && v->u.device.type == OD_DEV_CUDA && v->u.device.index == 1);
    v = default_of(s, "ts");
    cr_assert(v->tag == OD_T_TENSOR_LIST && v->u.list.n == 0);
    cr_assert_eq(default_of(s, "dim")->tag, OD_T_NONE);
    v = default_of(s, "other");
    cr_assert(v->tag == OD_T_STRING);
    cr_assert_str_eq(v->u.s, "weird_name");
    cr_assert_str_eq(s->args[7].default_text, "1.0000000000000001e-05");
    od_schema_free(s);
}

/* The printer prints defaults from their values, the way PyTorch does. */
Test(schema_defaults, printed_canonically_like_pytorch)
{
    expect_print("x::f(Tensor self, int reduction=Mean) -> Tensor", "x::f(Tensor self, int reduction=1) -> Tensor");
    expect_print("x::f(*, ScalarType? dtype=long, MemoryFormat? m=contiguous_format) -> Tensor",
                 "x::f(*, ScalarType? dtype=4, MemoryFormat? m=0) -> Tensor");
    expect_print("x::f(float eps=1e-5, float m=0.1, float p=2, Scalar s=2.0) -> ()",
                 "x::f(float eps=1.0000000000000001e-05, float m=0.10000000000000001, float p=2., Scalar s=2.) -> ()");
    expect_print("x::f(int[2] s=[1, 1], int[3] p=[0, 1, 0], int[1] d=1) -> ()",
                 "x::f(int[2] s=1, int[3] p=[0, 1, 0], int[1] d=[1]) -> ()");
    expect_print("x::f(str s='a\"b', str t=\"\\101\\n\") -> ()", "x::f(str s=\"a\\\"b\", str t=\"A\\n\") -> ()");
    expect_print("x::f(str s=\"\\101\\033\") -> ()", "x::f(str s=\"A\\033\") -> ()");
    expect_print("x::f(float[] f=[1, 2.5], bool[2] b=[True, False]) -> ()",
                 "x::f(float[] f=[1., 2.5], bool[2] b=[True, False]) -> ()");
    expect_print("x::f(Tensor(a -> a) x) -> (Tensor)", "x::f(Tensor(a) x) -> Tensor");
    expect_print("x::f( Tensor  self ,\tint[ 2 ] k = 3 )->Tensor", "x::f(Tensor self, int[2] k=3) -> Tensor");
    expect_print("x::f(int[1]? dim=0) -> ()", "x::f(int[1]? dim=0) -> ()");
    expect_print("x::f(Device d=\"cpu\", str? n=weird) -> ()", "x::f(Device d=\"cpu\", str? n=weird) -> ()");
    expect_print("x::f(Tensor[] t=[], None n=None) -> (...)", "x::f(Tensor[] t=[], NoneType n=None) -> ...");
    expect_print("x::f() -> (Tensor a, ...)", "x::f() -> (Tensor a, ...)");
}

/* Random numeric defaults: the parsed value is the generated one, the
 * printed text is PyTorch's IValue text for it, and that text parses back to
 * the same value. */
Test(schema_defaults, random_numbers_round_trip)
{
    uint64_t seed = fresh_seed();
    g_rng = seed;
    char text[256], want[64];
    for (int iter = 0; iter < 5000; iter++) {
        /* doubles: raw bit patterns, integral values, short decimals */
        double d;
        switch (rng_next() % 3) {
        case 0: {
            uint64_t bits = rng_next();
            memcpy(&d, &bits, sizeof d);
            if (!isfinite(d))
                d = 0.5;
            break;
        }
        case 1: d = (double)((int64_t)(rng_next() % 2000000001) - 1000000000); break;
        default: d = (double)(int64_t)(rng_next() % 100000) / 1000.0; break;
        }
        char lit[64];
        snprintf(lit, sizeof lit, "%.17g", d);
        snprintf(text, sizeof text, "x::f(float v=%s) -> ()", lit);
        od_schema *s = parse_ok(text);
        const od_value *v = &s->args[0].default_value;
        CHECK(v->tag == OD_T_DOUBLE, "seed %" PRIu64 ": %s", seed, text);
        CHECK(v->u.d == d || (d == 0 && v->u.d == 0), "seed %" PRIu64 ": %s parsed as %.17g", seed,
                  text, v->u.d);
        /* IValue's rule: integral doubles below 1e10 print as "N.", others %.17g */
        if (fabs(d) < 1e10 && d == (double)(int64_t)d)
            snprintf(want, sizeof want, "%s%" PRId64 ".", (d == 0 && signbit(d)) ? "-" : "", (int64_t)d);
        else
            snprintf(want, sizeof want, "%.17g", d);
        char *p = print_schema(s);
        char expect[256];
        snprintf(expect, sizeof expect, "x::f(float v=%s) -> ()", want);
        CHECK(strcmp(p, expect) == 0, "seed %" PRIu64 ": %.17g: expected %s, got %s", seed, d, expect, p);
        od_schema *s2 = parse_ok(p);
        CHECK(s2->args[0].default_value.u.d == d || d == 0, "seed %" PRIu64 ": reparse of %s", seed, p);
        od_schema_free(s2);
        free(p);
        od_schema_free(s);

        /* int64 over the whole range */
        int64_t i = (int64_t)rng_next();
        if (iter == 0)
            i = INT64_MIN;
        else if (iter == 1)
            i = INT64_MAX;
        snprintf(text, sizeof text, "x::f(int v=%" PRId64 ", int[3] r=%" PRId64 ") -> ()", i, i);
        s = parse_ok(text);
        v = &s->args[0].default_value;
        CHECK(v->tag == OD_T_INT && v->u.i == i, "seed %" PRIu64 ": %s", seed, text);
        v = &s->args[1].default_value;
        CHECK(v->tag == OD_T_INT_LIST && v->u.list.n == 3, "seed %" PRIu64 ": %s", seed, text);
        for (int k = 0; k < 3; k++)
            CHECK(((int64_t *)v->u.list.items)[k] == i, "seed %" PRIu64 ": %s", seed, text);
        p = print_schema(s);
        CHECK(strcmp(p, text) == 0, "seed %" PRIu64 ": %s printed as %s", seed, text, p);
        free(p);
        od_schema_free(s);

        /* random int lists */
        size_t n = rng_next() % 7;
        int64_t xs[8];
        size_t tl = (size_t)snprintf(text, sizeof text, "x::f(int[] v=[");
        for (size_t k = 0; k < n; k++) {
            xs[k] = (int64_t)(rng_next() % 2001) - 1000;
            tl += (size_t)snprintf(text + tl, sizeof text - tl, "%s%" PRId64, k ? ", " : "", xs[k]);
        }
        snprintf(text + tl, sizeof text - tl, "]) -> ()");
        s = parse_ok(text);
        v = &s->args[0].default_value;
        CHECK(v->tag == OD_T_INT_LIST && v->u.list.n == n, "seed %" PRIu64 ": %s", seed, text);
        for (size_t k = 0; k < n; k++)
            CHECK(((int64_t *)v->u.list.items)[k] == xs[k], "seed %" PRIu64 ": %s", seed, text);
        p = print_schema(s);
        CHECK(strcmp(p, text) == 0, "seed %" PRIu64 ": %s printed as %s", seed, text, p);
        free(p);
        od_schema_free(s);
    }
    expect_error("x::f(int v=9223372036854775808) -> ()", 12, "out of range");
    expect_error("x::f(int v=-9223372036854775809) -> ()", 12, "out of range");
    expect_error("x::f(float v=1e999) -> ()", 14, "out of range");
}

/* ---- the dump signature form ------------------------------------------------------ */

static void expect_sig(const char *schema, const char *want)
{
    od_schema *s = parse_ok(schema);
    char *got = print_sig(s);
    cr_expect_str_eq(got, want, "\n  schema:   %s\n  expected: %s\n  got:      %s", schema, want, got);
    free(got);
    od_schema_free(s);
}

/* Every "(...) -> ..." signature in PyTorch's _dispatch_dump output must be
 * what we print for the dumped schema. */
Test(schema_signature, matches_pytorch_dispatch_dumps)
{
    char dir[1024], path[1400];
    testdata_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/torch-dispatch-dumps", dir);
    DIR *d = opendir(path);
    cr_assert_not_null(d, "cannot open %s", path);
    int checked = 0, files = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t nl = strlen(de->d_name);
        if (nl < 10 || strcmp(de->d_name + nl - 10, ".state.txt") != 0)
            continue;
        char fp[1700];
        snprintf(fp, sizeof fp, "%s/%s", path, de->d_name);
        FILE *f = fopen(fp, "r");
        cr_assert_not_null(f, "cannot open %s", fp);
        files++;
        char *line = NULL;
        size_t cap = 0;
        char *sig = NULL;
        while (getline(&line, &cap, f) >= 0) {
            line[strcspn(line, "\n")] = '\0';
            if (strncmp(line, "schema: ", 8) == 0) {
                od_schema *s = parse_ok(line + 8);
                free(sig);
                sig = print_sig(s);
                od_schema_free(s);
                continue;
            }
            char *m = strstr(line, " :: (");
            if (!m || strncmp(m + 4, "(none)", 6) == 0)
                continue;
            char *end = strstr(m, " [ ");
            cr_assert_not_null(end, "%s: unexpected line %s", fp, line);
            *end = '\0';
            cr_assert_not_null(sig, "%s: kernel line before the schema line", fp);
            cr_expect_str_eq(sig, m + 4, "%s: expected %s, got %s", de->d_name, m + 4, sig);
            checked++;
        }
        free(sig);
        free(line);
        fclose(f);
    }
    closedir(d);
    cr_assert_gt(files, 0, "no *.state.txt in %s", path);
    cr_assert_gt(checked, 0, "no signatures found in %s", path);
    cr_log_info("checked %d dumped signatures in %d files", checked, files);
}

Test(schema_signature, forms)
{
    expect_sig("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
               "(Tensor _0, Tensor _1, Scalar _2) -> Tensor _0");
    expect_sig("aten::zeros(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
               "(SymInt[] _0, ScalarType? _1, Layout? _2, Device? _3, bool? _4) -> Tensor _0");
    expect_sig("aten::max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
               "(Tensor _0, int _1, bool _2) -> (Tensor _0, Tensor _1)");
    expect_sig("aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
               "(Tensor _0, Tensor _1, Scalar _2) -> Tensor _0");
    expect_sig("aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]",
               "(Tensor _0, SymInt _1, int _2) -> Tensor[] _0");
    expect_sig("aten::_foreach_add_.List(Tensor(a!)[] self, Tensor[] other, *, Scalar alpha=1) -> ()",
               "(Tensor[] _0, Tensor[] _1, Scalar _2) -> ()");
    expect_sig("aten::avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor",
               "(Tensor _0, int[] _1, int[] _2, int[] _3, bool _4, bool _5, int? _6) -> Tensor _0");
    expect_sig("aten::native_layer_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape, Tensor mean, Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
               "(Tensor _0, Tensor _1, SymInt[] _2, Tensor _3, Tensor _4, Tensor? _5, Tensor? _6, bool[] _7) -> (Tensor _0, Tensor _1, Tensor _2)");
    expect_sig("aten::index.Tensor(Tensor self, Tensor?[] indices) -> Tensor",
               "(Tensor _0, Tensor?[] _1) -> Tensor _0");
    expect_sig("x::f() -> ()", "() -> ()");
}

/* ---- malformed input ------------------------------------------------------------- */

Test(schema_errors, messages_name_the_column)
{
    static const struct {
        const char *in;
        size_t col;
        const char *msg;
    } cases[] = {
        {"", 1, "expected an operator name, got end of input"},
        {"   ", 4, "expected an operator name"},
        {"aten::add(Tensor self", 22, "expected ')' or ',' after argument, got end of input"},
        {"aten::add(Tensor self, Tensor other, *, Scalar alpha=1 -> Tensor", 56,
         "expected ')' or ',' after argument, got '->'"},
        {"aten::add(Tensor self) Tensor", 24, "expected '->' after the argument list, got 'Tensor'"},
        {"aten::add(Tensor self)", 23, "expected '->'"},
        {"aten::add(Tensor(a self) -> Tensor", 20, "expected ')' to close the alias annotation, got 'self'"},
        {"aten::add(Tensor() self) -> Tensor", 18, "alias set name or '*'"},
        {"aten::add(Tensor(a!!) self) -> Tensor", 20, "expected ')' to close the alias annotation"},
        {"aten::add(Tensor(a)[](b) self) -> Tensor", 22, "only one alias annotation"},
        {"x::f(Dict(str, Tensor(a)) d) -> ()", 22, "not allowed inside"},
        {"aten::add(Tensor self, @) -> Tensor", 24, "unexpected character '@'"},
        {"aten::add(Tensor self, int x=1\x01) -> Tensor", 31, "unexpected character byte 0x01"},
        {"x::f(str s=\"abc) -> ()", 12, "unterminated string literal"},
        {"x::f(str s='abc\\') -> ()", 12, "unterminated string literal"},
        {"x::f(str s=\"a\\qb\") -> ()", 14, "bad escape sequence"},
        {"x::f(str s=\"a\\000b\") -> ()", 14, "NUL"},
        {"x::f(int[2 x) -> ()", 12, "expected ']' after the list length, got 'x'"},
        {"x::f(int[-1] x) -> ()", 10, "expected ']' or a length in the list type, got '-'"},
        {"x::f(int[99999999] x) -> ()", 10, "larger than 65536"},
        {"x::f(Foo x) -> ()", 6, "unknown type 'Foo'"},
        {"x::f(Tensor) -> ()", 12, "expected an argument name after the type, got ')'"},
        {"x::f(Tensor x=1) -> ()", 15, "None as the default of a Tensor argument"},
        {"x::f(int[] x=1) -> ()", 14, "list"},
        {"x::f(int[] x=[1, 2.5]) -> ()", 18, "expected an int in the default list, got float"},
        {"x::f(int[] x=[1 2]) -> ()", 17, "expected ',' or ']' in the default list, got '2'"},
        {"x::f(int[] x=[1,) -> ()", 17, "expected a default value"},
        {"x::f(str[] x=[\"a\"]) -> ()", 14, "list defaults are only supported"},
        {"x::f(int x=) -> ()", 12, "expected a default value"},
        {"x::f(int x=-) -> ()", 13, "expected a number after '-'"},
        {"x::f(float x=1e) -> ()", 15, "malformed number"},
        {"x::f(..., Tensor x) -> ()", 11, "'...' must be the last argument"},
        {"x::f(Tensor x, *) -> ()", 17, "after '*'"},
        {"x::f(*, int a, *, int b) -> ()", 16, "'*' appears twice"},
        {"x::f(Tensor a, *, ...) -> ()", 19, "'*' must be followed by a keyword-only argument"},
        {"x::f(Tensor a,) -> ()", 15, "expected a type, got ')'"},
        {"x::f(str s=\"a\nb\" junk) -> ()", 18, "expected ')' or ',' after argument, got 'junk'"},
        {"x::f(int x=1 \"a\tb\") -> ()", 14, "got '\"a?b\"'"},
        {"x::f(Tensor x) -> Tensor extra junk", 32, "expected end of schema, got 'junk'"},
        {"x::f(Tensor x) -> (Tensor, ..., Tensor)", 33, "'...' must be the last return"},
        {"x::f(Tensor x) -> (Tensor a Tensor b)", 29, "expected ')' or ',' after return"},
        {"x::f(Tensor x) -> ", 19, "expected a type, got end of input"},
        {"aten:add(Tensor x) -> ()", 6, "expected '::' after the namespace, got 'add'"},
        {"aten::add.(Tensor x) -> ()", 11, "expected an overload name after '.'"},
        {"aten::(Tensor x) -> ()", 7, "expected an operator name after '::'"},
        {"aten::add", 10, "expected '(' after the operator name, got end of input"},
        {"x::f(__torch__.torch. x) -> ()", 22, "a name right after '.'"},
        {"x::f(__torch__ .torch.x y) -> ()", 6, "unknown type '__torch__'"},
        {"x::f((int, int x) -> ()", 16, "')' or ',' in the tuple type"},
        {"x::f(Dict(str) x) -> ()", 14, "',' between the Dict key and value types"},
        {"x::f(Future(t x) -> ()", 15, "')' to close the type"},
        {"x::f(Device d=\"gpu\") -> ()", 15, "bad Device default"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_error(cases[i].in, cases[i].col, cases[i].msg);
}

Test(schema_errors, null_arguments)
{
    od_schema *s = NULL;
    od_error err = {0};
    cr_assert_eq(od_schema_parse(NULL, &s, &err), OD_EINVAL);
    cr_assert_null(s);
    cr_assert_eq(od_schema_parse("x::f() -> ()", NULL, &err), OD_EINVAL);
    cr_assert_eq(od_schema_parse("x::f(", &s, NULL), OD_EINVAL, "a NULL error record is allowed");
    od_schema_free(NULL);
}

/* 10k levels of nesting must be refused at the cap, not recursed into. */
Test(schema_errors, deep_nesting_is_capped)
{
    const int levels = 10000;
    size_t cap = (size_t)levels * 8 + 64;
    char *buf = malloc(cap);

    /* int[][][]... : the 33rd '[' is refused */
    size_t n = (size_t)snprintf(buf, cap, "x::f(int");
    for (int i = 0; i < levels; i++)
        n += (size_t)snprintf(buf + n, cap - n, "[]");
    snprintf(buf + n, cap - n, " x) -> ()");
    expect_error(buf, 9 + 2 * (OD_SCHEMA_MAX_TYPE_DEPTH - 1), "nested deeper than 32 levels");

    /* int???... */
    n = (size_t)snprintf(buf, cap, "x::f(int");
    for (int i = 0; i < levels; i++)
        buf[n++] = '?';
    snprintf(buf + n, cap - n, " x) -> ()");
    expect_error(buf, 9 + (OD_SCHEMA_MAX_TYPE_DEPTH - 1), "nested deeper");

    /* ((((...int...)))) as an argument type and as a return */
    n = (size_t)snprintf(buf, cap, "x::f(");
    for (int i = 0; i < levels; i++)
        buf[n++] = '(';
    snprintf(buf + n, cap - n, "int");
    expect_error(buf, 6 + OD_SCHEMA_MAX_TYPE_DEPTH, "nested deeper");
    n = (size_t)snprintf(buf, cap, "x::f() -> (");
    for (int i = 0; i < levels; i++)
        buf[n++] = '(';
    buf[n] = '\0';
    expect_error(buf, 12 + OD_SCHEMA_MAX_TYPE_DEPTH, "nested deeper");

    /* Dict(Dict(Dict(... */
    n = (size_t)snprintf(buf, cap, "x::f(");
    for (int i = 0; i < levels / 2; i++)
        n += (size_t)snprintf(buf + n, cap - n, "Dict(str, ");
    /* the key of the 32nd Dict would be level 33 */
    expect_error(buf, 6 + 10 * (size_t)(OD_SCHEMA_MAX_TYPE_DEPTH - 1) + 5, "nested deeper");

    /* exactly at the cap is fine and round-trips */
    n = (size_t)snprintf(buf, cap, "x::f(int");
    for (int i = 0; i < OD_SCHEMA_MAX_TYPE_DEPTH - 1; i++)
        n += (size_t)snprintf(buf + n, cap - n, "[]");
    snprintf(buf + n, cap - n, " x) -> ()");
    expect_print(buf, buf);
    free(buf);
}

Test(schema_errors, long_inputs)
{
    /* a 1 MiB identifier, then an error after it: the column is exact */
    size_t big = 1u << 20;
    char *buf = malloc(big + 64);
    memcpy(buf, "x::", 3);
    memset(buf + 3, 'n', big);
    snprintf(buf + 3 + big, 64, "(Tensor x) -> Tensor @");
    expect_error(buf, 3 + big + 22, "unexpected character '@'");
    /* the same without the error parses, and the message for a long token is bounded */
    buf[3 + big + 20] = '\0';
    od_schema *s = parse_ok(buf);
    cr_assert_eq(strlen(s->name), big);
    od_schema_free(s);
    snprintf(buf + 3 + big, 64, "(Tensor x) Tensor");
    od_error err;
    cr_assert_eq(od_schema_parse(buf, &s, &err), OD_EINVAL);
    cr_assert_lt(strlen(err.message), 200, "message is bounded: %s", err.message);
    free(buf);
}

/* Parsing is linear: 100k arguments cost about 10x what 10k do (quadratic
 * would be 100x). Best of three runs each, generous bound. */
Test(schema_perf, linear_in_the_input)
{
    double best[2] = {1e9, 1e9};
    int counts[2] = {10000, 100000};
    for (int which = 0; which < 2; which++) {
        int nargs = counts[which];
        size_t cap = (size_t)nargs * 48 + 64;
        char *buf = malloc(cap);
        size_t n = (size_t)snprintf(buf, cap, "x::f(");
        for (int i = 0; i < nargs; i++)
            n += (size_t)snprintf(buf + n, cap - n, "%sint[2]? a%d=[%d, 1]", i ? ", " : "", i, i);
        snprintf(buf + n, cap - n, ") -> (Tensor a, Tensor b)");
        for (int rep = 0; rep < 3; rep++) {
            double t0 = now_s();
            od_schema *s = parse_ok(buf);
            double dt = now_s() - t0;
            if (dt < best[which])
                best[which] = dt;
            cr_assert_eq(s->nargs, nargs);
            char *p = print_schema(s);
            cr_assert_str_eq(p, buf);
            free(p);
            od_schema_free(s);
        }
        free(buf);
    }
    cr_log_info("10k args: %.2f ms, 100k args: %.2f ms", best[0] * 1e3, best[1] * 1e3);
    cr_assert_lt(best[1], best[0] * 40 + 0.05, "parse time grows faster than linearly: %.4fs vs %.4fs",
                 best[0], best[1]);
}

/* ---- printing into small buffers ------------------------------------------------------ */

Test(schema_print, snprintf_contract)
{
    const char *text = "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor";
    od_schema *s = parse_ok(text);
    int full = (int)strlen(text);
    cr_assert_eq(od_schema_print(s, NULL, 0), full);
    for (size_t cap = 1; cap <= (size_t)full + 2; cap++) {
        char buf[256];
        memset(buf, 'X', sizeof buf);
        int n = od_schema_print(s, buf, cap);
        cr_assert_eq(n, full);
        size_t written = cap - 1 < (size_t)full ? cap - 1 : (size_t)full;
        cr_assert_eq(strlen(buf), written, "cap %zu", cap);
        cr_assert(strncmp(buf, text, written) == 0, "cap %zu", cap);
        cr_assert_eq(buf[cap], 'X', "cap %zu: wrote past the buffer", cap);
    }
    char small[4] = "XXX";
    cr_assert_eq(od_schema_print_signature(s, small, sizeof small), 60);
    cr_assert_str_eq(small, "(Te");
    cr_assert_eq(od_type_print(s->args[1].type, NULL, 0), 7);
    od_schema_free(s);
}
