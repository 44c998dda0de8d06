/* Fuzz target: the kernel's CPU pressure text (/proc/pressure/cpu, a cgroup's cpu.pressure;
 * kernel/sched/psi.c, psi_show), as pkg/host/cpu.c reads it. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/host/host.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    long long total = -1;
    double avg10 = -1;
    if (pf_host_psi_parse(&total, &avg10, s) == 0 && (total < 0 || !(avg10 >= 0 && avg10 <= 100)))
        abort();
    free(s);
    return 0;
}
