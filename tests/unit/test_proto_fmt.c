/* test_proto_fmt.c — the JSON number printer and scanner (proto/fmt.c).
 *
 * References are the C library's correctly rounded conversions (strtof,
 * strtod, printf), never the code under test. Inputs are fresh random bit
 * patterns and random decimal strings; the seed comes from OD_TEST_SEED or
 * /dev/urandom and is printed in every failure.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "od_proto.h"

/* Failure messages quote inputs; cutting a long one short is intended. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include "test_seed.h"

static float f_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t u_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Significant digits of a printed number (no sign, point, exponent or
 * leading/trailing zeros). */
static int sig_digits(const char *s)
{
    char d[64];
    int n = 0;
    for (const char *p = s; *p && *p != 'e' && *p != 'E'; p++)
        if (*p >= '0' && *p <= '9' && n < 63)
            d[n++] = *p;
    int a = 0;
    while (a < n - 1 && d[a] == '0')
        a++;
    while (n - 1 > a && d[n - 1] == '0')
        n--;
    return n - a;
}

/* Fewest significant digits with which printf's correctly rounded output
 * reads back as f. */
static int min_digits_f32(float f)
{
    char buf[64];
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, (double)f);
        if (strtof(buf, NULL) == f)
            return p;
    }
    return 9;
}

static void check_f32(float f, bool check_short)
{
    char out[64];
    int n = od_fmt_f32(f, out);
    CHECK(n == (int)strlen(out) && n <= 24, "length %d of '%s'", n, out);
    float back = strtof(out, NULL);
    CHECK(u_of(back) == u_of(f), "%a (bits 0x%08x) printed as '%s', reads back as %a", (double)f,
          u_of(f), out, (double)back);
    /* valid JSON number: optional '-', digits, '.', digits, exponent */
    const char *p = out + (out[0] == '-');
    CHECK(*p >= '0' && *p <= '9', "'%s' does not start with a digit", out);
    CHECK(strchr(out, '.') || strchr(out, 'e'), "'%s' does not read as a float", out);
    if (check_short) {
        int want = min_digits_f32(f);
        CHECK(sig_digits(out) <= want, "'%s' has %d significant digits; %d suffice for %a", out,
              sig_digits(out), want, (double)f);
    }
}

Test(fmt, f32_special_values)
{
    seed_once();
    float specials[] = {1.0f, -1.0f, 0.1f, 0.5f, 100.0f, 1e-7f, 1e7f, 1e16f, 1e-5f, 123456.7f,
                        3.4028235e38f, 1.17549435e-38f, 1.4e-45f, -1.4e-45f, 16777216.0f,
                        16777217.0f, 0.3f, 2.0f / 3.0f, 9.999999e-5f, 1e-4f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        check_f32(specials[i], true);
    char out[64];
    od_fmt_f32(0.0f, out);
    CHECK(strcmp(out, "0.0") == 0, "0.0 printed as '%s'", out);
    od_fmt_f32(-0.0f, out);
    CHECK(strcmp(out, "-0.0") == 0, "-0.0 printed as '%s'", out);
    od_fmt_f32(1.0f, out);
    CHECK(strcmp(out, "1.0") == 0, "1.0 printed as '%s'", out);
    od_fmt_f32(0.1f, out);
    CHECK(strcmp(out, "0.1") == 0, "0.1f printed as '%s'", out);
    /* every power of two and the floats either side of it */
    for (int e = 1; e < 255; e++)
        for (int d = -1; d <= 1; d++)
            check_f32(f_of(((uint32_t)e << 23) + (uint32_t)d), true);
}

Test(fmt, f32_random_bits_round_trip_and_shortest)
{
    seed_once();
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = (uint32_t)rnd();
        float f = f_of(u);
        if (!isfinite(f))
            continue;
        check_f32(f, i < 100000);
    }
    /* subnormals */
    for (int i = 0; i < 20000; i++)
        check_f32(f_of((uint32_t)rnd() & 0x807fffffu), true);
}

Test(fmt, f64_round_trip)
{
    seed_once();
    char out[64];
    for (int i = 0; i < 200000; i++) {
        uint64_t u = rnd();
        double d;
        memcpy(&d, &u, 8);
        if (!isfinite(d))
            continue;
        int n = od_fmt_f64(d, out);
        CHECK(n == (int)strlen(out) && n <= 32, "length %d of '%s'", n, out);
        double back = strtod(out, NULL);
        CHECK(memcmp(&back, &d, 8) == 0, "%a printed as '%s' reads back as %a", d, out, back);
    }
    double ints[] = {0.0, 1.0, -3.0, 1e15, 123456789012345.0, 9007199254740992.0, 1e300, 5e-324};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        od_fmt_f64(ints[i], out);
        CHECK(strtod(out, NULL) == ints[i], "%g printed as '%s'", ints[i], out);
    }
    od_fmt_f64(3.0, out);
    CHECK(strcmp(out, "3.0") == 0, "3.0 printed as '%s'", out);
}

