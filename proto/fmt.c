/* fmt.c — number printing and scanning for the JSON codec.
 *
 * Invariants:
 *  - od_fmt_f32 prints the shortest decimal that reads back as the same
 *    float (Ulf Adams' Ryu method, "Ryu: fast float-to-string conversion",
 *    PLDI 2018). Its two power-of-5 tables are computed once, exactly, with
 *    128-bit integers instead of being pasted in.
 *  - od_scan_number / od_scan_f64 / od_scan_f32 accept exactly RFC 8259's
 *    number grammar, and their results are always correctly rounded (equal
 *    to strtod's / strtof's): Clinger's exact fast path (mantissa <= 2^53
 *    and |exponent| <= 22 for doubles, <= 2^24 and <= 10 for floats: one
 *    IEEE operation on exact operands), else Eisel-Lemire on the 19-digit
 *    mantissa, which reports the rare cases it cannot decide (half-way
 *    ties, subnormals, overflow, truncated mantissas whose neighbours round
 *    apart) and those go to strtod/strtof on the token.
 *  - A float never goes through a double (that would round twice): the
 *    float conversions work from the decimal itself.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "od_proto.h"

/* ---- Ryu tables -------------------------------------------------------- */

#define POW5_INV_BITS 59
#define POW5_BITS 61
#define POW5_INV_N 31
#define POW5_N 47

static uint64_t pow5_inv[POW5_INV_N];
static uint64_t pow5_tab[POW5_N];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

/* Bits of 5^e: ceil(e * log2(5)), and 1 for e == 0. */
static inline int32_t pow5bits(int32_t e)
{
    return e == 0 ? 1 : (int32_t)(((uint64_t)e * 23219280u + 10000000u - 1) / 10000000u);
}

static void init_tables(void)
{
    unsigned __int128 p = 1; /* 5^i; 5^46 < 2^107 */
    for (int i = 0; i < POW5_N; i++) {
        int bits = pow5bits(i);
        pow5_tab[i] = bits >= POW5_BITS ? (uint64_t)(p >> (bits - POW5_BITS))
                                        : (uint64_t)(p << (POW5_BITS - bits));
        if (i < POW5_INV_N) {
            int sh = bits - 1 + POW5_INV_BITS; /* at most 128 */
            unsigned __int128 q;
            if (sh < 128) {
                q = ((unsigned __int128)1 << sh) / p;
            } else {
                unsigned __int128 top = (unsigned __int128)1 << 127;
                q = (top / p) * 2 + ((top % p) * 2) / p;
            }
            pow5_inv[i] = (uint64_t)q + 1;
        }
        p *= 5;
    }
}

static inline uint32_t mul_shift(uint32_t m, uint64_t factor, int32_t shift)
{
    return (uint32_t)(((unsigned __int128)m * factor) >> shift);
}

static inline int pow5_factor(uint32_t v)
{
    int n = 0;
    while (v > 0 && v % 5 == 0) {
        v /= 5;
        n++;
    }
    return n;
}

/* Shortest digits and decimal exponent of a finite non-zero float's
 * magnitude: value = digits * 10^exp10. */
