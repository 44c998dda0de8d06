/* The wire format: frames, fields and their MAC. Pure functions (no I/O) except
 * pf_wire_random. */
#define _GNU_SOURCE
#include "wire.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

const char *pf_wire_type_name(int type)
{
    static const char *const names[] = {"?",    "HELLO",  "JOIN",    "REJECT", "ROSTER",
                                        "STEP", "RESULT", "SUMMARY", "DHELLO"};
    return type > 0 && type < PF_WIRE_TYPE_END ? names[type] : "?";
}

/* Header: magic u32 | version u8 | type u8 | flags u8 | zero u8 | seq u32 | length u32 */
void pf_wire_frame_header(uint8_t hdr[PF_WIRE_HDR], int type, int flags, uint32_t seq, uint32_t len)
{
    put32(hdr, PF_WIRE_MAGIC);
    hdr[4] = PF_WIRE_PROTO;
    hdr[5] = (uint8_t)type;
    hdr[6] = (uint8_t)flags;
    hdr[7] = 0;
    put32(hdr + 8, seq);
    put32(hdr + 12, len);
}

int pf_wire_frame_decode(struct pf_wire_frame *out, const uint8_t *buf, size_t len,
                         size_t max_payload)
{
    memset(out, 0, sizeof(*out));
    if (len == 0) return 0;
    /* judge the magic on the bytes there are, so garbage is refused at its first byte */
    static const uint8_t magic[4] = {'P', 'F', 'R', 'V'};
    size_t m = len < 4 ? len : 4;
    if (memcmp(buf, magic, m) != 0)
        return pf_err_set(PF_EINVAL, "not a preflight frame (bad magic)");
    if (len < PF_WIRE_HDR) return 0;
    out->version = buf[4];
    out->type = buf[5];
    out->flags = buf[6];
    out->seq = get32(buf + 8);
    out->len = get32(buf + 12);
    out->header = buf;
    /* another version's header may mean other things by its type, flags and length: the
     * caller names the version, the rest is not ours to judge */
    if (out->version != PF_WIRE_PROTO) return PF_WIRE_HDR;
    if (out->type == 0 || out->type >= PF_WIRE_TYPE_END)
        return pf_err_set(PF_EINVAL, "unknown frame type %u", out->type);
    if (out->flags & ~PF_WIRE_F_MAC)
        return pf_err_set(PF_EINVAL, "unknown frame flags 0x%02x", out->flags);
    if (buf[7] != 0) return pf_err_set(PF_EINVAL, "reserved header byte is 0x%02x, not 0", buf[7]);
    if (out->len > max_payload || out->len > PF_WIRE_MAX_PAYLOAD)
        return pf_err_set(PF_ETOOBIG, "frame of %u bytes is over the limit of %zu", out->len,
                          max_payload < PF_WIRE_MAX_PAYLOAD ? max_payload
                                                            : (size_t)PF_WIRE_MAX_PAYLOAD);
    size_t total =
        PF_WIRE_HDR + (size_t)out->len + ((out->flags & PF_WIRE_F_MAC) ? PF_WIRE_MACLEN : 0);
    if (len < total) return 0;
    out->payload = buf + PF_WIRE_HDR;
    out->mac = (out->flags & PF_WIRE_F_MAC) ? buf + PF_WIRE_HDR + out->len : NULL;
    return (int)total;
}

int pf_wire_fields_decode(struct pf_wire_fields *out, const uint8_t *p, size_t len)
{
    out->v = NULL;
    out->n = 0;
    size_t cap = 0, i = 0;
    while (i < len) {
        size_t klen = p[i++];
        if (klen == 0 || klen > 64 || len - i < klen + 4) goto bad;
        for (size_t k = 0; k < klen; k++)
            if (p[i + k] < 0x21 || p[i + k] > 0x7e) goto bad;
        const char *key = (const char *)p + i;
        i += klen;
        size_t vlen = get32(p + i);
        i += 4;
        if (vlen > len - i) goto bad;
        if (out->n == PF_WIRE_MAX_FIELDS) goto bad;
        if (out->n == cap) {
            cap = cap ? cap * 2 : 16;
            out->v = pf_xrealloc(out->v, cap * sizeof(*out->v));
        }
        out->v[out->n++] = (struct pf_wire_field){key, klen, p + i, vlen};
        i += vlen;
    }
    return 0;
bad:
    pf_wire_fields_free(out);
    return pf_err_set(PF_EINVAL, "malformed fields at byte %zu of %zu", i, len);
}

