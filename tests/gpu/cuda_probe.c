/* cuda_probe.c — tells tools/gpu-tests.sh whether a CUDA device is usable.
 *
 * Prints one line and exits 0 with "N CUDA device(s): <name> (cc X.Y, S SMs,
 * M GiB)" when the library sees a device, or 1 with "unavailable: <reason>"
 * (the reason od_cuda_available gives, from cudaGetDeviceCount). It asks the
 * library rather than nvidia-smi so the skip reason is the one the server
 * would report.
 */
#include <stdio.h>

#include "od_cuda.h"

int main(void)
{
    char why[512];
    if (!od_cuda_available(why, sizeof why)) {
        printf("unavailable: %s\n", why);
        return 1;
    }
    od_cuda_info info;
    int n = od_cuda_device_count();
    if (od_cuda_device_info(0, &info) != OD_OK) {
        printf("%d CUDA device(s)\n", n);
        return 0;
    }
    printf("%d CUDA device(s): %s (cc %d.%d, %d SMs, %.1f GiB)\n", n, info.name, info.cc_major,
           info.cc_minor, info.sm_count, (double)info.total_mem_bytes / (double)(1u << 30));
    return 0;
}
