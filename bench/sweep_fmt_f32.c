/* sweep_fmt_f32.c — one-off exhaustive check (issue 14 item 3): every finite
 * float32 bit pattern printed by od_fmt_f32_items (the AVX-512 path where
 * the CPU has it, the scalar one for runs' tails) and by od_fmt_f32 (the
 * scalar path) against REF's od_fmt_f32
 * (a commit's proto/fmt.c, names renamed, as make bench-json-ab links it),
 * byte for byte. Minutes of CPU: not part of make test. Build and run:
 *   git show main:proto/fmt.c > /tmp/ref_fmt.c
 *   cc $(CFLAGS) -Wno-unused-function -include bench/json_ab_rename.h -c /tmp/ref_fmt.c -o /tmp/ref_fmt.o
 *   cc $(CFLAGS) bench/sweep_fmt_f32.c /tmp/ref_fmt.o build/obj/proto/fmt.o -lm -o /tmp/sweep
 *   /tmp/sweep 0 2 & /tmp/sweep 1 2     (part, parts: one process per core)
 * Each 1024-pattern block (all finite or all not: the exponent 0xff range
 * is block-aligned) is printed in two runs split 0..7 patterns short of
 * the end, so that both the 8-wide path and the scalar tail see every
 * pattern class. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "od_proto.h"

int base_fmt_f32(float f, char *out);

enum { BLOCK = 1024 };

static int check(const float *v, size_t n, bool comma, char *got, char *want)
{
    size_t done, len = od_fmt_f32_items(v, n, comma, got, &done);
    char *o = want;
    for (size_t i = 0; i < n; i++) {
        if (comma || i)
            *o++ = ',';
        int k = base_fmt_f32(v[i], o);
        char one[OD_FMT_F32_ROOM];
        if (od_fmt_f32(v[i], one) != k || memcmp(one, o, (size_t)k + 1)) {
            uint32_t bits;
            memcpy(&bits, v + i, 4);
            fprintf(stderr, "MISMATCH od_fmt_f32 0x%08x: got %s want %s\n", bits, one, o);
            return 1;
        }
        o += k;
    }
    if (done != n || len != (size_t)(o - want) || memcmp(got, want, len)) {
        for (size_t i = 0; i < n; i++) { /* find the first culprit */
            char a[64], b[64];
            size_t d1, l1 = od_fmt_f32_items(v + i, 1, false, a, &d1);
            a[l1] = 0;
            base_fmt_f32(v[i], b);
            uint32_t bits;
            memcpy(&bits, v + i, 4);
            if (strcmp(a, b))
                fprintf(stderr, "MISMATCH 0x%08x: got %s want %s\n", bits, a, b);
        }
        fprintf(stderr, "MISMATCH in a run of %zu (done %zu, len %zu vs %zu)\n", n, done, len,
                (size_t)(o - want));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    unsigned part = argc > 1 ? (unsigned)atoi(argv[1]) : 0, parts = argc > 2 ? (unsigned)atoi(argv[2]) : 1;
    static float v[BLOCK];
    static char got[BLOCK * (OD_FMT_F32_MAX + 1) + OD_FMT_F32_ROOM],
        want[BLOCK * (OD_FMT_F32_MAX + 1) + OD_FMT_F32_ROOM];
    uint64_t checked = 0;
    for (uint64_t blk = part; blk < (1ull << 32) / BLOCK; blk += parts) {
        uint32_t b0 = (uint32_t)(blk * BLOCK);
        if (((b0 >> 23) & 0xff) == 0xff)
            continue;
        for (uint32_t j = 0; j < BLOCK; j++) {
            uint32_t bits = b0 + j;
            memcpy(&v[j], &bits, 4);
        }
        size_t split = BLOCK - (blk % 8);
        if (check(v, split, blk & 1, got, want) || check(v + split, BLOCK - split, true, got, want))
            return 1;
        checked += BLOCK;
    }
    printf("part %u/%u: %llu finite patterns, all identical\n", part, parts, (unsigned long long)checked);
    return 0;
}