void pf_wire_fields_free(struct pf_wire_fields *f)
{
    free(f->v);
    f->v = NULL;
    f->n = 0;
}

bool pf_wire_field_is(const struct pf_wire_field *fl, const char *key)
{
    size_t kl = strlen(key);
    return fl->klen == kl && memcmp(fl->key, key, kl) == 0;
}

const struct pf_wire_field *pf_wire_fields_get(const struct pf_wire_fields *f, const char *key)
{
    for (size_t i = 0; i < f->n; i++)
        if (pf_wire_field_is(&f->v[i], key)) return &f->v[i];
    return NULL;
}

int pf_wire_fields_str(char *out, size_t n, const struct pf_wire_fields *f, const char *key)
{
    const struct pf_wire_field *fl = pf_wire_fields_get(f, key);
    if (n) out[0] = '\0';
    if (!fl) return pf_err_set(PF_ENOENT, "field %s missing", key);
    if (memchr(fl->val, 0, fl->vlen))
        return pf_err_set(PF_EINVAL, "field %s holds a NUL byte", key);
    if (fl->vlen >= n)
        return pf_err_set(PF_ETOOBIG, "field %s too long (%zu bytes)", key, fl->vlen);
    memcpy(out, fl->val, fl->vlen);
    out[fl->vlen] = '\0';
    return 0;
}

static int not_a_number(const char *key, const char *s, const char *what);

int pf_wire_fields_int(long long *out, const struct pf_wire_fields *f, const char *key)
{
    char s[32];
    int r = pf_wire_fields_str(s, sizeof(s), f, key);
    if (r < 0) return r;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    /* digits with an optional minus, nothing around them, and never clamped */
    if (!(isdigit((unsigned char)s[0]) || (s[0] == '-' && isdigit((unsigned char)s[1]))) || *end ||
        errno)
        return not_a_number(key, s, "a number");
    *out = v;
    return 0;
}

char *pf_wire_field_dup(const struct pf_wire_field *fl)
{
    if (memchr(fl->val, 0, fl->vlen)) return NULL;
    char *s = pf_xmalloc(fl->vlen + 1);
    memcpy(s, fl->val, fl->vlen);
    s[fl->vlen] = '\0';
    return s;
}

int pf_wire_put(struct pf_buf *b, const char *key, const void *val, size_t vlen)
{
    size_t kl = strlen(key);
    if (kl == 0 || kl > 64 || vlen > PF_WIRE_MAX_PAYLOAD)
        return pf_err_set(PF_EINVAL, "bad field %s", key);
    uint8_t h[5];
    h[0] = (uint8_t)kl;
    size_t was = b->len;
    int r = pf_buf_add(b, h, 1);
    if (r == 0) r = pf_buf_add(b, key, kl);
    put32(h + 1, (uint32_t)vlen);
    if (r == 0) r = pf_buf_add(b, h + 1, 4);
    if (r == 0 && vlen) r = pf_buf_add(b, val, vlen);
    if (r < 0 && b->cap) {
        /* all of the field or none of it: a half field would garble the payload */
        b->len = was;
        b->data[was] = '\0';
    }
    return r;
}

int pf_wire_put_str(struct pf_buf *b, const char *key, const char *s)
{
    return pf_wire_put(b, key, s ? s : "", s ? strlen(s) : 0);
}

int pf_wire_put_int(struct pf_buf *b, const char *key, long long v)
{
    char s[32];
    snprintf(s, sizeof(s), "%lld", v);
    return pf_wire_put_str(b, key, s);
}

