/* fmt.c — number printing and scanning for the JSON codec.
 *
 * Invariants:
 *  - od_fmt_f32 prints the shortest decimal that reads back as the same
 *    float, and of those the closest (Giulietti's Schubfach, which gives
 *    Ryu's digits: checked on all 2^32 bit patterns against the Ryu
 *    printer it replaced, commit 8c53417). od_fmt_f32_items prints runs
 *    of 8 through an AVX-512 form of the same arithmetic where the CPU has
 *    it (text8): the same text for every bit pattern (bench/sweep_fmt_f32.c,
 *    all 2^32, against the scalar printer before it).
 *  - od_scan_number / od_scan_f64 / od_scan_f32 and the _run forms accept
 *    exactly RFC 8259's number grammar, and their results are always
 *    correctly rounded (equal to strtod's / strtof's): Eisel-Lemire on the
 *    19-digit mantissa, which reports the rare cases it cannot decide
 *    (half-way ties, subnormals, overflow, truncated mantissas whose
 *    neighbours round apart); of those, Clinger's exact case (mantissa <=
 *    2^53 and |exponent| <= 22 for doubles, <= 2^24 and <= 10 for floats:
 *    one IEEE operation on exact operands), else strtod/strtof on the token.
 *  - In a run, tokens of the shape [-]d.ddd are found from a 64-byte
 *    window's non-digit mask and decoded without a per-token window
 *    (WINDOW_RUN); any other token is decoded from one 32-byte window
 *    (scan_dec_simd) when it has tensor data's usual shape, else, or with
 *    fewer than 32 bytes after its start, by the scalar scan_dec. Where
 *    two of them accept a token, they give the same value (their decimals
 *    may differ by trailing zeros, mant * 10^k and exp10 - k).
 *  - A float never goes through a double (that would round twice): the
 *    float conversions work from the decimal itself.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "od_proto.h"

#ifdef __SSE4_1__
#include <smmintrin.h>
#endif

/* ---- Schubfach ----------------------------------------------------------
 * Raffaello Giulietti, "The Schubfach way to render doubles" (2020), in the
 * form of Alexander Bolz's Drachennest (schubfach_32): the same shortest,
 * closest digits as Ryu, from three products and two comparisons instead of
 * a loop removing one digit at a time. g(e) is the top 64 bits of 10^e,
 * rounded down, plus one: the high word of pow10_128 below. */

#define POW10_MIN (-348)
#define POW10_MAX 347
static const uint64_t pow10_128[POW10_MAX - POW10_MIN + 1][2] = {
#include "pow10_128.inc"
};

static inline int32_t floor_log2_pow10(int32_t e) { return (e * 1741647) >> 19; }
static inline int32_t floor_log10_pow2(int32_t e) { return (e * 1262611) >> 22; }
static inline int32_t floor_log10_three_quarters_pow2(int32_t e)
{
    return (e * 1262611 - 524031) >> 22;
}

/* Bits 64..95 of g * cp, made odd when anything below bit 64 (beyond one
 * ulp of bit 32's word) was cut. */
static inline uint32_t round_to_odd(uint64_t g, uint32_t cp)
{
    unsigned __int128 p = (unsigned __int128)g * cp;
    uint32_t y1 = (uint32_t)(p >> 64), y0 = (uint32_t)((uint64_t)p >> 32);
    return y1 | (y0 > 1);
}

/* Shortest digits and decimal exponent of a finite non-zero float's
 * magnitude: value = digits * 10^exp10, digits with no trailing zero. */