static void f32_shortest(uint32_t ieee_m, uint32_t ieee_e, uint32_t *digits, int32_t *exp10)
{
    int32_t e2;
    uint32_t m2;
    if (ieee_e == 0) {
        e2 = 1 - 127 - 23 - 2;
        m2 = ieee_m;
    } else {
        e2 = (int32_t)ieee_e - 127 - 23 - 2;
        m2 = (1u << 23) | ieee_m;
    }
    bool accept_bounds = (m2 & 1) == 0;
    uint32_t mv = 4 * m2, mp = 4 * m2 + 2;
    uint32_t mm = 4 * m2 - ((ieee_m != 0 || ieee_e <= 1) ? 2 : 1);

    uint32_t vr, vp, vm;
    int32_t e10;
    bool vm_tz = false, vr_tz = false;
    uint32_t last = 0;
    if (e2 >= 0) {
        int32_t q = (int32_t)(((uint64_t)e2 * 3010299u) / 10000000u); /* log10(2^e2) */
        e10 = q;
        int32_t k = POW5_INV_BITS + pow5bits(q) - 1;
        int32_t i = -e2 + q + k;
        vr = mul_shift(mv, pow5_inv[q], i);
        vp = mul_shift(mp, pow5_inv[q], i);
        vm = mul_shift(mm, pow5_inv[q], i);
        if (q != 0 && (vp - 1) / 10 <= vm / 10) {
            int32_t l = POW5_INV_BITS + pow5bits(q - 1) - 1;
            last = mul_shift(mv, pow5_inv[q - 1], -e2 + q - 1 + l) % 10;
        }
        if (q <= 9) {
            if (mv % 5 == 0)
                vr_tz = pow5_factor(mv) >= q;
            else if (accept_bounds)
                vm_tz = pow5_factor(mm) >= q;
            else
                vp -= pow5_factor(mp) >= q;
        }
    } else {
        int32_t q = (int32_t)(((uint64_t)(-e2) * 6989700u) / 10000000u); /* log10(5^-e2) */
        e10 = q + e2;
        int32_t i = -e2 - q;
        int32_t k = pow5bits(i) - POW5_BITS;
        int32_t j = q - k;
        vr = mul_shift(mv, pow5_tab[i], j);
        vp = mul_shift(mp, pow5_tab[i], j);
        vm = mul_shift(mm, pow5_tab[i], j);
        if (q != 0 && (vp - 1) / 10 <= vm / 10) {
            j = q - 1 - (pow5bits(i + 1) - POW5_BITS);
            last = mul_shift(mv, pow5_tab[i + 1], j) % 10;
        }
        if (q <= 1) {
            vr_tz = (~mv & 1) >= (uint32_t)q;
            if (accept_bounds)
                vm_tz = (~mm & 1) >= (uint32_t)q;
            else
                vp -= 1;
        } else if (q < 31) {
            vr_tz = (mv & ((1u << (q - 1)) - 1)) == 0;
        }
    }

    int32_t removed = 0;
    uint32_t out;
    if (vm_tz || vr_tz) {
        while (vp / 10 > vm / 10) {
            vm_tz &= vm % 10 == 0;
            vr_tz &= last == 0;
            last = vr % 10;
            vr /= 10;
            vp /= 10;
            vm /= 10;
            removed++;
        }
        if (vm_tz) {
            while (vm % 10 == 0) {
                vr_tz &= last == 0;
                last = vr % 10;
                vr /= 10;
                vp /= 10;
                vm /= 10;
                removed++;
            }
        }
        if (vr_tz && last == 5 && vr % 2 == 0)
            last = 4; /* exactly half-way: round to even */
        out = vr + ((vr == vm && (!accept_bounds || !vm_tz)) || last >= 5);
    } else {
        while (vp / 10 > vm / 10) {
            last = vr % 10;
            vr /= 10;
            vp /= 10;
            vm /= 10;
            removed++;
        }
        out = vr + (vr == vm || last >= 5);
    }
    *digits = out;
    *exp10 = e10 + removed;
}

/* Lays out digits * 10^exp10 the way Python's repr does: fixed notation for
 * decimal exponents in [-4, 16), else d.ddde+XX. Always reads as a float
 * ("3.0", not "3"). */
static int layout(bool neg, const char *dig, int nd, int exp10, char *out)
{
    char *o = out;
    if (neg)
        *o++ = '-';
    int x = exp10 + nd - 1; /* scientific exponent */
    if (x >= -4 && x < 16) {
        if (x >= nd - 1) { /* integral */
            memcpy(o, dig, (size_t)nd);
            o += nd;
            for (int i = 0; i < x - (nd - 1); i++)
                *o++ = '0';
            *o++ = '.';
            *o++ = '0';
        } else if (x >= 0) {
            memcpy(o, dig, (size_t)x + 1);
            o += x + 1;
            *o++ = '.';
            memcpy(o, dig + x + 1, (size_t)(nd - x - 1));
            o += nd - x - 1;
        } else {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -x - 1; i++)
                *o++ = '0';
            memcpy(o, dig, (size_t)nd);
            o += nd;
        }
    } else {
        *o++ = dig[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, dig + 1, (size_t)nd - 1);
            o += nd - 1;
        }
        *o++ = 'e';
        *o++ = x < 0 ? '-' : '+';
        int ax = x < 0 ? -x : x;
        if (ax >= 100)
            *o++ = (char)('0' + ax / 100);
        *o++ = (char)('0' + (ax / 10) % 10);
        *o++ = (char)('0' + ax % 10);
    }
    *o = '\0';
    return (int)(o - out);
}

