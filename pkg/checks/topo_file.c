/* The GPUs and NICs an NCCL topology file (NCCL_TOPO_FILE) places, by PCI bus id. NCCL's reader
 * (src/graph/xml.cc) takes <system>/<cpu>/<pci>/<gpu>/<nic>/<net> elements with quoted
 * attributes; a <pci> element is a GPU or NIC by its class ("0x03...", "0x02...") or by the
 * <gpu>/<nic> element it holds. A <pci> with no class attribute and no <pci> inside is a device
 * too: NCCL (v2.30.7-1 xml.cc ncclTopoGetXmlFromSys) reads its class from the node's sysfs when
 * it meets the device, and trims the element when it never does; aws-ofi-nccl's p5.48xlarge
 * file lists its GPUs and NICs so. PCI switches are left out: VM images name virtual ones
 * (ffff:ff:01.0) that no sysfs lists and NCCL keeps from the file (docs/checks/40-nccl-env.md,
 * topo-file-mismatch). */
#define _GNU_SOURCE
#include "checks.h"

#include <ctype.h>
#include <string.h>

#define TOPO_DEPTH_MAX 32

struct topo_pci {
    char busid[PF_TOPO_BUSID_MAX]; /* "" when missing or not a bus id */
    bool endpoint;                 /* a GPU or NIC */
    bool classless;                /* no class attribute: NCCL reads it from sysfs */
    bool has_pci;                  /* holds a <pci> element (a switch) */
};

struct topo_scan {
    const char *s;
    size_t len, i;
    struct topo_pci stack[TOPO_DEPTH_MAX];
    size_t depth; /* open <pci> elements; deeper ones than the stack holds are counted only */
    struct pf_strlist *out;
    size_t found;
};

static bool name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '-' || c == ':' || c == '.';
}

static bool is_busid(const char *v, size_t n)
{
    if (n == 0 || n >= PF_TOPO_BUSID_MAX) return false;
    for (size_t k = 0; k < n; k++)
        if (!isxdigit((unsigned char)v[k]) && v[k] != ':' && v[k] != '.') return false;
    return true;
}

static bool name_is(const char *p, size_t n, const char *want)
{
    return n == strlen(want) && memcmp(p, want, n) == 0;
}

static void emit(struct topo_scan *sc, const struct topo_pci *p)
{
    bool device = p->endpoint || (p->classless && !p->has_pci);
    if (!device || !p->busid[0] || pf_strlist_has(sc->out, p->busid)) return;
    if (sc->out->n >= PF_TOPO_BUSIDS_MAX) return;
    if (pf_strlist_add(sc->out, p->busid) == 0) sc->found++;
}

/* Skips to just past `end`; false at the end of the text. */
static bool skip_past(struct topo_scan *sc, const char *end)
{
    size_t n = strlen(end);
    for (; sc->i + n <= sc->len; sc->i++)
        if (memcmp(sc->s + sc->i, end, n) == 0) {
            sc->i += n;
            return true;
        }
    sc->i = sc->len;
    return false;
}

/* The attributes of a start tag, sc->i just past its name, up to and past '>'. Fills busid and
 * class of a <pci>; false at a malformed or unterminated tag. */
static bool read_attrs(struct topo_scan *sc, struct topo_pci *p, bool *self_closing)
{
    const char *s = sc->s;
    for (;;) {
        while (sc->i < sc->len && isspace((unsigned char)s[sc->i]))
            sc->i++;
        if (sc->i >= sc->len) return false;
        if (s[sc->i] == '>') {
            sc->i++;
            return true;
        }
        if (s[sc->i] == '/' && sc->i + 1 < sc->len && s[sc->i + 1] == '>') {
            sc->i += 2;
            *self_closing = true;
            return true;
        }
        size_t k = sc->i;
        while (sc->i < sc->len && name_char(s[sc->i]))
            sc->i++;
        size_t kn = sc->i - k;
        while (sc->i < sc->len && isspace((unsigned char)s[sc->i]))
            sc->i++;
        if (kn == 0 || sc->i >= sc->len || s[sc->i] != '=') return false;
        sc->i++;
        while (sc->i < sc->len && isspace((unsigned char)s[sc->i]))
            sc->i++;
        if (sc->i >= sc->len || (s[sc->i] != '"' && s[sc->i] != '\'')) return false;
        char q = s[sc->i++];
        const char *v = s + sc->i;
        const char *e = memchr(v, q, sc->len - sc->i);
        if (!e) return false;
        size_t vn = (size_t)(e - v);
        sc->i += vn + 1;
        if (name_is(s + k, kn, "busid") && is_busid(v, vn)) {
            memcpy(p->busid, v, vn);
            p->busid[vn] = '\0';
        } else if (name_is(s + k, kn, "class")) {
            p->classless = false;
            if (vn >= 4 && (memcmp(v, "0x03", 4) == 0 || memcmp(v, "0x02", 4) == 0))
                p->endpoint = true;
        }
    }
}

/* One tag, sc->i at its '<'; false when the scan must stop. */
static bool read_tag(struct topo_scan *sc)
{
    const char *s = sc->s;
    sc->i++;
    if (sc->i + 3 <= sc->len && memcmp(s + sc->i, "!--", 3) == 0) return skip_past(sc, "-->");
    if (sc->i < sc->len && (s[sc->i] == '?' || s[sc->i] == '!')) return skip_past(sc, ">");
    bool closing = sc->i < sc->len && s[sc->i] == '/';
    if (closing) sc->i++;
    size_t n0 = sc->i;
    while (sc->i < sc->len && name_char(s[sc->i]))
        sc->i++;
    const char *name = s + n0;
    size_t nn = sc->i - n0;
    bool pci = name_is(name, nn, "pci");
    if (closing) {
        if (pci && sc->depth > 0) {
            sc->depth--;
            if (sc->depth < TOPO_DEPTH_MAX) emit(sc, &sc->stack[sc->depth]);
        }
        return skip_past(sc, ">");
    }
    struct topo_pci p = {.busid = "", .endpoint = false, .classless = true};
    bool self_closing = false;
    if (!read_attrs(sc, &p, &self_closing)) return false;
    if ((name_is(name, nn, "gpu") || name_is(name, nn, "nic")) && sc->depth > 0 &&
        sc->depth <= TOPO_DEPTH_MAX)
        sc->stack[sc->depth - 1].endpoint = true;
    if (!pci) return true;
    if (sc->depth > 0 && sc->depth <= TOPO_DEPTH_MAX) sc->stack[sc->depth - 1].has_pci = true;
    if (self_closing) {
        emit(sc, &p);
        return true;
    }
    if (sc->depth < TOPO_DEPTH_MAX) sc->stack[sc->depth] = p;
    sc->depth++;
    return true;
}

size_t pf_topo_busids(struct pf_strlist *out, const char *text, size_t len)
{
    struct topo_scan sc = {.s = text, .len = len, .out = out};
    while (sc.i < sc.len) {
        const char *lt = memchr(text + sc.i, '<', sc.len - sc.i);
        if (!lt) break;
        sc.i = (size_t)(lt - text);
        if (!read_tag(&sc)) break;
    }
    while (sc.depth > 0) /* a truncated file still names the devices opened so far */
        if (--sc.depth < TOPO_DEPTH_MAX) emit(&sc, &sc.stack[sc.depth]);
    return sc.found;
}