static inline void f32_shortest(uint32_t ieee_m, uint32_t ieee_e, uint32_t *digits, int32_t *exp10)
{
    uint32_t c, s;
    int32_t q, k;
    if (ieee_e != 0) {
        c = (1u << 23) | ieee_m;
        q = (int32_t)ieee_e - 150;
        /* a small integer? (& rather than &&: one branch, seldom taken) */
        uint32_t nq = (uint32_t)-q;
        if ((nq < 24u) & ((c & ((1u << (nq & 31)) - 1)) == 0)) {
            s = c >> nq;
            k = 0;
            goto strip;
        }
    } else {
        c = ieee_m;
        q = 1 - 150;
    }
    {
        bool even = (c & 1) == 0;
        bool lower_closer = ieee_m == 0 && ieee_e > 1;
        uint32_t cbl = 4 * c - 2 + lower_closer, cb = 4 * c, cbr = 4 * c + 2;
        int32_t kk = lower_closer ? floor_log10_three_quarters_pow2(q) : floor_log10_pow2(q);
        int32_t h = q + floor_log2_pow10(-kk) + 1;
        uint64_t g = pow10_128[-kk - POW10_MIN][1] + 1;
        uint32_t vbl = round_to_odd(g, cbl << h), vb = round_to_odd(g, cb << h),
                 vbr = round_to_odd(g, cbr << h);
        uint32_t lower = vbl + !even, upper = vbr - !even;
        uint32_t sl = vb / 4, sp = sl / 10;
        /* Both outcomes, then a select: which one applies changes from one
         * tensor element to the next, and a branch on it guesses wrong
         * about a third of the time. One digit fewer wins when exactly one
         * of its two candidates fits; else the closer of sl and sl + 1
         * (half-way to even). */
        bool up_in = lower <= 40 * sp, wp_in = 40 * sp + 40 <= upper;
        uint32_t take_short = (uint32_t)((sl >= 10) & (up_in != wp_in));
        bool u_in = lower <= 4 * sl, w_in = 4 * sl + 4 <= upper;
        uint32_t mid = 4 * sl + 2;
        uint32_t round_up = (uint32_t)((vb > mid) | ((vb == mid) & (sl & 1)));
        uint32_t one_in = 0u - (uint32_t)(u_in != w_in);
        uint32_t inc = ((uint32_t)w_in & one_in) | (round_up & ~one_in);
        uint32_t mask = 0u - take_short;
        s = ((sp + wp_in) & mask) | ((sl + inc) & ~mask);
        k = kk + (int32_t)take_short;
    }
strip:
    while (s % 10 == 0) { /* rare in data: a branch that is seldom taken */
        s /= 10;
        k++;
    }
    *digits = s;
    *exp10 = k;
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

/* The 8 ASCII digits of r < 10^8, first in the lowest byte (little-endian
 * order, so a memcpy puts them in reading order): split in halves of 4,
 * quarters of 2, then single digits, each lane at once in one register,
 * by multiplying with reciprocals exact over each lane's range (10486/2^20
 * for x / 100 with x < 10^4; 103/2^10 for x / 10 with x < 100). */
static inline uint64_t eight_ascii(uint32_t r)
{
    uint64_t v = (uint64_t)(r / 10000u) | (uint64_t)(r % 10000u) << 32;
    uint64_t t = ((v * 10486u) >> 20) & 0x0000007F0000007Full;
    v = t | (v - 100u * t) << 16;
    t = ((v * 103u) >> 10) & 0x000F000F000F000Full;
    v = t | (v - 10u * t) << 8;
    return v + 0x3030303030303030ull;
}

/* fmt_digits' layout, from the digits' text: first (the 9th digit from the
 * right, '0' when fewer), eight (the other 8, eight_ascii's form) and their
 * count nd. */
/* (unused where fmt_text_reg serves: clang says so) */
static inline __attribute__((always_inline, unused)) int fmt_text(bool neg, char first, uint64_t eight,
                                                                  int nd, int32_t e10, char *out)
{
    /* At most 9 digits. Every step below has a fixed count, so nothing
     * branches on how many digits there are or where the point goes (a
     * tensor's values change both from one element to the next). T holds
     * the 9 digits zero-padded, then '0's; D = the nd significant digits,
     * then '0's. */
    char T[48];
    memset(T, '0', sizeof T);
    T[0] = first;
    memcpy(T + 1, &eight, 8);
    const char *D = T + 9 - nd;
    int x = e10 + nd - 1; /* scientific exponent */
    if (x < -4 || x >= 16) { /* rare in tensor data: the general layout */
        char dig[16];
        memcpy(dig, D, (size_t)nd);
        return layout(neg, dig, nd, e10, out);
    }
    /* Fixed notation, as Python's repr: B = the digits after z = max(0, -x)
     * leading zeros, then '0's; the point goes after k = max(x, 0) + 1 of
     * them, and the text is max(z + nd, k + 1) + 1 bytes. */
    char B[48];
    memset(B, '0', sizeof B);
    int sx = x >> 31; /* -1 when x < 0 */
    int z = -x & sx, k = (x & ~sx) + 1;
    memcpy(B + z, D, 16);
    out[0] = '-';
    char *o = out + neg;
    memcpy(o, B, 16);
    memcpy(o + k + 1, B + k, 16);
    o[k] = '.';
    int len = z + nd > k + 1 ? z + nd : k + 1;
    o[len + 1] = '\0';
    return neg + len + 1;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define FMT_X86 1
/* fmt_text with T and B in a register: B's two 16-byte pieces are pshufbs
 * of T, so no load waits on the bytes just stored (the stack arrays cost a
 * failed store forwarding each: 3.0x instead of 2.3x in bench-json-ab).
 * The scalar path uses it where the build has SSSE3 (-march=x86-64-v2, not
 * the sanitizer builds); the AVX-512 one always. */
static inline __attribute__((always_inline, target("ssse3"))) int fmt_text_reg(bool neg, char first,
                                                                                uint64_t eight, int nd,
                                                                                int32_t e10, char *out)
{
    __m128i t = _mm_set_epi64x((int64_t)((eight >> 56) | 0x3030303030303000ull),
                               (int64_t)((uint8_t)first | eight << 8));
    int x = e10 + nd - 1; /* scientific exponent */
    if (x < -4 || x >= 16) { /* rare in tensor data: the general layout */
        char T[16], dig[16];
        _mm_storeu_si128((__m128i *)T, t);
        memcpy(dig, T + 9 - nd, (size_t)nd);
        return layout(neg, dig, nd, e10, out);
    }
    int sx = x >> 31; /* -1 when x < 0 */
    int z = -x & sx, k = (x & ~sx) + 1;
    /* B[j] = T[j + 9 - nd - z]; an index outside 0..15 (negative ones are
     * large as unsigned bytes) takes T[15], a '0', as B's padding is */
    const __m128i iota = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m128i last = _mm_set1_epi8(15);
    __m128i i0 = _mm_add_epi8(iota, _mm_set1_epi8((char)(9 - nd - z)));
    __m128i b0 = _mm_shuffle_epi8(t, _mm_min_epu8(i0, last));
    __m128i bk = _mm_shuffle_epi8(t, _mm_min_epu8(_mm_add_epi8(i0, _mm_set1_epi8((char)k)), last));
    out[0] = '-';
    char *o = out + neg;
    _mm_storeu_si128((__m128i *)o, b0);
    _mm_storeu_si128((__m128i *)(o + k + 1), bk);
    o[k] = '.';
    int len = z + nd > k + 1 ? z + nd : k + 1;
    o[len + 1] = '\0';
    return neg + len + 1;
}

#endif

/* The text of (-1)^neg * digits * 10^e10, digits the shortest ones
 * (f32_shortest's), non-zero. */
static inline __attribute__((always_inline)) int fmt_digits(bool neg, uint32_t digits, int32_t e10,
                                                            char *out)
{
    static const uint32_t pow10_u32[10] = {1,      10,      100,      1000,      10000,
                                           100000, 1000000, 10000000, 100000000, 1000000000};
    /* at most 9 digits */
    int nd = ((32 - __builtin_clz(digits)) * 1233) >> 12; /* floor(log10) or one less */
    nd += digits >= pow10_u32[nd];
    char first = (char)('0' + digits / 100000000u);
#if defined(FMT_X86) && defined(__SSSE3__)
    return fmt_text_reg(neg, first, eight_ascii(digits % 100000000u), nd, e10, out);
#else
    return fmt_text(neg, first, eight_ascii(digits % 100000000u), nd, e10, out);
#endif
}

static inline __attribute__((always_inline)) int fmt_f32(float f, char *out)
{
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
    return fmt_digits(neg, digits, e10, out);
}

int od_fmt_f32(float f, char *out) { return fmt_f32(f, out); }

#ifdef FMT_X86
#define FMT_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

/* round_to_odd in each 64-bit lane (g whole, cp in the low 32 bits): two
 * 32x32 products stand in for the 64x32 one. */
static inline FMT_AVX512 __m512i round_to_odd8(__m512i g_lo, __m512i g_hi, __m512i cp)
{
    const __m512i lo32 = _mm512_set1_epi64(0xffffffff);
    __m512i a = _mm512_mul_epu32(g_lo, cp), b = _mm512_mul_epu32(g_hi, cp);
    __m512i s = _mm512_add_epi64(_mm512_and_si512(b, lo32), _mm512_srli_epi64(a, 32));
    __m512i y1 = _mm512_add_epi64(_mm512_srli_epi64(b, 32), _mm512_srli_epi64(s, 32));
    __mmask8 sticky = _mm512_cmpgt_epu64_mask(_mm512_and_si512(s, lo32), _mm512_set1_epi64(1));
    return _mm512_mask_or_epi64(y1, sticky, y1, _mm512_set1_epi64(1));
}

/* f32_shortest and fmt_digits' digit text for the 8 finite floats at v,
 * one per 64-bit lane (the lane width vpmuludq needs); every branch of the
 * scalar form becomes a mask. Out: fmt_text's e10, eight, and first | nd << 8.
 * Zeros give some digits: the caller prints them apart. */
static inline FMT_AVX512 void text8(const float *v, int32_t *exp10, uint64_t *eight, uint16_t *first_nd)
{
    const __m512i one = _mm512_set1_epi64(1), zero = _mm512_setzero_si512();
    __m512i bits = _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)v));
    __m512i m = _mm512_and_si512(bits, _mm512_set1_epi64(0x7fffff));
    __m512i e = _mm512_and_si512(_mm512_srli_epi64(bits, 23), _mm512_set1_epi64(0xff));
    __mmask8 normal = _mm512_test_epi64_mask(e, e);
    __m512i c = _mm512_mask_or_epi64(m, normal, m, _mm512_set1_epi64(1 << 23));
    __m512i q = _mm512_mask_sub_epi64(_mm512_set1_epi64(1 - 150), normal, e, _mm512_set1_epi64(150));
    /* a small integer: -q < 24 and no bits below the point */
    __m512i nq = _mm512_sub_epi64(zero, q);
    __mmask8 small = normal & _mm512_cmplt_epu64_mask(nq, _mm512_set1_epi64(24)) &
                     _mm512_testn_epi64_mask(c, _mm512_sub_epi64(_mm512_sllv_epi64(one, nq), one));
    __mmask8 lower_closer = _mm512_testn_epi64_mask(m, m) & _mm512_cmpgt_epu64_mask(e, one);
    __m512i cb = _mm512_slli_epi64(c, 2);
    __m512i cbl = _mm512_mask_add_epi64(_mm512_sub_epi64(cb, _mm512_set1_epi64(2)), lower_closer,
                                        _mm512_sub_epi64(cb, _mm512_set1_epi64(2)), one);
    __m512i cbr = _mm512_add_epi64(cb, _mm512_set1_epi64(2));
    /* floor_log10_pow2 / floor_log10_three_quarters_pow2 / floor_log2_pow10:
     * signed 32-bit products (vpmuldq), arithmetic shifts */
    __m512i t = _mm512_mul_epi32(q, _mm512_set1_epi64(1262611));
    t = _mm512_mask_sub_epi64(t, lower_closer, t, _mm512_set1_epi64(524031));
    __m512i kk = _mm512_srai_epi64(t, 22);
    __m512i nkk = _mm512_sub_epi64(zero, kk);
    __m512i h = _mm512_add_epi64(
        _mm512_add_epi64(q, _mm512_srai_epi64(_mm512_mul_epi32(nkk, _mm512_set1_epi64(1741647)), 19)), one);
    __m512i idx = _mm512_add_epi64(_mm512_slli_epi64(_mm512_sub_epi64(nkk, _mm512_set1_epi64(POW10_MIN)), 1), one);
    __m512i g = _mm512_add_epi64(_mm512_i64gather_epi64(idx, (const void *)pow10_128, 8), one);
    __m512i g_hi = _mm512_srli_epi64(g, 32);
    __m512i vbl = round_to_odd8(g, g_hi, _mm512_sllv_epi64(cbl, h));
    __m512i vb = round_to_odd8(g, g_hi, _mm512_sllv_epi64(cb, h));
    __m512i vbr = round_to_odd8(g, g_hi, _mm512_sllv_epi64(cbr, h));
    __m512i odd = _mm512_and_si512(c, one);
    __m512i lower = _mm512_add_epi64(vbl, odd), upper = _mm512_sub_epi64(vbr, odd);
    __m512i sl = _mm512_srli_epi64(vb, 2);
    __m512i sp = _mm512_srli_epi64(_mm512_mul_epu32(sl, _mm512_set1_epi64(0xCCCCCCCD)), 35);
    __m512i sp40 = _mm512_mul_epu32(sp, _mm512_set1_epi64(40)), sl4 = _mm512_slli_epi64(sl, 2);
    __mmask8 up_in = _mm512_cmple_epu64_mask(lower, sp40);
    __mmask8 wp_in = _mm512_cmple_epu64_mask(_mm512_add_epi64(sp40, _mm512_set1_epi64(40)), upper);
    __mmask8 take_short = _mm512_cmpge_epu64_mask(sl, _mm512_set1_epi64(10)) & (up_in ^ wp_in);
    __mmask8 u_in = _mm512_cmple_epu64_mask(lower, sl4);
    __mmask8 w_in = _mm512_cmple_epu64_mask(_mm512_add_epi64(sl4, _mm512_set1_epi64(4)), upper);
    __m512i mid = _mm512_add_epi64(sl4, _mm512_set1_epi64(2));
    __mmask8 round_up = _mm512_cmpgt_epu64_mask(vb, mid) |
                        (_mm512_cmpeq_epu64_mask(vb, mid) & _mm512_test_epi64_mask(sl, one));
    __mmask8 one_in = u_in ^ w_in;
    __mmask8 inc = (w_in & one_in) | (round_up & ~one_in);
    __m512i s = _mm512_mask_add_epi64(sl, inc, sl, one);
    s = _mm512_mask_mov_epi64(s, take_short, _mm512_mask_add_epi64(sp, wp_in, sp, one));
    __m512i k = _mm512_mask_add_epi64(kk, take_short, kk, one);
    s = _mm512_mask_mov_epi64(s, small, _mm512_srlv_epi64(c, nq));
    k = _mm512_mask_mov_epi64(k, small, zero);
    s = _mm512_mask_mov_epi64(s, _mm512_testn_epi64_mask(c, c), one); /* zeros: end the strip */
    for (;;) { /* strip trailing zeros, all lanes at once: rare in data */
        __m512i d = _mm512_srli_epi64(_mm512_mul_epu32(s, _mm512_set1_epi64(0xCCCCCCCD)), 35);
        __mmask8 z = _mm512_cmpeq_epu64_mask(s, _mm512_mul_epu32(d, _mm512_set1_epi64(10)));
        if (!z)
            break;
        s = _mm512_mask_mov_epi64(s, z, d);
        k = _mm512_mask_add_epi64(k, z, k, one);
    }
    _mm256_storeu_si256((__m256i *)exp10, _mm512_cvtepi64_epi32(k));
    /* fmt_digits' text, lane-wise: the 9th digit, eight_ascii (its 32- and
     * 16-bit steps never carry across those widths, so vpmulld / vpmullw
     * do them), the digit count */
    __m512i hi = _mm512_srli_epi64(_mm512_mul_epu32(s, _mm512_set1_epi64(1441151881)), 57); /* / 10^8 */
    __m512i r = _mm512_sub_epi64(s, _mm512_mul_epu32(hi, _mm512_set1_epi64(100000000)));
    __m512i r4 = _mm512_srli_epi64(_mm512_mul_epu32(r, _mm512_set1_epi64(3518437209u)), 45); /* / 10^4 */
    __m512i w = _mm512_or_si512(r4, _mm512_slli_epi64(_mm512_sub_epi64(r, _mm512_mul_epu32(r4, _mm512_set1_epi64(10000))), 32));
    __m512i t2 = _mm512_and_si512(_mm512_srli_epi32(_mm512_mullo_epi32(w, _mm512_set1_epi32(10486)), 20),
                                  _mm512_set1_epi32(0x7f));
    w = _mm512_or_si512(t2, _mm512_slli_epi32(_mm512_sub_epi32(w, _mm512_mullo_epi32(t2, _mm512_set1_epi32(100))), 16));
    __m512i t1 = _mm512_and_si512(_mm512_srli_epi16(_mm512_mullo_epi16(w, _mm512_set1_epi16(103)), 10),
                                  _mm512_set1_epi16(0xf));
    w = _mm512_or_si512(t1, _mm512_slli_epi16(_mm512_sub_epi16(w, _mm512_mullo_epi16(t1, _mm512_set1_epi16(10))), 8));
    _mm512_storeu_si512(eight, _mm512_add_epi64(w, _mm512_set1_epi8('0')));
    __m512i nd = one;
    static const uint32_t p10[8] = {10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
    for (int j = 0; j < 8; j++)
        nd = _mm512_mask_add_epi64(nd, _mm512_cmpge_epu64_mask(s, _mm512_set1_epi64(p10[j])), nd, one);
    /* first digit in byte 0, count in byte 1 of each 16-bit lane */
    __m512i fn = _mm512_or_si512(_mm512_add_epi64(hi, _mm512_set1_epi64('0')), _mm512_slli_epi64(nd, 8));
    _mm_storeu_si128((__m128i *)first_nd, _mm512_cvtepi64_epi16(fn));
}

