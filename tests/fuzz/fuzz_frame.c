/* Fuzz target: the wire format (bytes from any peer that reaches the port): the
 * frame decoder, then the fields of the payload and their getters, and the MAC check (the
 * payload's digest MAC'd once or per frame gives one MAC). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/rendezvous/internal.h" /* PF_RDV_MAX_JOIN; wire.h */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void poke_fields(const uint8_t *p, size_t len)
{
    struct pf_wire_fields f;
    if (pf_wire_fields_decode(&f, p, len) < 0) return;
    static const char *const keys[] = {"rank", "world", "pod", "nonce", "env", "n", "step"};
    char s[128];
    long long v;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        (void)pf_wire_fields_str(s, sizeof(s), &f, keys[i]);
        (void)pf_wire_fields_str(s, 1, &f, keys[i]);
        (void)pf_wire_fields_int(&v, &f, keys[i]);
    }
    for (size_t i = 0; i < f.n; i++) {
        char *d = pf_wire_field_dup(&f.v[i]);
        if (d && strlen(d) != f.v[i].vlen) abort(); /* a copy never loses bytes */
        free(d);
        /* every key the decoder accepts reads back by its own name */
        char key[65];
        if (f.v[i].klen < 1 || f.v[i].klen > 64) abort();
        memcpy(key, f.v[i].key, f.v[i].klen);
        key[f.v[i].klen] = '\0';
        if (!pf_wire_fields_get(&f, key)) abort();
        (void)pf_wire_fields_int(&v, &f, key);
    }
    pf_wire_fields_free(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a stream of frames, as a connection would see it */
    size_t off = 0;
    while (off < size) {
        struct pf_wire_frame fr;
        int n = pf_wire_frame_decode(&fr, data + off, size - off, PF_RDV_MAX_JOIN);
        if (n <= 0) break;
        if ((size_t)n > size - off) abort(); /* never claims more than it was given */
        if (fr.version == PF_WIRE_PROTO) {
            if (fr.payload != data + off + PF_WIRE_HDR) abort();
            poke_fields(fr.payload, fr.len);
            struct pf_wire_auth a = {.on = true, .token = "fuzz"};
            (void)pf_wire_mac_ok(&a, PF_WIRE_DIR_TO_ROOT, &fr);
            /* one construction whether the payload is hashed here or once for a fan-out,
             * and the MAC it gives verifies in its direction only */
            uint8_t dg[PF_WIRE_DIGEST], m1[PF_WIRE_MACLEN], m2[PF_WIRE_MACLEN];
            pf_wire_digest(dg, fr.payload, fr.len);
            pf_wire_mac(m1, &a, PF_WIRE_DIR_TO_ROOT, fr.header, fr.payload, fr.len);
            pf_wire_mac_digest(m2, &a, PF_WIRE_DIR_TO_ROOT, fr.header, dg);
            if (memcmp(m1, m2, sizeof(m1)) != 0) abort();
            struct pf_wire_frame g = fr;
            g.mac = m1;
            if (!pf_wire_mac_ok(&a, PF_WIRE_DIR_TO_ROOT, &g) ||
                pf_wire_mac_ok(&a, PF_WIRE_DIR_FROM_ROOT, &g))
                abort();
        }
        off += (size_t)n;
    }
    /* and the bytes as a bare payload */
    poke_fields(data, size);
    return 0;
}
