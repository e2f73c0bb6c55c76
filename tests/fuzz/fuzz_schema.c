/* fuzz_schema.c — the schema parser and printer (dispatcher/schema.c): any
 * text parses or fails with a message; a parsed schema prints to text that
 * parses again and prints the same (print . parse is idempotent on what it
 * accepts, as it is the identity on PyTorch's own 4165 schemas). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "od_schema.h"

#define FAIL(...) (fprintf(stderr, __VA_ARGS__), abort())

static char *print(const od_schema *s)
{
    int n = od_schema_print(s, NULL, 0);
    if (n < 0)
        FAIL("od_schema_print failed\n");
    char *out = malloc((size_t)n + 1);
    if (od_schema_print(s, out, (size_t)n + 1) != n)
        FAIL("od_schema_print: two lengths for one schema\n");
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192)
        return 0;
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    od_schema *s = NULL;
    od_error err;
    od_error_clear(&err);
    od_status st = od_schema_parse(text, &s, &err);
    if (st != OD_OK) {
        if (!err.message[0] || s)
            FAIL("od_schema_parse: failure without a message, or with a schema\n");
    } else {
        char *p1 = print(s);
        char sig[4096], nm[1024];
        od_schema_print_signature(s, sig, sizeof sig);
        od_schema_print_name(s, nm, sizeof nm);
        od_schema *s2 = NULL;
        if (od_schema_parse(p1, &s2, &err) != OD_OK)
            FAIL("printed schema does not parse: %s\n  input:   %s\n  printed: %s\n", err.message, text, p1);
        char *p2 = print(s2);
        if (strcmp(p1, p2) != 0)
            FAIL("print(parse(print(x))) != print(x)\n  input: %s\n  once:  %s\n  twice: %s\n", text, p1, p2);
        free(p1);
        free(p2);
        od_schema_free(s2);
        od_schema_free(s);
    }
    free(text);
    return 0;
}