/* od_fmt_f32_items' loop, 8 values at a time while all 8 are finite;
 * returns how many it printed, *o advanced. */
static FMT_AVX512 size_t items_avx512(const float *v, size_t n, bool comma, char **po)
{
    char *o = *po;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i b = _mm256_loadu_si256((const __m256i *)(v + i));
        const __m256i em = _mm256_set1_epi32(0x7f800000);
        if (_mm256_cmpeq_epi32_mask(_mm256_and_si256(b, em), em))
            break; /* a NaN or infinity: the scalar loop stops there */
        int32_t e10[8];
        uint64_t eight[8];
        uint16_t first_nd[8];
        text8(v + i, e10, eight, first_nd);
        for (int j = 0; j < 8; j++) {
            uint32_t bits;
            memcpy(&bits, v + i + j, sizeof bits);
            *o = ',';
            o += comma | (i + (size_t)j > 0);
            bool neg = bits >> 31;
            if ((bits << 1) == 0) {
                memcpy(o, &"-0.0"[!neg], 4); /* +0 brings its NUL; no one reads past the length */
                o += 3 + neg;
                continue;
            }
            o += fmt_text_reg(neg, (char)first_nd[j], eight[j], first_nd[j] >> 8, e10[j], o);
        }
    }
    *po = o;
    return i;
}

