/* Fuzz target: the attachment sources of pkg/k8s/attach.c. The first byte picks the parser:
 * 'c' a ResourceClaim, 'p' a Pod's claims, 'g' GKE's networking.gke.io/interfaces (with the
 * interface-status after a NUL byte, when there is one), anything else PREFLIGHT_DEVICE_RESOURCES.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/k8s/attach.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(const struct pf_k8s_attachments *a)
{
    for (size_t i = 0; i < a->n; i++) {
        const struct pf_k8s_attach *x = &a->v[i];
        if (!x->name || !x->interface || !x->device || !x->mac) abort();
        (void)pf_k8s_attach_matches(x, "a/b");
        (void)pf_k8s_attach_matches(x, x->name);
        (void)pf_k8s_attach_src_name(x->src);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    struct pf_k8s_attachments a = {0};
    const char *p = (const char *)data + 1;
    size_t n = size - 1;
    int r;
    if (data[0] == 'c') {
        r = pf_k8s_claim_parse(&a, p, n);
    } else if (data[0] == 'p') {
        struct pf_strlist c = {0};
        if (pf_k8s_pod_claims_parse(&c, p, n) < 0 && c.n != 0) abort();
        for (size_t i = 0; i < c.n; i++)
            if (!c.v[i] || !*c.v[i]) abort();
        pf_strlist_free(&c);
        return 0;
    } else if (data[0] == 'g') {
        const char *nul = memchr(p, '\0', n);
        size_t l1 = nul ? (size_t)(nul - p) : n;
        r = pf_k8s_gke_parse(&a, p, l1, nul ? nul + 1 : NULL, nul ? n - l1 - 1 : 0);
    } else {
        char *s = malloc(n + 1);
        memcpy(s, p, n);
        s[n] = '\0';
        r = pf_k8s_resources_parse(&a, s);
        free(s);
    }
    if (r < 0 && a.n != 0) abort(); /* documented: nothing appended on error */
    walk(&a);
    pf_k8s_attachments_free(&a);
    return 0;
}