void pf_wire_digest(uint8_t out[PF_WIRE_DIGEST], const uint8_t *payload, size_t len)
{
    static const uint8_t none = 0;
    crypto_hash_sha256(out, len ? payload : &none, len);
}

void pf_wire_mac_digest(uint8_t out[PF_WIRE_MACLEN], const struct pf_wire_auth *a, int dir,
                        const uint8_t hdr[PF_WIRE_HDR], const uint8_t digest[PF_WIRE_DIGEST])
{
    crypto_auth_hmacsha256_state st;
    const char *tok = a->token ? a->token : "";
    crypto_auth_hmacsha256_init(&st, (const unsigned char *)tok, strlen(tok));
    uint8_t d[8] = {'P', 'F', 'R', 'V', 'm', 'a', 'c', (uint8_t)dir};
    crypto_auth_hmacsha256_update(&st, d, sizeof(d));
    crypto_auth_hmacsha256_update(&st, a->nonce_s, PF_WIRE_NONCE);
    crypto_auth_hmacsha256_update(&st, a->nonce_c, PF_WIRE_NONCE);
    /* the header carries the version (2: this construction) and the payload's length */
    crypto_auth_hmacsha256_update(&st, hdr, PF_WIRE_HDR);
    crypto_auth_hmacsha256_update(&st, digest, PF_WIRE_DIGEST);
    crypto_auth_hmacsha256_final(&st, out);
    sodium_memzero(&st, sizeof(st));
}

void pf_wire_mac(uint8_t out[PF_WIRE_MACLEN], const struct pf_wire_auth *a, int dir,
                 const uint8_t hdr[PF_WIRE_HDR], const uint8_t *payload, size_t len)
{
    uint8_t dg[PF_WIRE_DIGEST];
    pf_wire_digest(dg, payload, len);
    pf_wire_mac_digest(out, a, dir, hdr, dg);
}

bool pf_wire_mac_ok(const struct pf_wire_auth *a, int dir, const struct pf_wire_frame *f)
{
    if (!f->mac || !a->on) return false;
    uint8_t want[PF_WIRE_MACLEN];
    pf_wire_mac(want, a, dir, f->header, f->payload, f->len);
    return sodium_memcmp(want, f->mac, PF_WIRE_MACLEN) == 0;
}

void pf_wire_random(void *out, size_t n)
{
    uint8_t *p = out;
    while (n) {
        ssize_t r = getrandom(p, n, 0);
        if (r <= 0) {
            randombytes_buf(p, n);
            return;
        }
        p += r;
        n -= (size_t)r;
    }
}

/* The refusal of a number field: its text quoted when printable, else the byte that is not
 * (a peer's bytes never reach a terminal or a log raw) */
static int not_a_number(const char *key, const char *s, const char *what)
{
    for (const char *c = s; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
            return pf_err_set(PF_EINVAL, "field %s is not %s (it holds a byte 0x%02x)", key, what,
                              (unsigned char)*c);
    return pf_err_set(PF_EINVAL, "field %s: \"%s\" is not %s", key, s, what);
}

int pf_wire_fields_num(double *out, const struct pf_wire_fields *f, const char *key)
{
    char s[64];
    int r = pf_wire_fields_str(s, sizeof(s), f, key);
    if (r < 0) return r;
    /* strtod alone would take " 1", "+1", "0x1p4", "nan" and "inf": the characters are
     * judged first, then strtod must take all of them, and the value must be finite */
    size_t len = strlen(s);
    char *end = NULL;
    double v = 0;
    bool ok = (s[0] == '-' || s[0] == '.' || isdigit((unsigned char)s[0])) &&
              strspn(s, "0123456789.eE+-") == len;
    if (ok) v = strtod(s, &end);
    if (!ok || end != s + len || !isfinite(v))
        return not_a_number(key, s, "a finite decimal number");
    *out = v;
    return 0;
}