static bool have_avx512(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}
#endif

size_t od_fmt_f32_items(const float *v, size_t n, bool comma, char *out, size_t *done)
{
    char *o = out;
    size_t i = 0;
#ifdef FMT_AVX512
    if (have_avx512())
        i = items_avx512(v, n, comma, &o);
#endif
    for (; i < n && isfinite(v[i]); i++) {
        *o = ','; /* overwritten when not wanted */
        o += comma | (i > 0);
        o += fmt_f32(v[i], o);
    }
    *done = i;
    return (size_t)(o - out);
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
    *d = (dec){.mant = m, .exp10 = e, .neg = neg, .truncated = trunc, .slow = slow, .frac = frac,
               .expo = expo};
    return p;
}

#ifdef __SSE4_1__
/* The shape almost all tensor data has, [-]digits[.digits] with at most 19
 * digits and no exponent, decoded from one 32-byte window: the token's
 * extent comes from a digit mask, and its digits from one shuffle (which
 * drops the '.' and right-aligns the last 16) and a multiply-add tree, so
 * there is no branch per digit and none on the digit count. Returns false,
 * having written nothing, for anything else (an exponent, a longer token,
 * a bad one, fewer than 32 bytes left): scan_dec decides those, and equals
 * this on every token this accepts. */
static inline __attribute__((always_inline)) bool scan_dec_simd(const char *p, const char *end,
                                                                dec *d, const char **after)
{
    if (end - p < 32)
        return false;
    const __m128i c0 = _mm_set1_epi8('0'), c9 = _mm_set1_epi8(9);
    __m128i t0 = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)p), c0);
    __m128i t1 = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)(p + 16)), c0);
    uint32_t dm = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(t0, c9), t0)) |
                  (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(t1, c9), t1)) << 16;
    uint64_t nondigit = ~(uint64_t)dm; /* bits 32.. set: every scan below stops */
    int s = p[0] == '-';
    int ni = __builtin_ctzll(nondigit >> s); /* integer digits */
    if (ni == 0 || (ni > 1 && p[s] == '0'))
        return false;
    int dot = s + ni, pos = dot, nf = 0;
    if (dot >= 31)
        return false;
    if (p[dot] == '.') {
        nf = __builtin_ctzll(nondigit >> (dot + 1));
        if (nf == 0)
            return false;
        pos = dot + 1 + nf;
    }
    int nd = ni + nf;
    if (pos >= 32 || (p[pos] | 0x20) == 'e' || nd > 19)
        return false;
    /* Lane i of lo takes the digit 15 - i places before the last, of hi
     * the one 31 - i places before it (hi holds the first one to three of
     * 17..19 digits); each one byte further back once it passes the '.'.
     * pshufb yields 0 for an index with its top bit set, so lanes outside
     * each 16-byte half (and negative ones) read nothing. */
    const __m128i iota = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m128i top = _mm_set1_epi8((char)0x80), c16 = _mm_set1_epi8(16);
    __m128i nd_v = _mm_set1_epi8((char)nd), dot1 = _mm_set1_epi8((char)(nf ? dot + 1 : -128));
    __m128i lo = _mm_add_epi8(_mm_set1_epi8((char)(pos - 16)), iota);
    __m128i hi = _mm_sub_epi8(lo, c16);
    lo = _mm_add_epi8(lo, _mm_cmpgt_epi8(dot1, lo));
    hi = _mm_add_epi8(hi, _mm_cmpgt_epi8(dot1, hi));
