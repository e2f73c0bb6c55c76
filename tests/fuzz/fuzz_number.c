/* fuzz_number.c — the JSON number scanner (proto/json.c) against the C
 * library: every token od_scan_number accepts must be a JSON number, and
 * its double, float, and the fast od_scan_f32/od_scan_f64 paths must be
 * what strtod/strtof give for the same characters (bit for bit), also
 * with the token followed by more text (the 32-byte window path) and as
 * a run of tokens (od_scan_f32_run); the shortest formatter
 * (proto/fmt.c) must read back exactly. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

static bool json_number_syntax(const char *s, size_t n)
{
    size_t i = 0;
    if (i < n && s[i] == '-')
        i++;
    if (i >= n)
        return false;
    if (s[i] == '0')
        i++;
    else if (s[i] >= '1' && s[i] <= '9')
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
    else
        return false;
    if (i < n && s[i] == '.') {
        size_t d = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == d)
            return false;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        size_t d = i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == d)
            return false;
    }
    return i == n;
}

static bool same_bits_d(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }
static bool same_bits_f(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

#define FAIL(...) (fprintf(stderr, __VA_ARGS__), abort())

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || size > 4096)
        return 0;
    /* a private copy with no terminator after it: the scanner must stop at end */
    char *p = malloc(size);
    memcpy(p, data, size);
    const char *end = p + size;
    od_num num;
    const char *after = od_scan_number(p, end, &num);
    if (after) {
        if (after <= p || after > end || num.start != p || num.end != after)
            FAIL("od_scan_number: bad token bounds\n");
        size_t tn = (size_t)(after - p);
        if (!json_number_syntax(p, tn))
            FAIL("od_scan_number accepted '%.*s', which is not a JSON number\n", (int)tn, p);
        char *tok = strndup(p, tn);
        double d = strtod(tok, NULL);
        float f = strtof(tok, NULL);
        if (!same_bits_d(d, num.d))
            FAIL("'%s': od_scan_number %.17g, strtod %.17g\n", tok, num.d, d);
        if (!same_bits_f(f, od_num_to_f32(&num)))
            FAIL("'%s': od_num_to_f32 %.9g, strtof %.9g\n", tok, (double)od_num_to_f32(&num), (double)f);
        if (num.is_int) {
            long long ll = strtoll(tok, NULL, 10);
            if (ll != num.i)
                FAIL("'%s': od_scan_number int %lld, strtoll %lld\n", tok, (long long)num.i, ll);
        }
        double d2;
        float f2;
        if (od_scan_f64(p, end, &d2) != after || !same_bits_d(d2, d))
            FAIL("'%s': od_scan_f64 differs from strtod\n", tok);
        if (od_scan_f32(p, end, &f2) != after || !same_bits_f(f2, f))
            FAIL("'%s': od_scan_f32 differs from strtof\n", tok);
        /* the token with text after it: the one-window path decodes it */
        char *pad = malloc(tn + 48);
        memcpy(pad, p, tn);
        pad[tn] = ',';
        memcpy(pad + tn + 1, p, tn < 47 ? tn : 47); /* the same bytes again, or part */
        memset(pad + tn + 1 + (tn < 47 ? tn : 47), ']', 47 - (tn < 47 ? tn : 47));
        if (od_scan_f64(pad, pad + tn + 48, &d2) != pad + tn || !same_bits_d(d2, d))
            FAIL("'%s' (padded): od_scan_f64 differs from strtod\n", tok);
        if (od_scan_f32(pad, pad + tn + 48, &f2) != pad + tn || !same_bits_f(f2, f))
            FAIL("'%s' (padded): od_scan_f32 differs from strtof\n", tok);
        free(pad);
        free(tok);
        char out[64];
        if (isfinite(d)) {
            out[od_fmt_f64(d, out)] = '\0';
            if (!same_bits_d(strtod(out, NULL), d))
                FAIL("od_fmt_f64(%.17g) = '%s' does not read back\n", d, out);
        }
        if (isfinite(f)) {
            out[od_fmt_f32(f, out)] = '\0';
            if (!same_bits_f(strtof(out, NULL), f))
                FAIL("od_fmt_f32(%.9g) = '%s' does not read back\n", (double)f, out);
        }
    } else {
        double d;
        float f;
        if (od_scan_f64(p, end, &d) || od_scan_f32(p, end, &f))
            FAIL("od_scan_f64/f32 accept what od_scan_number refuses\n");
    }
    /* The input as a run of tensor data: every number the run reads is
     * strtof's for its token, and the tokens are where a token-by-token
     * scan finds them. */
    {
        float run[64];
        const char *q = p;
        int64_t k = od_scan_f32_run(&q, end, run, 64);
        const char *t = p;
        for (int64_t i = 0; i < k; i++) {
            while (i && t < end && (*t == ' ' || *t == '\n' || *t == '\r' || *t == '\t' || *t == ','))
                t++;
            od_num nn;
            const char *te = od_scan_number(t, end, &nn);
            if (!te || !json_number_syntax(t, (size_t)(te - t)))
                FAIL("od_scan_f32_run read a number where there is none\n");
            char *tk = strndup(t, (size_t)(te - t));
            if (!same_bits_f(strtof(tk, NULL), run[i]))
                FAIL("'%s': od_scan_f32_run differs from strtof\n", tk);
            free(tk);
            t = te;
        }
        if (k > 0 && q != t)
            FAIL("od_scan_f32_run ended away from its last number\n");
    }
    /* the bytes as raw binary floats: the formatters on every bit pattern */
    if (size >= 8) {
        double d;
        memcpy(&d, data, 8);
        char out[64];
        if (isfinite(d)) {
            int k = od_fmt_f64(d, out);
            out[k] = '\0';
            od_num n2;
            if (od_scan_number(out, out + k, &n2) != out + k || !same_bits_d(n2.d, d))
                FAIL("od_fmt_f64(%a) = '%s' does not scan back\n", d, out);
        }
        float f;
        memcpy(&f, data, 4);
        if (isfinite(f)) {
            int k = od_fmt_f32(f, out);
            out[k] = '\0';
            float g;
            if (od_scan_f32(out, out + k, &g) != out + k || !same_bits_f(g, f))
                FAIL("od_fmt_f32(%a) = '%s' does not scan back\n", (double)f, out);
        }
    }
    free(p);
    return 0;
}