Test(fmt, i64)
{
    seed_once();
    char out[32], ref[32];
    int64_t edge[] = {0, 1, -1, INT64_MAX, INT64_MIN, 10, -10, 999999999999LL};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        od_fmt_i64(edge[i], out);
        snprintf(ref, sizeof ref, "%" PRId64, edge[i]);
        CHECK(strcmp(out, ref) == 0, "%s printed as '%s'", ref, out);
    }
    for (int i = 0; i < 100000; i++) {
        int64_t v = (int64_t)rnd() >> (rnd() % 64);
        od_fmt_i64(v, out);
        snprintf(ref, sizeof ref, "%" PRId64, v);
        CHECK(strcmp(out, ref) == 0, "%s printed as '%s'", ref, out);
    }
}

/* A random JSON number: random digits, fraction, exponent. */
static void random_number(char *buf, size_t cap)
{
    size_t n = 0;
    if (rnd() & 1)
        buf[n++] = '-';
    int intd = (int)(rnd() % 12);
    if (intd == 0 || rnd() % 4 == 0) {
        buf[n++] = '0';
    } else {
        buf[n++] = (char)('1' + rnd() % 9);
        for (int i = 1; i < intd; i++)
            buf[n++] = (char)('0' + rnd() % 10);
    }
    if (rnd() % 3) {
        buf[n++] = '.';
        int fd = 1 + (int)(rnd() % (rnd() % 4 == 0 ? 30 : 10));
        for (int i = 0; i < fd && n < cap - 10; i++)
            buf[n++] = (char)('0' + rnd() % 10);
    }
    if (rnd() % 3 == 0) {
        buf[n++] = rnd() & 1 ? 'e' : 'E';
        int r = (int)(rnd() % 3);
        if (r == 1)
            buf[n++] = '-';
        else if (r == 2)
            buf[n++] = '+';
        n += (size_t)snprintf(buf + n, cap - n, "%d", (int)(rnd() % (rnd() % 2 ? 40 : 330)));
    }
    buf[n] = '\0';
}

Test(scan, numbers_match_strtod_and_strtof)
{
    seed_once();
    char buf[128];
    for (int i = 0; i < 300000; i++) {
        if (i % 3 == 0) { /* shortest float prints: the common case on the wire */
            float f = f_of((uint32_t)rnd());
            if (!isfinite(f))
                continue;
            od_fmt_f32(f, buf);
        } else if (i % 3 == 1) {
            random_number(buf, sizeof buf);
        } else {
            uint64_t u = rnd();
            double d;
            memcpy(&d, &u, 8);
            if (!isfinite(d))
                continue;
            snprintf(buf, sizeof buf, "%.*g", 1 + (int)(rnd() % 17), d);
        }
        size_t len = strlen(buf);
        od_num num;
        const char *end = od_scan_number(buf, buf + len, &num);
        CHECK(end == buf + len, "'%s' not scanned fully", buf);
        double ref = strtod(buf, NULL);
        CHECK(memcmp(&ref, &num.d, 8) == 0 || (isnan(ref) && isnan(num.d)),
              "'%s' scanned as %a, strtod says %a", buf, num.d, ref);
        float fref = strtof(buf, NULL);
        float f = od_num_to_f32(&num);
        CHECK(u_of(f) == u_of(fref), "'%s' as float is %a, strtof says %a", buf, (double)f,
              (double)fref);
        if (num.is_int) {
            CHECK(!strpbrk(buf, ".eE"), "'%s' is not an integer token", buf);
            CHECK((double)num.i == ref || llabs(num.i) > (1ll << 53), "'%s' int %" PRId64, buf, num.i);
        }
    }
}

Test(scan, float_midpoints_are_rounded_correctly)
{
    seed_once();
    /* Decimal values exactly half-way between two floats, and just beside
     * them: the hard cases for float-from-double. */
    char buf[128];
    for (int i = 0; i < 20000; i++) {
        uint32_t u = ((uint32_t)rnd() & 0x3fffffffu) | 0x30000000u; /* normal range */
        double lo = f_of(u), hi = f_of(u + 1);
        if (!isfinite(hi))
            continue;
        double mid = lo + (hi - lo) / 2; /* exact in double */
        snprintf(buf, sizeof buf, "%.40g", mid);
        od_num num;
        od_scan_number(buf, buf + strlen(buf), &num);
        float f = od_num_to_f32(&num), ref = strtof(buf, NULL);
        CHECK(u_of(f) == u_of(ref), "midpoint '%s' as float %a, strtof %a", buf, (double)f,
              (double)ref);
    }
}

