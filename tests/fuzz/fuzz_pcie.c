/* Fuzz target: the PCIe link attributes of an RDMA device's PCI function, as sysfs writes them
 * (drivers/pci/pci-sysfs.c: current_link_speed, max_link_speed, current_link_width,
 * max_link_width). The input is split at its first newline: a speed, then a width. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/checks/checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    char *nl = strchr(s, '\n');
    const char *width = "";
    if (nl) {
        *nl = '\0';
        width = nl + 1;
    }
    double gts = 0;
    if (pf_pcie_speed_parse(&gts, s) && !(gts > 0 && gts <= 1024)) abort();
    int w = -1;
    if (pf_pcie_width_parse(&w, width) && (w < 0 || w > 64)) abort();
    if (pf_pcie_width_parse(&w, s) && (w < 0 || w > 64)) abort();
    free(s);
    return 0;
}