#define GATHER(src)                                                                         \
    _mm_or_si128(_mm_shuffle_epi8(t0, _mm_or_si128(src, _mm_andnot_si128(                   \
                                                            _mm_cmpgt_epi8(c16, src), top))), \
                 _mm_shuffle_epi8(t1, _mm_sub_epi8(src, c16)))
    __m128i glo = _mm_and_si128(GATHER(lo), _mm_cmpgt_epi8(_mm_add_epi8(iota, nd_v), _mm_set1_epi8(15)));
    __m128i ghi = _mm_and_si128(GATHER(hi), _mm_cmpgt_epi8(_mm_add_epi8(iota, nd_v), _mm_set1_epi8(31)));
#undef GATHER
    /* 2 digits, 4, then 8 per lane; lo and hi side by side */
    glo = _mm_madd_epi16(_mm_maddubs_epi16(glo, _mm_set1_epi16(0x010A)), _mm_set1_epi32(0x00010064));
    ghi = _mm_madd_epi16(_mm_maddubs_epi16(ghi, _mm_set1_epi16(0x010A)), _mm_set1_epi32(0x00010064));
    __m128i g = _mm_madd_epi16(_mm_packus_epi32(glo, ghi), _mm_set1_epi32(0x00012710));
    uint64_t m = (uint64_t)(uint32_t)_mm_cvtsi128_si32(g) * 100000000u +
                 (uint32_t)_mm_extract_epi32(g, 1) +
                 (uint64_t)(uint32_t)_mm_extract_epi32(g, 3) * 10000000000000000ull;
    *d = (dec){.mant = m, .exp10 = -nf, .neg = s, .frac = nf != 0};
    *after = p + pos;
    return true;
}
#else
static inline bool scan_dec_simd(const char *p, const char *end, dec *d, const char **after)
{
    (void)p, (void)end, (void)d, (void)after;
    return false;
}
#endif

