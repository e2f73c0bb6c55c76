/* devices.c — the CPU and CUDA entries of od_backends() (od_devices.h).
 *
 * Invariants: the only file outside kernels/cuda/ that asks CUDA about
 * devices (through od_cuda.h, which answers "none" when CUDA is compiled
 * out), and the only one that asks OpenBLAS about itself.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cuda/od_cuda.h"
#include "od_devices.h"
#include "od_parallel.h"
#include "od_tensor.h"

/* OpenBLAS's own queries (declared in its cblas.h, which may not be the
 * cblas.h the system's alternatives picked). */
extern char *openblas_get_config(void);
extern char *openblas_get_corename(void);
extern int openblas_get_num_threads(void);

static od_prop *next(od_props *ps, const char *key, od_prop_kind kind)
{
    if (ps->n >= OD_PROPS_MAX)
        return NULL;
    od_prop *p = &ps->p[ps->n++];
    memset(p, 0, sizeof *p);
    p->key = key;
    p->kind = kind;
    return p;
}

void od_props_text(od_props *ps, const char *key, const char *text)
{
    od_prop *p = next(ps, key, OD_PROP_TEXT);
    if (p)
        snprintf(p->text, sizeof p->text, "%s", text ? text : "");
}

void od_props_int(od_props *ps, const char *key, int64_t v)
{
    od_prop *p = next(ps, key, OD_PROP_INT);
    if (p)
        p->i = v;
}

void od_props_bool(od_props *ps, const char *key, bool v)
{
    od_prop *p = next(ps, key, OD_PROP_BOOL);
    if (p)
        p->i = v;
}

/* ---- cpu ---- */

static int cpu_count(void) { return 1; }
static const char *cpu_why(void) { return ""; }

static void cpu_model(char *buf, size_t cap)
{
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ' || *c == '\t')
                    c++;
                c[strcspn(c, "\n")] = '\0';
                snprintf(buf, cap, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

static od_status cpu_props(int index, od_props *out)
{
    out->n = 0;
    if (index != 0)
        return OD_EUNAVAIL;
    char model[256];
    cpu_model(model, sizeof model);
    od_props_int(out, "cores", sysconf(_SC_NPROCESSORS_ONLN));
    od_props_text(out, "model", model);
    const char *cfg = openblas_get_config();
    od_props_text(out, "blas.library", "OpenBLAS");
    od_props_text(out, "blas.config", cfg ? cfg : "");
    const char *core = openblas_get_corename();
    od_props_text(out, "blas.core", core ? core : "");
    od_props_int(out, "blas.threads", openblas_get_num_threads());
    od_props_int(out, "kernel_threads", od_get_num_threads());
    od_cpu_alloc_info ai;
    od_cpu_alloc_stats(&ai);
    od_props_int(out, "allocator.in_use_bytes", (int64_t)ai.in_use_bytes);
    od_props_int(out, "allocator.cached_bytes", (int64_t)ai.cached_bytes);
    od_props_int(out, "allocator.cache_limit", (int64_t)ai.cache_limit);
    od_props_int(out, "allocator.hits", (int64_t)ai.hits);
    od_props_int(out, "allocator.misses", (int64_t)ai.misses);
    od_props_int(out, "allocator.evictions", (int64_t)ai.evictions);
    return OD_OK;
}

/* ---- cuda ---- */

static char g_cuda_why[512];
static pthread_once_t g_cuda_once = PTHREAD_ONCE_INIT;

static void probe_cuda(void)
{
    char tmp[512] = "";
    if (!od_cuda_available(tmp, sizeof tmp))
        snprintf(g_cuda_why, sizeof g_cuda_why, "%s", tmp[0] ? tmp : "CUDA unavailable");
}

static const char *cuda_why(void)
{
    pthread_once(&g_cuda_once, probe_cuda);
    return g_cuda_why;
}

static int cuda_count(void) { return *cuda_why() ? 0 : od_cuda_device_count(); }

static od_status cuda_props(int index, od_props *out)
{
    out->n = 0;
    od_cuda_info ci;
    od_status st = od_cuda_device_info(index, &ci);
    if (st != OD_OK)
        return st;
    od_cuda_alloc_info ca;
    memset(&ca, 0, sizeof ca);
    od_cuda_alloc_stats(index, &ca);
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", ci.cc_major, ci.cc_minor);
    od_props_int(out, "index", ci.ordinal);
    od_props_text(out, "name", ci.name);
    od_props_text(out, "compute_capability", cc);
    od_props_int(out, "sm_count", ci.sm_count);
    od_props_int(out, "total_memory_bytes", (int64_t)ci.total_mem_bytes);
    od_props_int(out, "free_memory_bytes", (int64_t)ci.free_mem_bytes);
    od_props_int(out, "l2_bytes", (int64_t)ci.l2_bytes);
    od_props_int(out, "clock_khz", ci.clock_khz);
    od_props_int(out, "memory_clock_khz", ci.mem_clock_khz);
    od_props_int(out, "memory_bus_bits", ci.mem_bus_bits);
    od_props_int(out, "driver_version", ci.driver_version);
    od_props_int(out, "runtime_version", ci.runtime_version);
    if (ci.util_gpu_pct >= 0) {
        od_props_int(out, "utilization_gpu_percent", ci.util_gpu_pct);
        od_props_int(out, "utilization_memory_percent", ci.util_mem_pct);
    }
    od_props_int(out, "allocator.in_use_bytes", (int64_t)ca.in_use_bytes);
    od_props_int(out, "allocator.cached_bytes", (int64_t)ca.cached_bytes);
    od_props_int(out, "allocator.peak_in_use_bytes", (int64_t)ca.peak_in_use_bytes);
    od_props_int(out, "allocator.allocs", (int64_t)ca.allocs);
    od_props_int(out, "allocator.cache_hits", (int64_t)ca.cache_hits);
    od_props_int(out, "allocator.ooms", (int64_t)ca.ooms);
    return OD_OK;
}

static const od_backend g_backends[] = {
    {"cpu", true, cpu_count, cpu_why, NULL, cpu_props},
#ifdef OD_HAVE_CUDA
    {"cuda", true, cuda_count, cuda_why, NULL, cuda_props},
#else
    {"cuda", false, cuda_count, cuda_why, NULL, cuda_props},
#endif
};

const od_backend *od_backends(int *n)
{
    *n = (int)(sizeof g_backends / sizeof g_backends[0]);
    return g_backends;
}

const od_backend *od_backend_named(const char *name)
{
    int n;
    const od_backend *b = od_backends(&n);
    for (int i = 0; i < n; i++)
        if (!strcmp(b[i].name, name))
            return &b[i];
    return NULL;
}