Test(scan, rejects_invalid_tokens)
{
    seed_once();
    const char *bad[] = {"-", "+1", ".5", "1.", "1e", "1e+", "--1", "-.1", "e5", "", "1.e3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        od_num num;
        const char *end = od_scan_number(bad[i], bad[i] + strlen(bad[i]), &num);
        CHECK(end == NULL || end != bad[i] + strlen(bad[i]), "'%s' accepted as a number", bad[i]);
    }
    od_num num;
    const char *s = "01";
    CHECK(od_scan_number(s, s + 2, &num) == s + 1, "'01' must stop after the leading zero");
    s = "18446744073709551616";
    CHECK(od_scan_number(s, s + strlen(s), &num) && !num.is_int, "2^64 is not an int64");
    s = "-9223372036854775808";
    CHECK(od_scan_number(s, s + strlen(s), &num) && num.is_int && num.i == INT64_MIN,
          "INT64_MIN must scan as an int");
}

/* ---- the fast number parser: bit-exact against strtod/strtof ------------ */

static uint64_t bits64(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

/* Every entry point must give strtod's double and strtof's float for the
 * token buf (NUL-terminated, a valid JSON number). */
static void check_token(const char *buf)
{
    size_t len = strlen(buf);
    /* scan from a copy with no NUL after it: the parser must honour end */
    char tok[4096];
    CHECK(len < sizeof tok, "token too long for the test");
    memcpy(tok, buf, len);
    memset(tok + len, '7', 8); /* digits past end must not be read */
    double ref = strtod(buf, NULL);
    float fref = strtof(buf, NULL);
    double d = 0;
    float f = 0;
    const char *e1 = od_scan_f64(tok, tok + len, &d);
    const char *e2 = od_scan_f32(tok, tok + len, &f);
    od_num num;
    const char *e3 = od_scan_number(tok, tok + len, &num);
    CHECK(e1 == tok + len && e2 == tok + len && e3 == tok + len, "'%.200s' not scanned fully", buf);
    CHECK(bits64(d) == bits64(ref), "od_scan_f64('%.200s') = %a, strtod says %a", buf, d, ref);
    CHECK(bits64(num.d) == bits64(ref), "od_scan_number('%.200s').d = %a, strtod says %a", buf,
          num.d, ref);
    CHECK(u_of(f) == u_of(fref), "od_scan_f32('%.200s') = %a, strtof says %a", buf, (double)f,
          (double)fref);
    float f2 = od_num_to_f32(&num);
    CHECK(u_of(f2) == u_of(fref), "od_num_to_f32('%.200s') = %a, strtof says %a", buf, (double)f2,
          (double)fref);
    /* The same token with text after it, as tensor data has it: with 32
     * bytes from the token on, the one-window path decodes it. The byte
     * after the token varies; digits after that must not join it. */
    static const char stops[] = ",] \n}\t";
    char pad[4096 + 64];
    memcpy(pad, buf, len);
    pad[len] = stops[len % (sizeof stops - 1)];
    memset(pad + len + 1, '9', 40);
    const char *pend = pad + len + 41;
    e1 = od_scan_f64(pad, pend, &d);
    e2 = od_scan_f32(pad, pend, &f);
    e3 = od_scan_number(pad, pend, &num);
    CHECK(e1 == pad + len && e2 == pad + len && e3 == pad + len, "'%.200s' (padded) not scanned fully",
          buf);
    CHECK(bits64(d) == bits64(ref), "od_scan_f64('%.200s', padded) = %a, strtod says %a", buf, d, ref);
    CHECK(bits64(num.d) == bits64(ref), "od_scan_number('%.200s', padded).d = %a, strtod says %a",
          buf, num.d, ref);
    CHECK(u_of(f) == u_of(fref), "od_scan_f32('%.200s', padded) = %a, strtof says %a", buf,
          (double)f, (double)fref);
}

static double random_finite_double(void)
{
    for (;;) {
        uint64_t u = rnd();
        double d;
        memcpy(&d, &u, 8);
        if (isfinite(d))
            return d;
    }
}

Test(parse, random_doubles_printed_every_way)
{
    seed_once();
    char buf[128];
    static const char *const fmts[] = {"%.17g", "%.16g", "%.15g", "%.9g", "%g", "%.17e", "%.20g",
                                       "%.25e"};
    for (int i = 0; i < 200000; i++) {
        double d = random_finite_double();
        if (i % 4 == 0) /* the magnitudes tensors hold: json.dumps of float64 */
            d = ldexp((double)(rnd() >> 11), -53 - (int)(rnd() % 10)) * (rnd() & 1 ? -1 : 1) *
                (double)(1 + rnd() % 1000);
        snprintf(buf, sizeof buf, fmts[rnd() % (sizeof fmts / sizeof fmts[0])], d);
        check_token(buf);
    }
}

Test(parse, random_floats_printed_every_way)
{
    seed_once();
    char buf[128];
    static const char *const fmts[] = {"%.9g", "%.8g", "%.7g", "%.6g", "%g", "%.17g", "%.9e"};
    for (int i = 0; i < 200000; i++) {
        float f = f_of((uint32_t)rnd());
        if (!isfinite(f))
            continue;
        if (i % 3 == 0)
            od_fmt_f32(f, buf); /* our own shortest output */
        else
            snprintf(buf, sizeof buf, fmts[rnd() % (sizeof fmts / sizeof fmts[0])], (double)f);
        check_token(buf);
    }
}

Test(parse, integers_and_exponents)
{
    seed_once();
    char buf[128];
    for (int i = 0; i < 100000; i++) {
        int64_t v = (int64_t)rnd() >> (rnd() % 64);
        switch (i % 4) {
        case 0: snprintf(buf, sizeof buf, "%" PRId64, v); break;
        case 1: snprintf(buf, sizeof buf, "%" PRIu64, rnd()); break; /* above INT64_MAX too */
        case 2: /* integer mantissa, any exponent the double range reaches and beyond */
            snprintf(buf, sizeof buf, "%" PRId64 "e%d", v, (int)(rnd() % 800) - 400);
            break;
        default:
            snprintf(buf, sizeof buf, "%" PRId64 ".%" PRIu64 "E%+d", v, rnd() % 1000000,
                     (int)(rnd() % 100) - 50);
            break;
        }
        check_token(buf);
    }
    const char *edge[] = {"0", "-0", "0.0", "-0.0", "0e5", "-0e-5", "0.000000000000000000000000",
                          "9223372036854775807", "9223372036854775808", "-9223372036854775808",
                          "-9223372036854775809", "18446744073709551615", "18446744073709551616",
                          "9007199254740993", "9007199254740992", "16777217", "16777216",
                          "1e22", "1e23", "1e-22", "1e-23", "1e308", "1.7976931348623157e308",
                          "1.7976931348623158e308", "1.7976931348623159e308", "1e309",
                          "3.4028234663852886e38", "3.4028235e38", "3.4028236e38", "3.5e38",
                          "1e39", "1e-400", "1e400", "1e100000", "1e-100000", "1e999999999",
                          "-1e-999999999", "2.2250738585072011e-308", "2.2250738585072014e-308",
                          "4.9406564584124654e-324", "2.4703282292062327e-324",
                          "2.4703282292062328e-324", "1.1754943508222875e-38", "1.401298464e-45",
                          "7.006492321624085e-46", "7.006492321624086e-46", "1.4e-45", "1e-46",
                          "0.1", "0.2", "0.3", "123456789012345678901234567890",
                          "1.00000000000000011102230246251565404236316680908203125",
                          "1.00000000000000011102230246251565404236316680908203124",
                          "1.00000000000000011102230246251565404236316680908203126",
                          "1.000000059604644775390625", "1.000000059604644775390624",
                          "1.000000059604644775390626", "0.500000029802322387695312500000001"};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++)
        check_token(edge[i]);
}