/* scan_dec with the window fast path in front. */
static inline __attribute__((always_inline)) const char *scan_dec_fast(const char *p,
                                                                        const char *end, dec *d)
{
    const char *q;
    return scan_dec_simd(p, end, d, &q) ? q : scan_dec(p, end, d);
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
 * pow10_128 (defined above, with Schubfach) is generated by
 * proto/gen_pow10.py (exact big-integer arithmetic): {low, high} of the
 * top 128 bits of 10^e, rounded down. */

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
 * *exact: the operands are exact (Clinger's condition: mantissa <= 2^53 and
 * |exp10| <= 22), a property of the decimal whichever method rounds it.
 * Eisel-Lemire goes first although Clinger's one operation is cheaper:
 * tensor data mixes both kinds from one number to the next, and a branch
 * that guesses wrong half the time costs more than the difference. */
static inline __attribute__((always_inline)) double dec_to_f64(const dec *d, const char *s,
                                                                const char *e, bool *exact)
{
    /* & rather than &&: the mantissa test splits tensor data about evenly */
    bool clinger = !d->slow & !d->truncated & (d->mant <= (uint64_t)1 << 53) & (d->exp10 >= -22) &
                   (d->exp10 <= 22);
    *exact = clinger | (d->mant == 0);
    if (d->mant == 0)
        return d->neg ? -0.0 : 0.0;
    double v;
    if (!d->slow && !d->truncated && eisel_lemire64(d->mant, d->exp10, d->neg, &v))
        return v;
    if (clinger) { /* both operands exact: one IEEE operation rounds once */
        v = (double)d->mant;
        v = d->exp10 >= 0 ? v * pow10_exact[d->exp10] : v / pow10_exact[-d->exp10];
        return d->neg ? -v : v;
    }
    if (!d->slow && d->truncated) {
        /* the value lies strictly between mant and mant + 1 (times
         * 10^exp10): when both round to the same double, so does it */
        double a, b;
        if (eisel_lemire64(d->mant, d->exp10, d->neg, &a) &&
            eisel_lemire64(d->mant + 1, d->exp10, d->neg, &b) && a == b)
            return a;
    }
    return token_strtod(s, e, false, NULL);
}

static inline __attribute__((always_inline)) float dec_to_f32(const dec *d, const char *s,
                                                               const char *e)
{
    if (d->mant == 0)
        return d->neg ? -0.0f : 0.0f;
    float v;
    if (!d->slow && !d->truncated && eisel_lemire32(d->mant, d->exp10, d->neg, &v))
        return v;
    if (!d->slow && !d->truncated && d->mant <= (uint64_t)1 << 24 && d->exp10 >= -10 &&
        d->exp10 <= 10) {
        v = (float)d->mant;
        v = d->exp10 >= 0 ? v * pow10_exact_f[d->exp10] : v / pow10_exact_f[-d->exp10];
        return d->neg ? -v : v;
    }
    if (!d->slow && d->truncated) {
        float a, b;
        if (eisel_lemire32(d->mant, d->exp10, d->neg, &a) &&
            eisel_lemire32(d->mant + 1, d->exp10, d->neg, &b) && a == b)
            return a;
    }
    float f;
    token_strtod(s, e, true, &f);
    return f;
}

const char *od_scan_f64(const char *p, const char *end, double *out)
{
    dec d;
    const char *q = scan_dec_fast(p, end, &d);
    if (q) {
        bool exact;
        *out = dec_to_f64(&d, p, q, &exact);
    }
    return q;
}

const char *od_scan_f32(const char *p, const char *end, float *out)
{
    dec d;
    const char *q = scan_dec_fast(p, end, &d);
    if (q)
        *out = dec_to_f32(&d, p, q);
    return q;
}

static inline bool is_blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* The run loop's fast path (WINDOW_RUN): tensor data as printers write it,
 * "[-]d.ddd, " with one integer digit (normal and uniform data in (-10, 10),
 * the shortest float32 text and numpy's tolist() alike), scanned from a
 * 64-byte window's non-digit mask. The next token's start is then a shift,
 * a tzcnt and an add from this one's, rather than a load and a mask per
 * token, so the tokens' decodes overlap instead of waiting on each other;
 * the digits come from one 16-byte load, left-aligned: mant is the fraction
 * padded to 18 digits and exp10 is -18 (the same value, so the same
 * correctly rounded result). A token of any other shape goes to the general
 * path, and the next 64 tokens with it: data of other shapes, or of mixed
 * ones, does not pay for trying the window on each. (N(50, 30) text, mostly
 * two integer digits, timed by hand against the run loop before the
 * window: 4 % slower with 16, within 1-3 % with 64; a back-off that grew
 * with each miss made gcc lay the general path out 70 % slower. A second
 * window decoder for several integer digits, tried after this one, took
 * that text from 10.9 to 8.8 ns per number but the one-digit forms 8-10 %
 * slower; out of line, it gained nothing. bench-json-ab's third text
 * shows where such data stands.) */
#ifdef __SSE4_1__
/* Bit i set where p[i] (i < 64) is not an ASCII digit: adding 0x46 maps
 * '0'..'9' to 0x76..0x7F, the only bytes then greater than 0x75 signed. */
static inline __attribute__((always_inline)) uint64_t nondigit64(const char *p)
{
    const __m128i k = _mm_set1_epi8(0x46), lim = _mm_set1_epi8(0x75);
#define DIGITS16(o)                                                                      \
    (uint64_t)(uint32_t)_mm_movemask_epi8(                                               \
        _mm_cmpgt_epi8(_mm_add_epi8(_mm_loadu_si128((const __m128i *)(p + (o))), k), lim))
    uint64_t dm = DIGITS16(0) | DIGITS16(16) << 16 | DIGITS16(32) << 32 | DIGITS16(48) << 48;
#undef DIGITS16
    return ~dm;
}

/* 16 bytes from keep + 32 - k, k <= 32: k (at most 16) bytes of 0xFF, then
 * zeros; no clamp of k to 16, which gcc compiles to a branch that tolist()
 * text's mix of 15 to 18 fraction digits mispredicts */
static const uint8_t keep[48] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};

/* tzcnt where the CPU has it, bsf elsewhere: the same result for x != 0.
 * gcc emits bsf for __builtin_ctzll at -march=x86-64-v2, a slower step on
 * the token-to-token chain (7.9 against 8.8 ns per number, one run's
 * shortest text, AMD EPYC). */
static inline __attribute__((always_inline)) size_t tz64(uint64_t x)
{
    uint64_t r;
    __asm__("rep bsf %1, %0" : "=r"(r) : "r"(x) : "cc");
    return (size_t)r;
}

/* The token [-]d.ddd (1 to 18 fraction digits, no exponent) at p + t, t <=
 * 40, nd being nondigit64(p) with bit 63 set: its decimal, and its end as an
 * offset from p; 0 for a token of any other shape. The end is the first
 * non-digit from t + 3 on, whichever the sign; t <= 40 keeps a token too
 * long for the window (18 fraction digits end by 63) from stopping at bit
 * 63 with 18 or fewer. Reads p[t..63] and f[0..17], f = p + t + 2 or 3
 * (the first fraction digit). */
static inline __attribute__((always_inline)) size_t scan_1dot(const char *p, uint64_t nd, size_t t,
                                                               dec *d)
{
    size_t end = t + 3 + tz64(nd >> (t + 3));
    size_t s = p[t] == '-', i = t + s;
    size_t nf = end - i - 2;
    unsigned d0 = (unsigned)(unsigned char)p[i] - '0';
    if (d0 > 9 || p[i + 1] != '.' || (nd >> (i + 2) & 1) || nf > 18 || (p[end] | 0x20) == 'e')
        return 0;
    const char *f = p + i + 2;
    __m128i g = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)f), _mm_set1_epi8('0'));
    g = _mm_and_si128(g, _mm_loadu_si128((const __m128i *)(keep + 32 - nf)));
    g = _mm_madd_epi16(_mm_maddubs_epi16(g, _mm_set1_epi16(0x010A)), _mm_set1_epi32(0x00010064));
    g = _mm_madd_epi16(_mm_packus_epi32(g, g), _mm_set1_epi32(0x00012710));
    uint64_t a = (uint64_t)(uint32_t)_mm_cvtsi128_si32(g) * 100000000u +
                 (uint32_t)_mm_extract_epi32(g, 1);
    /* masks, not branches: tolist() text mixes 16, 17 and 18 digits */
    uint64_t b16 = ((uint64_t)(unsigned char)f[16] - '0') & -(uint64_t)(nf > 16);
    uint64_t b17 = ((uint64_t)(unsigned char)f[17] - '0') & -(uint64_t)(nf > 17);
    *d = (dec){.mant = d0 * 1000000000000000000ull + a * 100 + b16 * 10 + b17, .exp10 = -18,
               .neg = s, .frac = true};
    return end;
}

