/* Fuzz target: a downward-API map file (`key="Go-quoted value"` lines, the kubelet's
 * FormatMap) and the Go unquoting of each value; a network-status found in it goes on to the
 * Multus parser, as pf_k8s_podinfo_read does. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/k8s/k8s.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;

    /* the whole input as one quoted literal */
    char *v = NULL;
    size_t vlen = 0;
    if (pf_k8s_unquote(&v, &vlen, text, size) == 0) {
        if (v[vlen] != '\0' || vlen > size) abort();
    }
    free(v);

    struct pf_k8s_map m;
    if (pf_k8s_map_parse(&m, "annotations", text, size) == 0) {
        for (size_t i = 0; i < m.n; i++) {
            if (pf_k8s_map_find(&m, m.v[i].key) != &m.v[i]) abort();
            if (m.v[i].value[m.v[i].value_len] != '\0') abort();
        }
        const char *ns = pf_k8s_map_get(&m, PF_K8S_NETSTATUS_ANNOT);
        if (!ns) ns = pf_k8s_map_get(&m, PF_K8S_NETSTATUS_ANNOT_OLD);
        if (ns) {
            struct pf_k8s_netstatus st;
            if (pf_k8s_netstatus_parse(&st, ns, strlen(ns)) == 0) pf_k8s_netstatus_free(&st);
        }
        pf_k8s_map_free(&m);
    } else if (m.n != 0 || m.v != NULL) {
        abort(); /* documented: *out is empty on error */
    }
    return 0;
}