Test(parse, subnormals_and_extremes)
{
    seed_once();
    char buf[128];
    for (int i = 0; i < 100000; i++) {
        double d;
        if (i % 2 == 0) { /* double subnormals and the smallest normals */
            uint64_t u = rnd() & ((1ull << 53) - 1);
            memcpy(&d, &u, 8);
        } else { /* float subnormals and the float extremes, printed as doubles */
            uint32_t u = (uint32_t)rnd() & 0x00ffffffu;
            if (rnd() & 1)
                u |= 0x7f000000u; /* near FLT_MAX */
            d = f_of(u);
            if (!isfinite(d))
                continue;
        }
        if (rnd() & 1)
            d = -d;
        if (rnd() & 1)
            snprintf(buf, sizeof buf, "%.17g", d);
        else
            snprintf(buf, sizeof buf, "%.*g", 1 + (int)(rnd() % 20), d);
        check_token(buf);
    }
}

Test(parse, long_mantissas)
{
    seed_once();
    char buf[256];
    for (int i = 0; i < 100000; i++) {
        size_t n = 0;
        if (rnd() & 1)
            buf[n++] = '-';
        int nd = 17 + (int)(rnd() % 30); /* 17..46 significant digits */
        int point = (int)(rnd() % (unsigned)(nd + 1));
        if (point == 0) {
            buf[n++] = '0';
            buf[n++] = '.';
            int z = (int)(rnd() % 5);
            for (int k = 0; k < z; k++)
                buf[n++] = '0';
        }
        for (int k = 0; k < nd; k++) {
            char c = (char)('0' + rnd() % 10);
            /* runs of 0s and 9s make the neighbours of the kept mantissa straddle */
            if (rnd() % 4 == 0)
                c = rnd() & 1 ? '0' : '9';
            if (k == 0 && point != 0 && c == '0')
                c = '1'; /* JSON: no leading zero */
            buf[n++] = c;
            if (k + 1 == point && point != nd)
                buf[n++] = '.';
        }
        if (rnd() & 1)
            n += (size_t)snprintf(buf + n, sizeof buf - n, "e%d", (int)(rnd() % 700) - 350);
        buf[n] = '\0';
        check_token(buf);
    }
}