/* Inside SCAN_RUN: tokens while they have the shape and the usual
 * separators (", " or "," before a non-blank), p re-based once a token may
 * start past 40. A token of another shape goes to `general` at its start;
 * another separator to `separator` at the token's end. p + 80 <= end covers
 * every read (scan_1dot's and p[e + 2]). */
#define WINDOW_RUN(CONVERT)                                                                \
    while (backoff == 0 && end - p >= 80 && n < max) {                                     \
        uint64_t nd = nondigit64(p) | 1ull << 63;                                          \
        size_t t = 0;                                                                      \
        for (;;) {                                                                         \
            dec d;                                                                         \
            size_t e = scan_1dot(p, nd, t, &d);                                            \
            if (!e) {                                                                      \
                p += t;                                                                    \
                backoff = 64;                                                              \
                goto general;                                                              \
            }                                                                              \
            out[n++] = CONVERT(&d, p + t, p + e);                                          \
            last = p + e;                                                                  \
            if (p[e] == ',' && p[e + 1] == ' ' && !is_blank(p[e + 2]))                     \
                t = e + 2;                                                                 \
            else if (p[e] == ',' && !is_blank(p[e + 1]))                                   \
                t = e + 1;                                                                 \
            else {                                                                         \
                p += e;                                                                    \
                goto separator;                                                            \
            }                                                                              \
            if (n >= max)                                                                  \
                goto done;                                                                 \
            if (t > 40) {                                                                  \
                p += t;                                                                    \
                break;                                                                     \
            }                                                                              \
        }                                                                                  \
    }