int od_fmt_f32(float f, char *out)
{
    pthread_once(&tables_once, init_tables);
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    bool neg = bits >> 31;
    uint32_t ieee_m = bits & 0x7fffffu, ieee_e = (bits >> 23) & 0xffu;
    if (ieee_e == 0xff) { /* callers print these as strings; be total anyway */
        strcpy(out, ieee_m ? "NaN" : neg ? "-Infinity" : "Infinity");
        return (int)strlen(out);
    }
    if (ieee_e == 0 && ieee_m == 0) {
        strcpy(out, neg ? "-0.0" : "0.0");
        return neg ? 4 : 3;
    }
    uint32_t digits;
    int32_t e10;
    f32_shortest(ieee_m, ieee_e, &digits, &e10);
    char dig[16];
    int nd = digits >= 100000 ? (digits >= 10000000 ? (digits >= 100000000 ? 9 : 8)
                                                     : (digits >= 1000000 ? 7 : 6))
                              : (digits >= 1000 ? (digits >= 10000 ? 5 : 4)
                                                : (digits >= 100 ? 3 : digits >= 10 ? 2 : 1));
    /* two digits per step: the encoder prints every element this way */
    static const char pairs[201] = "00010203040506070809101112131415161718192021222324252627282930313233"
                                   "34353637383940414243444546474849505152535455565758596061626364656667"
                                   "6869707172737475767778798081828384858687888990919293949596979899";
    int i = nd;
    while (i >= 2) {
        uint32_t r = digits % 100;
        digits /= 100;
        i -= 2;
        dig[i] = pairs[2 * r];
        dig[i + 1] = pairs[2 * r + 1];
    }
    if (i)
        dig[0] = (char)('0' + digits);
    return layout(neg, dig, nd, e10, out);
}

int od_fmt_f64(double d, char *out)
{
    if (!isfinite(d)) {
        strcpy(out, isnan(d) ? "NaN" : d < 0 ? "-Infinity" : "Infinity");
        return (int)strlen(out);
    }
    if (d == 0) {
        strcpy(out, signbit(d) ? "-0.0" : "0.0");
        return (int)strlen(out);
    }
    /* Integers up to 2^53 print exactly and fast. */
    if (fabs(d) < 9007199254740992.0 && d == (double)(int64_t)d) {
        char tmp[32];
        int n = od_fmt_i64((int64_t)d, tmp);
        int nd = n - (tmp[0] == '-');
        const char *dig = tmp + (tmp[0] == '-');
        int z = 0; /* strip trailing zeros into the exponent */
        while (nd - z > 1 && dig[nd - 1 - z] == '0')
            z++;
        return layout(d < 0, dig, nd - z, z, out);
    }
    char tmp[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, d);
        if (prec == 17 || strtod(tmp, NULL) == d)
            break;
    }
    /* tmp is [-]d.ddde[+-]XX: collect the digits, drop trailing zeros. */
    const char *p = tmp;
    bool neg = *p == '-';
    if (neg)
        p++;
    char dig[24];
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9')
            dig[nd++] = *p;
    int x = atoi(p + 1);
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    return layout(neg, dig, nd, x - (nd - 1), out);
}

int od_fmt_i64(int64_t v, char *out)
{
    char tmp[24];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    int k = 0;
    if (v < 0)
        out[k++] = '-';
    while (n)
        out[k++] = tmp[--n];
    out[k] = '\0';
    return k;
}

/* ---- scanning ---------------------------------------------------------- */

/* The decimal of one number token: |value| = mant * 10^exp10 exactly, unless
 * truncated (non-zero digits beyond the 19 kept: the value lies strictly
 * between mant and mant + 1 times 10^exp10) or slow (an exponent too large
 * to track: only strtod can say). */
typedef struct dec {
    uint64_t mant;
    int32_t exp10;
    bool neg, truncated, slow, frac, expo;
} dec;

static inline bool is_digit(char c) { return (unsigned)(c - '0') <= 9; }

/* SWAR: are the 8 bytes of v (little-endian) all ASCII digits? */
static inline bool eight_digits(uint64_t v)
{
    return ((v & 0xF0F0F0F0F0F0F0F0ull) |
            (((v + 0x0606060606060606ull) & 0xF0F0F0F0F0F0F0F0ull) >> 4)) == 0x3333333333333333ull;
}

/* The value of 8 ASCII digits (first digit in the lowest byte). */
static inline uint32_t eight_value(uint64_t v)
{
    v -= 0x3030303030303030ull;
    v = (v * 10) + (v >> 8);
    v = (((v & 0x000000FF000000FFull) * 0x000F424000000064ull) +
         (((v >> 16) & 0x000000FF000000FFull) * 0x0000271000000001ull)) >> 32;
    return (uint32_t)v;
}