Test(parse, exact_halfway_points)
{
    seed_once();
    /* Decimal expansions of exact midpoints between adjacent doubles and
     * adjacent floats, and the same cut short or nudged: ties to even. */
    char buf[1200];
    for (int i = 0; i < 20000; i++) {
        double lo = fabs(random_finite_double());
        if (i % 2) /* float midpoints: exact as doubles */
            lo = f_of((uint32_t)rnd() & 0x7f7fffffu);
        double hi = i % 2 ? (double)nextafterf((float)lo, INFINITY) : nextafter(lo, INFINITY);
        if (!isfinite(hi))
            continue;
        long double mid = ((long double)lo + (long double)hi) / 2; /* exact: 64-bit mantissa */
        snprintf(buf, sizeof buf, "%.*Lg", i % 3 == 0 ? 1100 : 40 + (int)(rnd() % 30), mid);
        if (strlen(buf) >= 4000)
            continue;
        check_token(buf);
    }
}

Test(parse, scan_f_rejects_invalid_and_writes_nothing)
{
    seed_once();
    const char *bad[] = {"-", "+1", ".5", "1.", "1e", "1e+", "--1", "-.1", "e5", "", "1.e3",
                         "-Infinity", "NaN", "x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t len = strlen(bad[i]);
        double d = 42;
        float f = 42;
        const char *e1 = od_scan_f64(bad[i], bad[i] + len, &d);
        const char *e2 = od_scan_f32(bad[i], bad[i] + len, &f);
        CHECK(e1 == NULL || e1 != bad[i] + len, "'%s' accepted by od_scan_f64", bad[i]);
        CHECK(e2 == NULL || e2 != bad[i] + len, "'%s' accepted by od_scan_f32", bad[i]);
        if (!e1)
            CHECK(d == 42, "od_scan_f64 wrote on failure for '%s'", bad[i]);
        if (!e2)
            CHECK(f == 42, "od_scan_f32 wrote on failure for '%s'", bad[i]);
    }
    double d;
    const char *s = "0123";
    CHECK(od_scan_f64(s, s + 4, &d) == s + 1 && d == 0, "'0123' must stop after the zero");
    s = "12345678901234567890123";
    /* a token cut by end: only the bytes before end count */
    for (size_t cut = 1; cut <= strlen(s); cut++) {
        char ref[64];
        memcpy(ref, s, cut);
        ref[cut] = '\0';
        CHECK(od_scan_f64(s, s + cut, &d) == s + cut && d == strtod(ref, NULL),
              "'%s' cut at %zu", s, cut);
    }
}

/* A token of the shape the one-window path takes: [-]digits[.digits],
 * 1 to 21 digits in all (up to 19 decode in the window), leading zeros of
 * the fraction included, as numpy's tolist() and our own printer write. */
static void window_number(char *buf)
{
    size_t n = 0;
    if (rnd() & 1)
        buf[n++] = '-';
    int intd = (int)(rnd() % 4);
    if (intd == 0) {
        buf[n++] = '0';
    } else {
        buf[n++] = (char)('1' + rnd() % 9);
        for (int i = 1; i < intd; i++)
            buf[n++] = (char)('0' + rnd() % 10);
    }
    if (rnd() % 8) {
        buf[n++] = '.';
        int fd = 1 + (int)(rnd() % 20);
        for (int i = 0; i < fd; i++)
            buf[n++] = (char)('0' + (rnd() % 3 ? rnd() % 10 : 0));
    }
    buf[n] = '\0';
}

Test(scan, window_shapes_match_strtod_and_strtof)
{
    seed_once();
    char buf[128];
    for (int i = 0; i < 300000; i++) {
        window_number(buf);
        check_token(buf);
    }
}

enum { RUN_MAX = 3000 };

/* Appends s to text at len; the new length. */
static size_t put(char *text, size_t len, const char *s)
{
    memcpy(text + len, s, strlen(s));
    return len + strlen(s);
}

/* One run as the codec reads it: n tokens (offs[i]..ends[i] in text, then a
 * tail up to end), read with at most max. The count, where *pp stops and
 * every value must be strtof's and strtod's, for both widths. */
