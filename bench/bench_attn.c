/* bench_attn.c — peak extra memory and time of scaled dot-product attention:
 * the fused kernel (_scaled_dot_product_attention_forward, whose CPU kernel
 * is kernels/cpu/attention.c) against the composite math path
 * (_scaled_dot_product_attention_math: matmul, softmax, matmul).
 *
 * Each path runs in its own child process, so neither sees the other's
 * freed-but-cached memory: the child makes float32 q, k, v of [B, H, L, E]
 * (pages touched), reads its peak resident set (getrusage ru_maxrss), makes
 * one call, and reads it again. The difference is the call's peak extra
 * memory: its outputs, its temporaries and any workspace, from any
 * allocator. The need_attn_weights=False call returns the output only (the
 * fused path's weights are empty; the math path's are its softmax).
 *
 * Usage: bench_attn [--L n] [--B n] [--H n] [--E n]   (default 2048, 8, 12, 64)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "od_ops.h"

static long maxrss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static od_tensor *rand_tensor(const int64_t *sizes, uint64_t seed)
{
    od_tensor *t;
    od_error err;
    if (od_tensor_empty(sizes, 4, OD_FLOAT32, (od_device){OD_DEV_CPU, 0}, &t, &err)) {
        fprintf(stderr, "bench_attn: %s\n", err.message);
        exit(1);
    }
    float *p = od_tensor_data(t);
    uint64_t x = 0x9E3779B97F4A7C15u ^ seed;
    for (int64_t i = 0, n = od_tensor_numel(t); i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    return t;
}

/* One path in this (child) process: prints a line, exits. */
static void run(od_opid id, const char *name, int64_t B, int64_t H, int64_t L, int64_t E)
{
    od_error err;
    if (od_init(&err)) {
        fprintf(stderr, "bench_attn: od_init: %s\n", err.message);
        exit(1);
    }
    int64_t sz[4] = {B, H, L, E};
    od_tensor *q = rand_tensor(sz, 1), *k = rand_tensor(sz, 2), *v = rand_tensor(sz, 3);
    long base = maxrss_kib();
    od_value args[7] = {od_tensor_v(q), od_tensor_v(k), od_tensor_v(v), od_none(), od_double(0), od_bool(false),
                        od_bool(false)};
    od_stack s;
    double t0 = now_s();
    if (od_call_builtin(id, args, 7, &s, &err)) {
        fprintf(stderr, "bench_attn: %s: %s\n", name, err.message);
        exit(1);
    }
    double dt = now_s() - t0;
    long peak = maxrss_kib();
    double out_mib = (double)od_tensor_nbytes(s.rets[0].u.t) / 1048576.0;
    printf("%-6s %-44s %9.1f %12.1f %10.1f\n", name, od_op_name(od_builtin(id)), dt * 1e3,
           (double)(peak - base) / 1024.0, out_mib);
    fflush(stdout);
    od_stack_release_rets(&s);
    exit(0);
}

int main(int argc, char **argv)
{
    int64_t L = 2048, B = 8, H = 12, E = 64;
    for (int i = 1; i + 1 < argc; i += 2) {
        int64_t v = strtoll(argv[i + 1], NULL, 10);
        if (!strcmp(argv[i], "--L"))
            L = v;
        else if (!strcmp(argv[i], "--B"))
            B = v;
        else if (!strcmp(argv[i], "--H"))
            H = v;
        else if (!strcmp(argv[i], "--E"))
            E = v;
    }
    printf("scaled dot-product attention, float32 [B=%lld, H=%lld, L=S=%lld, E=%lld], one call per path, "
           "%d threads\n",
           (long long)B, (long long)H, (long long)L, (long long)E, od_get_num_threads());
    printf("%-6s %-44s %9s %12s %10s\n", "path", "operator", "ms", "peak+ MiB", "out MiB");
    const struct {
        od_opid id;
        const char *name;
    } paths[] = {{OD_OPID__scaled_dot_product_attention_forward, "fused"},
                 {OD_OPID__scaled_dot_product_attention_math, "math"}};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0)
            run(paths[i].id, paths[i].name, B, H, L, E);
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "bench_attn: the %s run failed\n", paths[i].name);
            return 1;
        }
    }
    return 0;
}
