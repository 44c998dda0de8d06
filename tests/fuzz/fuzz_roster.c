/* Fuzz target: the ROSTER payload rank 0 sends every joiner (run id, world size, the ranks in
 * the run as a list of those out or a bitmap of those in, and the records {rank, ip, port,
 * pod, node} of the ranks it dials). A decoded roster lists n ascending ranks with rank 0
 * first, and encodes again and decodes to the same ranks and records. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/rendezvous/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pf_rdv_roster ro;
    if (pf_rdv_roster_decode(&ro, data, size) < 0) {
        pf_rdv_roster_free(&ro);
        return 0;
    }
    if (ro.n < 1 || ro.world < 1 || ro.n > ro.world || ro.peer[0].rank != 0) abort();
    for (int k = 0; k < ro.n; k++)
        if (ro.peer[k].rank < 0 || ro.peer[k].rank >= ro.world || ro.peer[k].port < 0 ||
            ro.peer[k].port > 65535 || (k > 0 && ro.peer[k].rank <= ro.peer[k - 1].rank))
            abort();
    struct pf_buf b;
    pf_buf_init(&b, 64u << 20);
    if (ro.n > 0 && pf_rdv_roster_encode(&b, &ro) == 0) {
        struct pf_rdv_roster t;
        if (pf_rdv_roster_decode(&t, (const uint8_t *)pf_buf_str(&b), b.len) < 0) abort();
        if (t.n != ro.n || t.world != ro.world || memcmp(t.run, ro.run, sizeof(t.run)) != 0)
            abort();
        for (int k = 0; k < t.n; k++) {
            const struct pf_rdv_peer *x = &t.peer[k], *y = &ro.peer[k];
            if (x->rank != y->rank || x->known != y->known) abort();
            if (x->known && (x->port != y->port || strcmp(x->ip, y->ip) != 0 ||
                             strcmp(x->pod, y->pod) != 0 || strcmp(x->node, y->node) != 0))
                abort();
        }
        pf_rdv_roster_free(&t);
    }
    pf_buf_free(&b);
    pf_rdv_roster_free(&ro);
    return 0;
}