#else
#define WINDOW_RUN(CONVERT)
#endif

/* One loop for both widths, so the per-element work stays in registers and
 * no call separates one number from the next: WINDOW_RUN first, then one
 * token at a time. *pp is written once, at the end. */
#define SCAN_RUN(CONVERT)                                                           \
    const char *p = *pp, *last = *pp;                                               \
    int64_t n = 0;                                                                  \
    int backoff = 0;                                                                \
    while (n < max) {                                                               \
        WINDOW_RUN(CONVERT)                                                         \
        if (n >= max)                                                               \
            break;                                                                  \
    general: __attribute__((unused));                                               \
        backoff -= backoff > 0;                                                     \
        dec d;                                                                      \
        const char *q = scan_dec_fast(p, end, &d);                                  \
        if (!q)                                                                     \
            break;                                                                  \
        out[n++] = CONVERT(&d, p, q);                                               \
        last = q;                                                                   \
        p = q;                                                                      \
    separator: __attribute__((unused));                                             \
        q = p;                                                                      \
        /* the usual separators, ", " and ",", tested by branches (they             \
         * predict; a data dependency on q[1] would lengthen the chain              \
         * from one token's end to the next one's start) */                         \
        if (__builtin_expect(end - q >= 3 && q[0] == ',', 1)) {                     \
            if (q[1] == ' ') {                                                      \
                if (!is_blank(q[2])) {                                              \
                    p = q + 2;                                                      \
                    continue;                                                       \
                }                                                                   \
            } else if (!is_blank(q[1])) {                                           \
                p = q + 1;                                                          \
                continue;                                                           \
            }                                                                       \
        }                                                                           \
        while (q < end && is_blank(*q))                                             \
            q++;                                                                    \
        if (q >= end || *q != ',')                                                  \
            break;                                                                  \
        p = q + 1;                                                                  \
        while (p < end && is_blank(*p))                                             \
            p++;                                                                    \
    }                                                                               \
done: __attribute__((unused));                                                      \
    *pp = last;                                                                     \
    return n

static inline __attribute__((always_inline)) double dec_to_f64_run(const dec *d, const char *s,
                                                                    const char *e)
{
    bool exact;
    return dec_to_f64(d, s, e, &exact);
}

int64_t od_scan_f32_run(const char **pp, const char *end, float *out, int64_t max)
{
    SCAN_RUN(dec_to_f32);
}

int64_t od_scan_f64_run(const char **pp, const char *end, double *out, int64_t max)
{
    SCAN_RUN(dec_to_f64_run);
}

const char *od_scan_number(const char *p, const char *end, od_num *out)
{
    dec d;
    const char *q = scan_dec_fast(p, end, &d);
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
