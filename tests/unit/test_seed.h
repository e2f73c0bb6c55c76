/* test_seed.h — a seeded random source for unit tests.
 *
 * The seed comes from OD_TEST_SEED or /dev/urandom, is fixed for the test
 * binary's life, and every CHECK failure prints it, so any failure can be
 * replayed. Header-only and static: each test file is its own binary.
 */
#ifndef OD_TEST_SEED_H
#define OD_TEST_SEED_H

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t g_seed, g_rng;

static void seed_once(void)
{
    if (g_seed)
        return;
    const char *env = getenv("OD_TEST_SEED");
    if (env) {
        g_seed = strtoull(env, NULL, 10);
    } else {
        FILE *f = fopen("/dev/urandom", "rb");
        if (!f || fread(&g_seed, sizeof g_seed, 1, f) != 1)
            g_seed = 0x9e3779b97f4a7c15ull;
        if (f)
            fclose(f);
    }
    if (!g_seed)
        g_seed = 1;
    g_rng = g_seed;
}

/* splitmix64 */
static uint64_t rnd(void)
{
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#define CHECK(cond, ...)                                                                         \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            char m_[1024];                                                                       \
            snprintf(m_, sizeof m_, __VA_ARGS__);                                                \
            cr_assert_fail("[seed %" PRIu64 "; rerun with OD_TEST_SEED=%" PRIu64 "] %s", g_seed, \
                           g_seed, m_);                                                          \
        }                                                                                        \
    } while (0)

#endif
