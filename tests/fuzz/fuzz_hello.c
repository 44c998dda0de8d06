/* Fuzz target: the data connection's DHELLO decoder (the first bytes any peer sends to a
 * rank's data port). Byte 0 bit 0 turns the HMAC check on, with the token "fuzz-token" and
 * the run id 0x11 x 16 (the seed corpus holds frames made with them); the rest is what the
 * peer sent. The decoder must never read past what it was given, never take more than one
 * frame, and accept a frame under the HMAC check only when its MAC verifies. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/rendezvous/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    struct pf_wire_auth a;
    memset(&a, 0, sizeof(a));
    a.on = data[0] & 1;
    a.token = "fuzz-token";
    memset(a.nonce_s, 0x11, PF_WIRE_NONCE);
    const uint8_t *p = data + 1;
    size_t len = size - 1;
    /* a copy of exactly len bytes, so that ASan sees any read past them */
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) abort();
    if (len) memcpy(buf, p, len);
    struct pf_rdv_dhello h;
    int n = pf_rdv_dhello_decode(&h, buf, len, &a);
    if (n > 0) {
        if ((size_t)n > len || (size_t)n > PF_WIRE_HDR + PF_RDV_MAX_DHELLO + PF_WIRE_MACLEN)
            abort();
        struct pf_wire_frame f;
        if (pf_wire_frame_decode(&f, buf, len, PF_RDV_MAX_DHELLO) != n) abort();
        if (f.type != PF_WIRE_DHELLO || f.seq != 0) abort();
        if (a.on && !pf_wire_mac_ok(&a, PF_WIRE_DIR_DATA, &f)) abort();
        /* the same bytes decode the same way again (no state) */
        struct pf_rdv_dhello h2;
        if (pf_rdv_dhello_decode(&h2, buf, len, &a) != n || memcmp(&h, &h2, sizeof(h)) != 0)
            abort();
    }
    free(buf);
    return 0;
}