static void check_run(const char *text, const char *end, const char *const *offs,
                      const char *const *ends, int n, int64_t max, int round)
{
    static float got[RUN_MAX + 8];
    static double got64[RUN_MAX + 8];
    int want = max < n ? (int)max : n;
    const char *p = text;
    int64_t k = od_scan_f32_run(&p, end, got, max);
    CHECK(k == want, "round %d: the run read %lld of %d numbers (max %lld)", round, (long long)k, want,
          (long long)max);
    CHECK(p == ends[want - 1], "round %d: the run stopped at offset %td, not %td", round, p - text,
          ends[want - 1] - text);
    const char *p64 = text;
    CHECK(od_scan_f64_run(&p64, end, got64, max) == want && p64 == p,
          "round %d: od_scan_f64_run disagrees on the run's extent", round);
    for (int i = 0; i < want; i++) {
        char tok[128];
        size_t tl = (size_t)(ends[i] - offs[i]);
        memcpy(tok, offs[i], tl);
        tok[tl] = '\0';
        float r = strtof(tok, NULL);
        CHECK(u_of(got[i]) == u_of(r), "round %d, number %d '%s': %a, strtof says %a", round, i, tok,
              (double)got[i], (double)r);
        double r64 = strtod(tok, NULL);
        CHECK(bits64(got64[i]) == bits64(r64), "round %d, number %d '%s': %a, strtod says %a", round,
              i, tok, got64[i], r64);
    }
}

static const char *const run_seps[] = {",", ", ", ",\n  ", " ,", ",\t", ",  ", ", \t", ",\r\n"};
/* what follows a run: its end, text the general path must see */
static const char *const run_tails[] = {"]", "]]", "", ", NaN]", ", true]", ",]", " x", ", [1]"};

/* The codec's call for tensor data: a run of numbers with ',' and blanks. */
Test(scan, runs_match_strtof_and_stop_where_the_general_path_takes_over)
{
    seed_once();
    static char text[RUN_MAX * 80];
    static const char *offs[RUN_MAX], *ends[RUN_MAX];
    for (int round = 0; round < 40; round++) {
        size_t len = 0;
        int n = 1 + (int)(rnd() % RUN_MAX);
        for (int i = 0; i < n; i++) {
            if (i)
                len = put(text, len, run_seps[rnd() % 8]);
            char tok[128];
            switch (rnd() % 4) {
            case 0: window_number(tok); break;
            case 1: random_number(tok, sizeof tok); break;
            case 2: od_fmt_f64((double)f_of((uint32_t)rnd() & 0xBFFFFFFFu), tok); break; /* tolist() */
            default: od_fmt_f32(f_of((uint32_t)rnd() & 0xBFFFFFFFu), tok); break; /* finite */
            }
            offs[i] = text + len;
            len = put(text, len, tok);
            ends[i] = text + len;
        }
        len = put(text, len, run_tails[rnd() % 8]);
        int64_t max = rnd() % 4 ? n + 5 : 1 + (int64_t)(rnd() % (uint64_t)n);
        check_run(text, text + len, offs, ends, n, max, round);
    }
    /* the first token is not a number: nothing read, nothing moved */
    const char *bad = "NaN, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]";
    const char *p = bad;
    float got[100];
    CHECK(od_scan_f32_run(&p, bad + strlen(bad), got, 100) == 0 && p == bad,
          "a run must not start on a non-number");
}

/* [-]d.ddd, the shape the run loop's 64-byte window decodes (1 to 18
 * fraction digits), and now and then past it (19 and 20: each sends the
 * next 64 tokens to the general path); mostly tolist()'s 15 to 18 digits
 * and the shortest float32 text's up to 9, with runs of 0 and 9. */
static void one_digit_number(char *buf)
{
    size_t n = 0;
    if (rnd() & 1)
        buf[n++] = '-';
    buf[n++] = (char)('0' + rnd() % 10);
    buf[n++] = '.';
    int fd = rnd() % 64 == 0 ? 19 + (int)(rnd() % 2) : rnd() % 2 ? 15 + (int)(rnd() % 4) : 1 + (int)(rnd() % 18);
    for (int i = 0; i < fd; i++) {
        unsigned r = (unsigned)(rnd() % 8);
        buf[n++] = r == 0 ? '0' : r == 1 ? '9' : (char)('0' + rnd() % 10);
    }
    buf[n] = '\0';
}

/* Long runs of that shape with the usual separators, so tokens start at
 * every offset of the window and cross its re-basing, and now and then a
 * token of another shape (the general path, then the window again), a
 * separator with blanks, a bad token or max ending the run mid-window. */
