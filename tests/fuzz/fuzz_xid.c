/* Fuzz target: the kernel log as gpu.health reads it from /dev/kmsg (records "PRI,SEQ,TS,-;text"
 * one per read, continuation lines " KEY=value") or as dmesg prints it, for the NVIDIA
 * driver's Xid lines ("NVRM: Xid (PCI:0000:18:00): 79, pid=..., ..."), pkg/checks/gpu_health.c.
 * The input is not NUL-terminated: the reader must stay within len. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/checks/checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size ? size : 1);
    if (!s) return 0;
    memcpy(s, data, size);
    struct pf_xid_log log;
    memset(&log, 0, sizeof(log));
    size_t n = pf_xid_parse(&log, s, size);
    if (n != log.n || log.n > PF_XID_MAX) abort();
    for (size_t i = 0; i < log.n; i++) {
        if (log.v[i].bus > 0xff || log.v[i].dev > 0xff) abort();
        if (strlen(log.v[i].text) >= sizeof(log.v[i].text)) abort();
    }
    free(log.v);
    free(s);
    return 0;
}