static inline uint64_t load8(const char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* Scans RFC 8259's number grammar at p (< end; never reads at or past end).
 * Returns the end of the token, or NULL. */
static inline __attribute__((always_inline)) const char *scan_dec(const char *p, const char *end,
                                                                   dec *d)
{
    uint64_t m = 0;
    int nd = 0; /* significant digits in m */
    int32_t e = 0;
    bool trunc = false, slow = false, frac = false, expo = false, neg = false;
    if (p < end && *p == '-') {
        neg = true;
        p++;
    }
    if (p >= end || !is_digit(*p))
        return NULL;
    if (*p == '0') {
        p++;
    } else {
        while (nd <= 11 && end - p >= 8) {
            uint64_t v = load8(p);
            if (!eight_digits(v))
                break;
            m = m * 100000000u + eight_value(v);
            nd += 8;
            p += 8;
        }
        for (; p < end && is_digit(*p); p++) {
            if (nd < 19) {
                m = m * 10 + (uint64_t)(*p - '0');
                nd++;
            } else {
                e++;
                trunc |= *p != '0';
            }
        }
    }
    if (p < end && *p == '.') {
        frac = true;
        p++;
        if (p >= end || !is_digit(*p))
            return NULL;
        if (m == 0) { /* leading zeros of the fraction are not significant */
            const char *z = p;
            while (p < end && *p == '0')
                p++;
            if (p - z > 1000000)
                slow = true; /* keep exp10 far from overflow; strtod decides */
            e -= (int32_t)(p - z < 1000000 ? p - z : 1000000);
        }
        while (nd <= 11 && end - p >= 8) {
            uint64_t v = load8(p);
            if (!eight_digits(v))
                break;
            m = m * 100000000u + eight_value(v);
            nd += 8;
            e -= 8;
            p += 8;
        }
        for (; p < end && is_digit(*p); p++) {
            if (nd < 19) {
                m = m * 10 + (uint64_t)(*p - '0');
                nd++;
                e--;
            } else {
                trunc |= *p != '0';
            }
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        expo = true;
        p++;
        bool eneg = false;
        if (p < end && (*p == '+' || *p == '-')) {
            eneg = *p == '-';
            p++;
        }
        if (p >= end || !is_digit(*p))
            return NULL;
        int32_t ev = 0;
        for (; p < end && is_digit(*p); p++) {
            if (ev < 100000)
                ev = ev * 10 + (*p - '0');
            else
                slow = true; /* beyond any double; strtod gives 0 or inf */
        }
        e += eneg ? -ev : ev;
    }
    if (e > 100000000 || e < -100000000)
        slow = true; /* only from absurdly long digit runs */
    d->mant = m;
    d->exp10 = e;
    d->neg = neg;
    d->truncated = trunc;
    d->slow = slow;
    d->frac = frac;
    d->expo = expo;
    return p;
}

/* strtod/strtof on a token that is not NUL-terminated (the rare slow path:
 * kept out of line so the fast paths stay small). */
static __attribute__((noinline)) double token_strtod(const char *s, const char *e, bool single, float *fout)
{
    char stack[128];
    size_t n = (size_t)(e - s);
    char *buf = n < sizeof stack ? stack : malloc(n + 1);
    if (!buf) { /* cannot happen for sane tokens; degrade, never crash */
        if (fout)
            *fout = NAN;
        return NAN;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    double d = 0;
    if (single)
        *fout = strtof(buf, NULL);
    else
        d = strtod(buf, NULL);
    if (buf != stack)
        free(buf);
    return d;
}

/* ---- Eisel-Lemire ------------------------------------------------------
 * Daniel Lemire, "Number Parsing at a Gigabyte per Second" (2021), in the
 * form of Go's strconv (eisel_lemire.go): the 64-bit decimal mantissa times
 * a 128-bit truncated power of ten gives the binary mantissa; when the
 * truncation could matter, or the result is subnormal or overflows, it
 * says so (false) and the caller falls back to strtod/strtof.
 *
 * pow10_128.inc is generated by proto/gen_pow10.py (exact big-integer
 * arithmetic): {low, high} of the top 128 bits of 10^e, rounded down. */

#define POW10_MIN (-348)
#define POW10_MAX 347
static const uint64_t pow10_128[POW10_MAX - POW10_MIN + 1][2] = {
#include "pow10_128.inc"
};

static inline void mul64(uint64_t a, uint64_t b, uint64_t *hi, uint64_t *lo)
{
    unsigned __int128 p = (unsigned __int128)a * b;
    *hi = (uint64_t)(p >> 64);
    *lo = (uint64_t)p;
}

/* man != 0, no truncation. */
/* always inlined: a call costs as much as the conversion itself */
static inline __attribute__((always_inline)) bool eisel_lemire64(uint64_t man, int32_t exp10,
                                                                  bool neg, double *out)
{
    if (exp10 < POW10_MIN || exp10 > POW10_MAX)
        return false;
    int clz = __builtin_clzll(man);
    man <<= clz;
    uint64_t ret_exp2 = (uint64_t)(((217706 * exp10) >> 16) + 64 + 1023) - (uint64_t)clz;
    const uint64_t *pw = pow10_128[exp10 - POW10_MIN];
    uint64_t xhi, xlo;
    mul64(man, pw[1], &xhi, &xlo);
    if ((xhi & 0x1FF) == 0x1FF && xlo + man < man) {
        uint64_t yhi, ylo;
        mul64(man, pw[0], &yhi, &ylo);
        uint64_t mhi = xhi, mlo = xlo + yhi;
        if (mlo < xlo)
            mhi++;
        if ((mhi & 0x1FF) == 0x1FF && mlo + 1 == 0 && ylo + man < man)
            return false;
        xhi = mhi;
        xlo = mlo;
    }
    uint64_t msb = xhi >> 63;
    uint64_t ret_man = xhi >> (msb + 9);
    ret_exp2 -= 1 ^ msb;
    if (xlo == 0 && (xhi & 0x1FF) == 0 && (ret_man & 3) == 1)
        return false; /* half-way: ambiguous */
    ret_man += ret_man & 1;
    ret_man >>= 1;
    if (ret_man >> 53) {
        ret_man >>= 1;
        ret_exp2++;
    }
    if (ret_exp2 - 1 >= 0x7FF - 1)
        return false; /* subnormal or overflow */
    uint64_t bits = ret_exp2 << 52 | (ret_man & 0x000FFFFFFFFFFFFFull);
    if (neg)
        bits |= 0x8000000000000000ull;
    memcpy(out, &bits, sizeof *out);
    return true;
}

static inline __attribute__((always_inline)) bool eisel_lemire32(uint64_t man, int32_t exp10,
                                                                  bool neg, float *out)
{
    if (exp10 < POW10_MIN || exp10 > POW10_MAX)
        return false;
    int clz = __builtin_clzll(man);
    man <<= clz;
    uint64_t ret_exp2 = (uint64_t)(((217706 * exp10) >> 16) + 64 + 127) - (uint64_t)clz;
    const uint64_t *pw = pow10_128[exp10 - POW10_MIN];
    uint64_t xhi, xlo;
    mul64(man, pw[1], &xhi, &xlo);
    if ((xhi & 0x3FFFFFFFFFull) == 0x3FFFFFFFFFull && xlo + man < man) {
        uint64_t yhi, ylo;
        mul64(man, pw[0], &yhi, &ylo);
        uint64_t mhi = xhi, mlo = xlo + yhi;
        if (mlo < xlo)
            mhi++;
        if ((mhi & 0x3FFFFFFFFFull) == 0x3FFFFFFFFFull && mlo + 1 == 0 && ylo + man < man)
            return false;
        xhi = mhi;
        xlo = mlo;
    }
    uint64_t msb = xhi >> 63;
    uint64_t ret_man = xhi >> (msb + 38);
    ret_exp2 -= 1 ^ msb;
    if (xlo == 0 && (xhi & 0x3FFFFFFFFFull) == 0 && (ret_man & 3) == 1)
        return false;
    ret_man += ret_man & 1;
    ret_man >>= 1;
    if (ret_man >> 24) {
        ret_man >>= 1;
        ret_exp2++;
    }
    if (ret_exp2 - 1 >= 0xFF - 1)
        return false;
    uint32_t bits = (uint32_t)(ret_exp2 << 23 | (ret_man & 0x007FFFFF));
    if (neg)
        bits |= 0x80000000u;
    memcpy(out, &bits, sizeof *out);
    return true;
}

static const double pow10_exact[23] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};
static const float pow10_exact_f[11] = {1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f,
                                        1e6f, 1e7f, 1e8f, 1e9f, 1e10f};

/* The correctly rounded double of the decimal d (token s..e for strtod).
 * *exact: the value came from exact operands (Clinger's fast path). */
static inline __attribute__((always_inline)) double dec_to_f64(const dec *d, const char *s,
                                                                const char *e, bool *exact)
{
    *exact = false;
    if (d->mant == 0) {
        *exact = true;
        return d->neg ? -0.0 : 0.0;
    }
    if (!d->slow) {
        if (!d->truncated) {
            /* Clinger: both operands exact, one IEEE operation rounds once */
            if (d->mant <= (uint64_t)1 << 53 && d->exp10 >= -22 && d->exp10 <= 22) {
                double v = (double)d->mant;
                v = d->exp10 >= 0 ? v * pow10_exact[d->exp10] : v / pow10_exact[-d->exp10];
                *exact = true;
                return d->neg ? -v : v;
            }
            double v;
            if (eisel_lemire64(d->mant, d->exp10, d->neg, &v))
                return v;
        } else {
            /* the value lies strictly between mant and mant + 1 (times
             * 10^exp10): when both round to the same double, so does it */
            double a, b;
            if (eisel_lemire64(d->mant, d->exp10, d->neg, &a) &&
                eisel_lemire64(d->mant + 1, d->exp10, d->neg, &b) && a == b)
                return a;
        }
    }
    return token_strtod(s, e, false, NULL);
}

static inline __attribute__((always_inline)) float dec_to_f32(const dec *d, const char *s,
                                                               const char *e)
{
    if (d->mant == 0)
        return d->neg ? -0.0f : 0.0f;
    if (!d->slow) {
        if (!d->truncated) {
            if (d->mant <= (uint64_t)1 << 24 && d->exp10 >= -10 && d->exp10 <= 10) {
                float v = (float)d->mant;
                v = d->exp10 >= 0 ? v * pow10_exact_f[d->exp10] : v / pow10_exact_f[-d->exp10];
                return d->neg ? -v : v;
            }
            float v;
            if (eisel_lemire32(d->mant, d->exp10, d->neg, &v))
                return v;
        } else {
            float a, b;
            if (eisel_lemire32(d->mant, d->exp10, d->neg, &a) &&
                eisel_lemire32(d->mant + 1, d->exp10, d->neg, &b) && a == b)
                return a;
        }
    }
    float f;
    token_strtod(s, e, true, &f);
    return f;
}

const char *od_scan_f64(const char *p, const char *end, double *out)
{
    dec d;
    const char *q = scan_dec(p, end, &d);
    if (q) {
        bool exact;
        *out = dec_to_f64(&d, p, q, &exact);
    }
    return q;
}

const char *od_scan_f32(const char *p, const char *end, float *out)
{
    dec d;
    const char *q = scan_dec(p, end, &d);
    if (q)
        *out = dec_to_f32(&d, p, q);
    return q;
}

const char *od_scan_number(const char *p, const char *end, od_num *out)
{
    dec d;
    const char *q = scan_dec(p, end, &d);
    if (!q)
        return NULL;
    out->start = p;
    out->end = q;
    out->mant = d.mant;
    out->exp10 = d.exp10;
    out->neg = d.neg;
    out->slow = d.slow;
    out->truncated = d.truncated;
    out->is_int = false;
    if (!d.frac && !d.expo && !d.truncated && !d.slow && d.exp10 == 0 &&
        (d.neg ? d.mant <= (uint64_t)1 << 63 : d.mant <= (uint64_t)INT64_MAX)) {
        out->is_int = true;
        out->i = d.neg ? (int64_t)(0 - d.mant) : (int64_t)d.mant;
        /* int64 to double rounds once, to nearest even: correctly rounded */
        out->d = (d.neg && d.mant == 0) ? -0.0 : (double)out->i;
        out->integral = true;
        out->exact_fast = d.mant <= (uint64_t)1 << 53;
        return q;
    }
    out->d = dec_to_f64(&d, p, q, &out->exact_fast);
    out->integral = isfinite(out->d) && out->d == trunc(out->d);
    return q;
}

float od_num_to_f32(const od_num *n)
{
    if (n->is_int) /* int64 to float rounds once: correctly rounded */
        return n->mant == 0 ? (n->neg ? -0.0f : 0.0f) : (float)n->i;
    dec d = {.mant = n->mant, .exp10 = n->exp10, .neg = n->neg, .truncated = n->truncated,
             .slow = n->slow};
    return dec_to_f32(&d, n->start, n->end);
}