Test(scan, runs_of_one_digit_tokens_through_the_window)
{
    seed_once();
    static char text[RUN_MAX * 80];
    static const char *offs[RUN_MAX], *ends[RUN_MAX];
    static const char *const bad[] = {"1.", "1.e5", "-.5", "1.5e", "01.5", "1.5.5", "-", "1..5"};
    for (int round = 0; round < 300; round++) {
        size_t len = 0;
        int n = 1 + (int)(rnd() % RUN_MAX), bad_at = rnd() % 4 ? -1 : (int)(rnd() % (uint64_t)n);
        for (int i = 0; i < n; i++) {
            if (i)
                len = put(text, len, rnd() % 32 == 0 ? run_seps[rnd() % 8] : rnd() % 2 ? ", " : ",");
            char tok[128];
            if (i == bad_at)
                strcpy(tok, bad[rnd() % 8]);
            else if (rnd() % 64 == 0)
                rnd() % 2 ? random_number(tok, sizeof tok) : window_number(tok);
            else
                one_digit_number(tok);
            offs[i] = text + len;
            len = put(text, len, tok);
            ends[i] = text + len;
        }
        len = put(text, len, run_tails[rnd() % 8]);
        /* a bad token ends the run after the number before it; "1.5.5" and
         * "01.5" after the number they start with, "1.5" and "0" */
        int good = n;
        if (bad_at >= 0) {
            const char *b = offs[bad_at];
            size_t first = strncmp(b, "1.5.5", 5) == 0 ? 3 : strncmp(b, "01.5", 4) == 0 ? 1 : 0;
            good = bad_at + (first > 0);
            ends[bad_at] = b + first;
        }
        if (good == 0)
            continue;
        int64_t max = rnd() % 4 ? good + 5 : 1 + (int64_t)(rnd() % (uint64_t)good);
        check_run(text, text + len, offs, ends, good, max, round);
    }
}

/* Runs in an allocation of exactly their length (ASan sees any read past
 * it), so every token near the end goes through the separator test's
 * "fewer than 3 bytes left" side and the scalar decoder; with a bad token
 * mid-run, the run stops after the token before it. */
Test(scan, runs_at_the_end_of_the_buffer_and_bad_tokens)
{
    seed_once();
    static const char *const seps[] = {",", ", ", ",  ", ", \n", ",\t"};
    static const char *const bad[] = {"1e", "--1", "1e+", "1.", ".5", "-", "1.e5", "+1", "-.5", ""};
    float got[40];
    double got64[40];
    for (int round = 0; round < 20000; round++) {
        char text[40 * 48];
        const char *ends[40];
        size_t len = 0;
        int n = 1 + (int)(rnd() % 40), bad_at = rnd() % 4 ? -1 : (int)(rnd() % (uint64_t)n);
        for (int i = 0; i < n; i++) {
            if (i)
                len = put(text, len, seps[rnd() % 5]);
            char tok[48];
            if (i == bad_at)
                strcpy(tok, bad[rnd() % 10]);
            else if (rnd() % 2)
                od_fmt_f32(f_of((uint32_t)rnd() & 0xBFFFFFFFu), tok);
            else
                od_fmt_f64((double)f_of((uint32_t)rnd() & 0xBFFFFFFFu), tok);
            len = put(text, len, tok);
            ends[i] = text + len;
        }
        int want = bad_at < 0 ? n : bad_at;
        char *buf = malloc(len ? len : 1);
        memcpy(buf, text, len);
        const char *p = buf, *p64 = buf;
        int64_t k = od_scan_f32_run(&p, buf + len, got, 40);
        int64_t k64 = od_scan_f64_run(&p64, buf + len, got64, 40);
        CHECK(k == want && k64 == want, "round %d: read %lld / %lld of %d numbers", round, (long long)k,
              (long long)k64, want);
        const char *want_end = want ? buf + (ends[want - 1] - text) : buf;
        CHECK(p == want_end && p64 == want_end, "round %d: stopped at %td / %td, not %td", round,
              p - buf, p64 - buf, want_end - buf);
        for (int i = 0, s = 0; i < want; i++) {
            char tok[48];
            while (text[s] == ',' || text[s] == ' ' || text[s] == '\n' || text[s] == '\t')
                s++;
            size_t tl = (size_t)(ends[i] - text - s);
            memcpy(tok, text + s, tl);
            tok[tl] = '\0';
            s += (int)tl;
            float r = strtof(tok, NULL);
            double r64 = strtod(tok, NULL);
            CHECK(u_of(got[i]) == u_of(r) && bits64(got64[i]) == bits64(r64),
                  "round %d, number %d '%s': %a / %a, strtof / strtod say %a / %a", round, i, tok,
                  (double)got[i], got64[i], (double)r, r64);
        }
        free(buf);
    }
}

/* What od_fmt_f32_items must write for v[0, n): od_fmt_f32 per value,
 * ','-separated (and one before the first when comma). Returns its length. */
static size_t items_one_at_a_time(const float *v, size_t n, bool comma, char *ref)
{
    size_t r = 0;
    for (size_t i = 0; i < n; i++) {
        if (comma || i)
            ref[r++] = ',';
        r += (size_t)od_fmt_f32(v[i], ref + r);
    }
    return r;
}

Test(fmt, items_equal_one_at_a_time_and_stop_at_non_finite)
{
    seed_once();
    enum { N = 2000 };
    static float v[N];
    static char out[N * (OD_FMT_F32_MAX + 1) + OD_FMT_F32_ROOM], ref[N * 32];
    for (int round = 0; round < 50; round++) {
        size_t n = 1 + rnd() % N, stop = n;
        for (size_t i = 0; i < n; i++)
            v[i] = rnd() % 2 ? (float)((double)(int64_t)rnd() / 9.2e18 * 3.0) : f_of((uint32_t)rnd());
        for (size_t i = 0; i < n; i++)
            if (!isfinite(v[i])) {
                stop = i;
                break;
            }
        if (round % 5 == 0 && n > 1) { /* a NaN or infinity mid-run */
            stop = rnd() % n;
            v[stop] = rnd() % 2 ? NAN : -INFINITY;
            for (size_t i = 0; i < stop; i++)
                if (!isfinite(v[i]))
                    v[i] = 1.5f;
        }
        bool comma = rnd() % 2;
        size_t r = items_one_at_a_time(v, stop, comma, ref);
        size_t done;
        size_t w = od_fmt_f32_items(v, n, comma, out, &done);
        CHECK(done == stop, "round %d: printed %zu values, the first non-finite is at %zu", round,
              done, stop);
        CHECK(w == r && memcmp(out, ref, r) == 0, "round %d: the run's text differs from one at a time",
              round);
    }
}

/* A float of one of the classes the 8-wide printer's masks tell apart. */
static float f32_of_class(int cls)
{
    uint32_t sign = (uint32_t)(rnd() & 1) << 31;
    static const float edges[] = {1e-5f, 1e-4f, 9.999999e-5f, 1e15f, 1e16f, 9.999999e15f, 1.0f, 0.1f};
    switch (cls) {
    case 0: { /* any finite bit pattern */
        uint32_t u;
        do
            u = (uint32_t)rnd();
        while (((u >> 23) & 0xff) == 0xff);
        return f_of(u);
    }
    case 1: /* subnormal (or zero, rarely) */
        return f_of(((uint32_t)rnd() & 0x007fffffu) | sign);
    case 2: /* a power of two (lower_closer) or a float either side of it */
        return f_of((((uint32_t)(1 + rnd() % 254) << 23) + (uint32_t)(rnd() % 3) - 1) | sign);
    case 3: /* an integer: the small-integer path, and those past 2^24 */
        return f_of(u_of((float)(rnd() % 2 ? rnd() % 100000 : rnd() >> (rnd() % 64))) | sign);
    case 4: /* the fixed/scientific layout boundaries, give or take 2 ulps */
        return f_of((u_of(edges[rnd() % (sizeof edges / sizeof edges[0])]) + (uint32_t)(rnd() % 5) - 2) |
                    sign);
    case 5:
        return f_of(sign); /* +-0.0 */
    default: /* tensor-like: |x| of order 1 */
        return (float)((double)(int64_t)rnd() / 9.2e18 * 3.0);
    }
}

Test(fmt, items_every_class_at_every_position_round_trip_and_shortest)
{
    seed_once();
    enum { MAXN = 41 };
    static float buf[MAXN + 8];
    static char out[MAXN * (OD_FMT_F32_MAX + 1) + OD_FMT_F32_ROOM], ref[MAXN * 32];
    for (int round = 0; round < 20000; round++) {
        /* lengths of every remainder mod 8, starting at every alignment */
        size_t n = 1 + rnd() % MAXN, off = rnd() % 8, stop = n;
        float *v = buf + off;
        int cls = (int)(rnd() % 7);
        for (size_t i = 0; i < n; i++)
            v[i] = f32_of_class(round % 2 ? cls : (int)(rnd() % 7));
        if (round % 4 == 0) { /* a NaN or infinity somewhere: the run stops before it */
            stop = rnd() % n;
            v[stop] = rnd() % 2 ? NAN : (rnd() % 2 ? INFINITY : -INFINITY);
        }
        bool comma = rnd() % 2;
        size_t r = items_one_at_a_time(v, stop, comma, ref);
        size_t done, w = od_fmt_f32_items(v, n, comma, out, &done);
        CHECK(done == stop, "round %d: printed %zu values, the first non-finite is at %zu", round, done,
              stop);
        CHECK(w == r && memcmp(out, ref, r) == 0, "round %d: the run's text differs from one at a time",
              round);
        /* each printed token on its own: reads back exactly, and is shortest */
        out[w] = '\0';
        char *p = out + comma;
        for (size_t i = 0; i < stop; i++) {
            char *q = strchr(p, ',');
            if (q)
                *q = '\0';
            CHECK(u_of(strtof(p, NULL)) == u_of(v[i]), "round %d: 0x%08x printed as '%s'", round,
                  u_of(v[i]), p);
            if (isfinite(v[i]) && v[i] != 0)
                CHECK(sig_digits(p) <= min_digits_f32(v[i]), "round %d: '%s' is not shortest for 0x%08x",
                      round, p, u_of(v[i]));
            p = q ? q + 1 : p + strlen(p);
        }
    }
}
