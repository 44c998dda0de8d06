/* Downward-API files, Go-quoted values, Multus network-status and SR-IOV device plugin
 * variables (docs/kubernetes.md, "What the pod tells preflight about itself"). */
#define _GNU_SOURCE
#include "k8s.h"

#include <ctype.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- Go strconv.Quote */

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Length of the valid UTF-8 sequence at s (2..4 bytes), or 0 when invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else {
        return 0;
    }
    if (n < len) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf) return 0;
    return len;
}

static size_t utf8_put(char *o, uint32_t r)
{
    if (r < 0x80) {
        o[0] = (char)r;
        return 1;
    }
    if (r < 0x800) {
        o[0] = (char)(0xc0 | (r >> 6));
        o[1] = (char)(0x80 | (r & 0x3f));
        return 2;
    }
    if (r < 0x10000) {
        o[0] = (char)(0xe0 | (r >> 12));
        o[1] = (char)(0x80 | ((r >> 6) & 0x3f));
        o[2] = (char)(0x80 | (r & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (r >> 18));
    o[1] = (char)(0x80 | ((r >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((r >> 6) & 0x3f));
    o[3] = (char)(0x80 | (r & 0x3f));
    return 4;
}

/* One escape at s[*i] (a backslash) of a Go-quoted literal of n bytes: appends its bytes to
 * o at *k and moves *i past it. 0, or PF_EINVAL naming the byte. */
static int unquote_escape(const char *s, size_t n, size_t *i, char *o, size_t *k)
{
    if (*i + 1 >= n) return pf_err_set(PF_EINVAL, "byte %zu: backslash at the end", *i);
    static const char simple[] = "a\ab\bf\fn\nr\rt\tv\v\\\\\"\"";
    char e = s[*i + 1];
    size_t start = *i;
    *i += 2;
    for (size_t j = 0; j + 1 < sizeof(simple); j += 2)
        if (simple[j] == e) {
            o[(*k)++] = simple[j + 1];
            return 0;
        }
    if (e == 'x' || e == 'u' || e == 'U') {
        size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t v = 0;
        for (size_t d = 0; d < digits; d++) {
            int h = *i + d < n ? hexval(s[*i + d]) : -1;
            if (h < 0)
                return pf_err_set(PF_EINVAL, "byte %zu: \\%c needs %zu hex digits", start, e,
                                  digits);
            v = v << 4 | (uint32_t)h;
        }
        *i += digits;
        if (e == 'x') {
            o[(*k)++] = (char)v;
            return 0;
        }
        if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
            return pf_err_set(PF_EINVAL, "byte %zu: \\%c%0*X is not a valid rune", start, e,
                              (int)digits, (unsigned)v);
        *k += utf8_put(o + *k, v);
        return 0;
    }
    if (e >= '0' && e <= '7') {
        /* strconv.Unquote accepts three octal digits (Quote never writes them) */
        unsigned v = 0;
        (*i)--;
        for (size_t d = 0; d < 3; d++) {
            char oc = *i + d < n ? s[*i + d] : 0;
            if (oc < '0' || oc > '7')
                return pf_err_set(PF_EINVAL, "byte %zu: octal escape needs 3 digits", start);
            v = v * 8 + (unsigned)(oc - '0');
        }
        *i += 3;
        if (v > 255) return pf_err_set(PF_EINVAL, "byte %zu: octal escape over \\377", start);
        o[(*k)++] = (char)v;
        return 0;
    }
    if ((unsigned char)e >= 0x20 && (unsigned char)e < 0x7f)
        return pf_err_set(PF_EINVAL, "byte %zu: unknown escape \\%c", start, e);
    return pf_err_set(PF_EINVAL, "byte %zu: unknown escape \\ followed by 0x%02x", start,
                      (unsigned char)e);
}

int pf_k8s_unquote(char **out, size_t *out_len, const char *s, size_t n)
{
    *out = NULL;
    if (out_len) *out_len = 0;
    if (n == 0 || s[0] != '"')
        return pf_err_set(PF_EINVAL, "value does not start with a double quote");
    /* the result is never longer than the literal */
    char *o = pf_xmalloc(n + 1);
    size_t k = 0, i = 1;
    int r;
    for (;;) {
        if (i >= n) {
            r = pf_err_set(PF_EINVAL, "no closing double quote");
            goto fail;
        }
        unsigned char c = (unsigned char)s[i];
        if (c == '"') {
            i++;
            break;
        }
        if (c == '\\') {
            if ((r = unquote_escape(s, n, &i, o, &k)) < 0) goto fail;
            continue;
        }
        if (c < 0x20 || c == 0x7f) {
            r = pf_err_set(PF_EINVAL, "byte %zu: raw control byte 0x%02x (Go quoting escapes it)",
                           i, c);
            goto fail;
        }
        if (c < 0x80) {
            o[k++] = (char)c;
            i++;
            continue;
        }
        size_t len = utf8_len((const unsigned char *)s + i, n - i);
        if (len == 0) {
            r = pf_err_set(PF_EINVAL, "byte %zu: invalid UTF-8 (Go quoting writes \\x%02x)", i, c);
            goto fail;
        }
        memcpy(o + k, s + i, len);
        k += len;
        i += len;
    }
    if (i != n) {
        r = pf_err_set(PF_EINVAL, "byte %zu: text after the closing quote", i);
        goto fail;
    }
    o[k] = '\0';
    *out = o;
    if (out_len) *out_len = k;
    return 0;
fail:
    free(o);
    return r;
}

/* ---------------------------------------------------------------- map files */

static int kv_cmp(const void *a, const void *b)
{
    const struct pf_k8s_kv *x = a, *y = b;
    return strcmp(x->key, y->key);
}

static bool valid_key(const char *s, size_t n)
{
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c == 0x7f || c == '"' || c == '\\') return false;
    }
    return true;
}

int pf_k8s_map_parse(struct pf_k8s_map *out, const char *name, const char *text, size_t len)
{
    memset(out, 0, sizeof(*out));
    size_t cap = 0, lineno = 0;
    const char *p = text, *end = text + len;
    int r = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        lineno++;
        size_t ll = (size_t)(le - p);
        if (ll == 0) {
            p = nl ? nl + 1 : end;
            continue;
        }
        const char *eq = memchr(p, '=', ll);
        if (!eq) {
            r = pf_err_set(PF_EINVAL, "%s:%zu: no '=' (want key=\"value\")", name, lineno);
            goto fail;
        }
        if (!valid_key(p, (size_t)(eq - p))) {
            r = pf_err_set(PF_EINVAL, "%s:%zu: empty or malformed key", name, lineno);
            goto fail;
        }
        if (out->n >= PF_K8S_MAX_ENTRIES) {
            r = pf_err_set(PF_EINVAL, "%s:%zu: more than %d entries", name, lineno,
                           PF_K8S_MAX_ENTRIES);
            goto fail;
        }
        char *value = NULL;
        size_t vlen = 0;
        if (pf_k8s_unquote(&value, &vlen, eq + 1, (size_t)(le - eq - 1)) < 0) {
            char why[256];
            snprintf(why, sizeof(why), "%s", pf_err_msg());
            r = pf_err_set(PF_EINVAL, "%s:%zu: %.*s: %s", name, lineno,
                           (int)((eq - p) > 200 ? 200 : (eq - p)), p, why);
            goto fail;
        }
        if (out->n == cap) {
            cap = cap ? cap * 2 : 16;
            out->v = pf_xrealloc(out->v, cap * sizeof(*out->v));
        }
        struct pf_k8s_kv *kv = &out->v[out->n++];
        kv->key = pf_xmalloc((size_t)(eq - p) + 1);
        memcpy(kv->key, p, (size_t)(eq - p));
        kv->key[eq - p] = '\0';
        kv->value = value;
        kv->value_len = vlen;
        p = nl ? nl + 1 : end;
    }
    if (out->n > 1) {
        qsort(out->v, out->n, sizeof(*out->v), kv_cmp);
        for (size_t i = 1; i < out->n; i++)
            if (strcmp(out->v[i - 1].key, out->v[i].key) == 0) {
                r = pf_err_set(PF_EINVAL, "%s: duplicate key %s", name, out->v[i].key);
                goto fail;
            }
    }
    return 0;
fail:
    pf_k8s_map_free(out);
    return r;
}

const struct pf_k8s_kv *pf_k8s_map_find(const struct pf_k8s_map *m, const char *key)
{
    if (m->n == 0) return NULL;
    struct pf_k8s_kv want = {.key = (char *)(uintptr_t)key};
    return bsearch(&want, m->v, m->n, sizeof(*m->v), kv_cmp);
}

const char *pf_k8s_map_get(const struct pf_k8s_map *m, const char *key)
{
    const struct pf_k8s_kv *kv = pf_k8s_map_find(m, key);
    return kv ? kv->value : NULL;
}

void pf_k8s_map_free(struct pf_k8s_map *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->v[i].key);
        free(m->v[i].value);
    }
    free(m->v);
    m->v = NULL;
    m->n = 0;
}

/* ---------------------------------------------------------------- network-status */

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i])) return false;
    return true;
}

struct jctx {
    size_t index;     /* element, 1-based */
    const char *name; /* its name, once known */
};

static int type_err(const struct jctx *j, const char *key, const char *want)
{
    if (j->name)
        return pf_err_set(PF_EINVAL, "network-status element %zu (%s): \"%s\" is not %s", j->index,
                          j->name, key, want);
    return pf_err_set(PF_EINVAL, "network-status element %zu: \"%s\" is not %s", j->index, key,
                      want);
}

/* An optional string member into *out (replacing what it held): "" when absent or null. */
static int get_str(char **out, const struct jctx *j, json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    free(*out);
    *out = pf_xstrdup(v && json_is_string(v) ? json_string_value(v) : "");
    if (v && !json_is_null(v) && !json_is_string(v)) return type_err(j, key, "a string");
    return 0;
}

static int get_strs(struct pf_strlist *out, const struct jctx *j, json_t *obj, const char *key,
                    bool strip_prefix_len)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_array(v)) return type_err(j, key, "a list of strings");
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e)
    {
        if (!json_is_string(e)) return type_err(j, key, "a list of strings");
        const char *s = json_string_value(e);
        const char *slash = strip_prefix_len ? strchr(s, '/') : NULL;
        if (slash)
            pf_strlist_addn(out, s, (size_t)(slash - s));
        else
            pf_strlist_add(out, s);
    }
    return 0;
}

static void network_free(struct pf_k8s_network *n)
{
    free(n->name);
    free(n->interface);
    pf_strlist_free(&n->ips);
    free(n->mac);
    pf_strlist_free(&n->gateway);
    pf_strlist_free(&n->dns_nameservers);
    free(n->di_type);
    free(n->di_version);
    free(n->pci_address);
    free(n->pf_pci_address);
    free(n->vhost_net);
    free(n->representor);
    pf_strlist_free(&n->rdma_devices);
}

static int parse_device_info(struct pf_k8s_network *n, const struct jctx *j, json_t *di)
{
    int r = 0;
    n->has_device_info = true;
    if (!json_is_object(di)) return type_err(j, "device-info", "an object");
    if ((r = get_str(&n->di_type, j, di, "type")) < 0) return r;
    if ((r = get_str(&n->di_version, j, di, "version")) < 0) return r;
    json_t *pci = json_object_get(di, "pci");
    if (!pci || json_is_null(pci)) return 0;
    if (!json_is_object(pci)) return type_err(j, "device-info.pci", "an object");
    if ((r = get_str(&n->pci_address, j, pci, "pci-address")) < 0 ||
        (r = get_str(&n->pf_pci_address, j, pci, "pf-pci-address")) < 0 ||
        (r = get_str(&n->vhost_net, j, pci, "vhost-net")) < 0 ||
        (r = get_str(&n->representor, j, pci, "representor-device")) < 0)
        return r;
    char *rdma = NULL;
    if ((r = get_str(&rdma, j, pci, "rdma-device")) < 0) {
        free(rdma);
        return r;
    }
    /* the SR-IOV device plugin joins every RDMA device of the function with commas */
    for (char *save = NULL, *t = strtok_r(rdma, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        pf_trim(t);
        if (*t && !pf_strlist_has(&n->rdma_devices, t)) pf_strlist_add(&n->rdma_devices, t);
    }
    free(rdma);
    return 0;
}

static int parse_network(struct pf_k8s_network *n, size_t index, json_t *el)
{
    struct jctx j = {.index = index};
    int r;
    memset(n, 0, sizeof(*n));
    /* every string member is non-NULL even on error, so that network_free is simple */
    n->name = pf_xstrdup("");
    n->interface = pf_xstrdup("");
    n->mac = pf_xstrdup("");
    n->di_type = pf_xstrdup("");
    n->di_version = pf_xstrdup("");
    n->pci_address = pf_xstrdup("");
    n->pf_pci_address = pf_xstrdup("");
    n->vhost_net = pf_xstrdup("");
    n->representor = pf_xstrdup("");
    if (!json_is_object(el))
        return pf_err_set(PF_EINVAL, "network-status element %zu is not an object", index);
    /* The name is the CNI config's own name for the default network, which may be empty
     * (a conflist without "name"); older Multus wrote it as it was. An empty or absent name
     * is kept as "", not a reason to reject the whole annotation. */
    json_t *name = json_object_get(el, "name");
    if (name && !json_is_null(name) && !json_is_string(name))
        return pf_err_set(PF_EINVAL, "network-status element %zu: \"name\" is not a string", index);
    free(n->name);
    n->name = pf_xstrdup(name && json_is_string(name) ? json_string_value(name) : "");
    j.name = n->name;
    if ((r = get_str(&n->interface, &j, el, "interface")) < 0 ||
        (r = get_str(&n->mac, &j, el, "mac")) < 0)
        return r;
    if ((r = get_strs(&n->ips, &j, el, "ips", true)) < 0 ||
        (r = get_strs(&n->gateway, &j, el, "gateway", false)) < 0)
        return r;
    json_t *mtu = json_object_get(el, "mtu");
    if (mtu && !json_is_null(mtu)) {
        if (!json_is_integer(mtu) || json_integer_value(mtu) < 0 ||
            json_integer_value(mtu) > 1 << 20)
            return type_err(&j, "mtu", "an MTU");
        n->mtu = (int)json_integer_value(mtu);
    }
    json_t *def = json_object_get(el, "default");
    if (def && !json_is_null(def)) {
        if (!json_is_boolean(def)) return type_err(&j, "default", "true or false");
        n->is_default = json_is_true(def);
    }
    json_t *dns = json_object_get(el, "dns");
    if (dns && !json_is_null(dns)) {
        if (!json_is_object(dns)) return type_err(&j, "dns", "an object");
        if ((r = get_strs(&n->dns_nameservers, &j, dns, "nameservers", false)) < 0) return r;
    }
    json_t *di = json_object_get(el, "device-info");
    if (di && !json_is_null(di)) return parse_device_info(n, &j, di);
    return 0;
}

int pf_k8s_netstatus_parse(struct pf_k8s_netstatus *out, const char *json, size_t len)
{
    memset(out, 0, sizeof(*out));
    if (blank(json, len)) return pf_err_set(PF_ENOENT, "network-status is empty");
    json_error_t err;
    json_t *root = json_loadb(json, len, 0, &err);
    if (!root)
        return pf_err_set(PF_EINVAL, "network-status is not JSON: %s (line %d, column %d)",
                          err.text, err.line, err.column);
    int r = 0;
    if (!json_is_array(root)) {
        r = pf_err_set(PF_EINVAL, "network-status is not a JSON list");
        goto out;
    }
    size_t n = json_array_size(root);
    if (n > PF_K8S_MAX_NETWORKS) {
        r = pf_err_set(PF_EINVAL, "network-status lists %zu networks (at most %d)", n,
                       PF_K8S_MAX_NETWORKS);
        goto out;
    }
    out->v = pf_xcalloc(n ? n : 1, sizeof(*out->v));
    for (size_t i = 0; i < n; i++) {
        out->n = i + 1;
        r = parse_network(&out->v[i], i + 1, json_array_get(root, i));
        if (r < 0) {
            pf_k8s_netstatus_free(out);
            goto out;
        }
    }
out:
    json_decref(root);
    return r;
}

const struct pf_k8s_network *pf_k8s_netstatus_default(const struct pf_k8s_netstatus *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].is_default) return &s->v[i];
    return NULL;
}

bool pf_k8s_network_is_cluster(const struct pf_k8s_netstatus *s, size_t i)
{
    if (i >= s->n) return false;
    if (pf_k8s_netstatus_default(s)) return s->v[i].is_default;
    return i == 0;
}

void pf_k8s_netstatus_free(struct pf_k8s_netstatus *s)
{
    for (size_t i = 0; i < s->n; i++)
        network_free(&s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

/* One requested network into out as "ns/name" (or the bare name). */
static int request_add(struct pf_strlist *out, const char *ns, size_t nslen, const char *name,
                       size_t namelen, const char *pod_ns, size_t index)
{
    while (nslen && isspace((unsigned char)*ns))
        ns++, nslen--;
    while (nslen && isspace((unsigned char)ns[nslen - 1]))
        nslen--;
    while (namelen && isspace((unsigned char)*name))
        name++, namelen--;
    while (namelen && isspace((unsigned char)name[namelen - 1]))
        namelen--;
    if (namelen == 0 || namelen > 253 || nslen > 63)
        return pf_err_set(PF_EINVAL, "networks request element %zu has no name or one too long",
                          index);
    for (size_t i = 0; i < namelen; i++)
        if (name[i] == '/' || name[i] == '@' || iscntrl((unsigned char)name[i]))
            return pf_err_set(PF_EINVAL, "networks request element %zu: \"%.*s\" is not a name",
                              index, (int)(namelen > 80 ? 80 : namelen), name);
    for (size_t i = 0; i < nslen; i++)
        if (ns[i] == '/' || ns[i] == '@' || iscntrl((unsigned char)ns[i]))
            return pf_err_set(PF_EINVAL,
                              "networks request element %zu: \"%.*s\" is not a namespace", index,
                              (int)nslen, ns);
    char buf[330];
    if (nslen == 0 && pod_ns && *pod_ns)
        ns = pod_ns, nslen = strlen(pod_ns) > 63 ? 63 : strlen(pod_ns);
    if (nslen)
        snprintf(buf, sizeof(buf), "%.*s/%.*s", (int)nslen, ns, (int)namelen, name);
    else
        snprintf(buf, sizeof(buf), "%.*s", (int)namelen, name);
    if (!pf_strlist_has(out, buf)) pf_strlist_add(out, buf);
    return 0;
}

int pf_k8s_network_requests_parse(struct pf_strlist *out, const char *text, size_t len,
                                  const char *pod_ns)
{
    memset(out, 0, sizeof(*out));
    int r = 0;
    if (memchr(text, '[', len) || memchr(text, '{', len) || memchr(text, '"', len)) {
        json_error_t err;
        json_t *root = json_loadb(text, len, 0, &err);
        if (!root)
            return pf_err_set(PF_EINVAL, "networks request is not JSON: %s (line %d, column %d)",
                              err.text, err.line, err.column);
        if (!json_is_array(root) || json_array_size(root) > PF_K8S_MAX_NETWORKS) {
            r = pf_err_set(PF_EINVAL, "networks request is not a JSON list of at most %d",
                           PF_K8S_MAX_NETWORKS);
        }
        for (size_t i = 0; r == 0 && i < json_array_size(root); i++) {
            json_t *e = json_array_get(root, i);
            json_t *n = json_is_object(e) ? json_object_get(e, "name") : NULL;
            json_t *ns = json_is_object(e) ? json_object_get(e, "namespace") : NULL;
            if (!n || !json_is_string(n) || (ns && !json_is_null(ns) && !json_is_string(ns))) {
                r = pf_err_set(PF_EINVAL, "networks request element %zu has no string name", i);
                break;
            }
            const char *nss = ns && json_is_string(ns) ? json_string_value(ns) : "";
            r = request_add(out, nss, strlen(nss), json_string_value(n),
                            strlen(json_string_value(n)), pod_ns, i);
        }
        json_decref(root);
    } else {
        size_t index = 0;
        for (size_t i = 0; r == 0 && i <= len; index++) {
            const char *item = text + i;
            const char *comma = memchr(item, ',', len - i);
            size_t ilen = comma ? (size_t)(comma - item) : len - i;
            i += ilen + 1;
            if (blank(item, ilen)) {
                if (!comma && index == 0) break; /* all blank */
                r = pf_err_set(PF_EINVAL, "networks request element %zu is empty", index);
                break;
            }
            if (index >= PF_K8S_MAX_NETWORKS) {
                r = pf_err_set(PF_EINVAL, "networks request lists more than %d networks",
                               PF_K8S_MAX_NETWORKS);
                break;
            }
            const char *slash = memchr(item, '/', ilen);
            const char *name = slash ? slash + 1 : item;
            size_t nlen = ilen - (size_t)(name - item);
            const char *at = memchr(name, '@', nlen);
            if (at) nlen = (size_t)(at - name);
            r = request_add(out, item, slash ? (size_t)(slash - item) : 0, name, nlen, pod_ns,
                            index);
            if (!comma) break;
        }
    }
    if (r < 0) pf_strlist_free(out);
    return r;
}

bool pf_k8s_network_name_match(const char *expected, const char *status_name)
{
    if (strcmp(expected, status_name) == 0) return true;
    const char *es = strchr(expected, '/');
    const char *ss = strchr(status_name, '/');
    /* old Multus wrote bare names: "ml/sriov-a" is attached as "sriov-a" */
    if (es && !ss) return strcmp(es + 1, status_name) == 0;
    /* a bare expectation matches the name in any namespace */
    if (!es && ss) return strcmp(expected, ss + 1) == 0;
    return false;
}

/* ---------------------------------------------------------------- podinfo */

static void read_small(char **out, const struct pf_host *h, const char *dir, const char *file)
{
    char buf[512];
    if (pf_host_read(buf, sizeof(buf), h, "%s/%s", dir, file) >= 0 && *pf_trim(buf))
        *out = pf_xstrdup(buf);
}

static int read_map(struct pf_k8s_map *m, bool *have, const struct pf_host *h, const char *dir,
                    const char *file)
{
    char *text = NULL;
    size_t len = 0;
    int r = pf_host_read_all(&text, &len, PF_K8S_FILE_MAX, h, "%s/%s", dir, file);
    if (r == PF_ENOENT) {
        pf_err_clear();
        return 0;
    }
    if (r < 0) return r;
    char name[PF_HOST_PATH_MAX + 64];
    snprintf(name, sizeof(name), "%s/%s", dir, file);
    r = pf_k8s_map_parse(m, name, text, len);
    free(text);
    *have = r == 0;
    return r;
}

/* Takes value as the network-status when it is not blank; notes an empty one. */
static void take_status(struct pf_k8s_podinfo *p, const char *value, const char *what,
                        const char *where)
{
    if (p->netstatus || !value) return;
    if (blank(value, strlen(value))) {
        p->netstatus_empty = true;
        return;
    }
    p->netstatus = pf_xstrdup(value);
    snprintf(p->netstatus_source, sizeof(p->netstatus_source), "%s%s%s", what, where ? " in " : "",
             where ? where : "");
}

const char *pf_k8s_podinfo_dir(const struct pf_env *env)
{
    const char *d = pf_env_get(env, "PREFLIGHT_PODINFO");
    return d && *d ? d : PF_K8S_PODINFO_DEFAULT;
}

int pf_k8s_podinfo_read_env(struct pf_k8s_podinfo *out, const struct pf_host *h,
                            const struct pf_env *env)
{
    static const char *const names[] = {"PREFLIGHT_NETWORK_STATUS", "NETWORK_STATUS"};
    const char *var = NULL, *val = NULL;
    for (size_t i = 0; i < PF_ARRAY_LEN(names) && !val; i++)
        if ((val = pf_env_get(env, names[i]))) var = names[i];
    return pf_k8s_podinfo_read(out, h, pf_k8s_podinfo_dir(env), var, val);
}

int pf_k8s_podinfo_read(struct pf_k8s_podinfo *out, const struct pf_host *h, const char *dir,
                        const char *env_name, const char *env_value)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->dir, sizeof(out->dir), "%s", dir && *dir ? dir : PF_K8S_PODINFO_DEFAULT);
    size_t dl = strlen(out->dir);
    while (dl > 1 && out->dir[dl - 1] == '/')
        out->dir[--dl] = '\0';
    int r = read_map(&out->annotations, &out->have_annotations, h, out->dir, "annotations");
    char first_err[512] = "";
    if (r < 0) snprintf(first_err, sizeof(first_err), "%s", pf_err_msg());
    int r2 = read_map(&out->labels, &out->have_labels, h, out->dir, "labels");
    if (r2 < 0 && r == 0) {
        r = r2;
        snprintf(first_err, sizeof(first_err), "%s", pf_err_msg());
    }
    read_small(&out->name, h, out->dir, "name");
    read_small(&out->namespace_, h, out->dir, "namespace");
    read_small(&out->uid, h, out->dir, "uid");

    char where[PF_HOST_PATH_MAX + 16];
    snprintf(where, sizeof(where), "%s/annotations", out->dir);
    take_status(out, pf_k8s_map_get(&out->annotations, PF_K8S_NETSTATUS_ANNOT),
                "annotation " PF_K8S_NETSTATUS_ANNOT, where);
    take_status(out, pf_k8s_map_get(&out->annotations, PF_K8S_NETSTATUS_ANNOT_OLD),
                "annotation " PF_K8S_NETSTATUS_ANNOT_OLD, where);
    char var[128];
    snprintf(var, sizeof(var), "variable %s", env_name ? env_name : "?");
    take_status(out, env_value, var, NULL);
    const char *req = pf_k8s_map_get(&out->annotations, PF_K8S_NETWORKS_ANNOT);
    out->networks_requested = req && !blank(req, strlen(req));
    if (r < 0) return pf_err_set(r, "%s", first_err);
    return 0;
}

void pf_k8s_podinfo_free(struct pf_k8s_podinfo *p)
{
    pf_k8s_map_free(&p->annotations);
    pf_k8s_map_free(&p->labels);
    free(p->netstatus);
    free(p->name);
    free(p->namespace_);
    free(p->uid);
    memset(p, 0, sizeof(*p));
}

void pf_k8s_podinfo_record(const struct pf_k8s_podinfo *p, struct pf_node *pod)
{
    static const char *const keep[] = {
        "batch.kubernetes.io/job-name",        "batch.kubernetes.io/job-completion-index",
        "jobset.sigs.k8s.io/jobset-name",      "jobset.sigs.k8s.io/replicatedjob-name",
        "jobset.sigs.k8s.io/job-index",        "jobset.sigs.k8s.io/job-global-index",
        "statefulset.kubernetes.io/pod-name",  "apps.kubernetes.io/pod-index",
        "training.kubeflow.org/job-name",      "training.kubeflow.org/replica-type",
        "training.kubeflow.org/replica-index", "app.kubernetes.io/name",
        "app.kubernetes.io/instance",
    };
    if (p->name && !pf_node_get(pod, "name")) pf_node_set_str(pod, "name", p->name);
    if (p->namespace_ && !pf_node_get(pod, "namespace"))
        pf_node_set_str(pod, "namespace", p->namespace_);
    if (p->uid && !pf_node_get(pod, "uid")) pf_node_set_str(pod, "uid", p->uid);
    struct pf_node *labels = NULL;
    for (size_t i = 0; i < PF_ARRAY_LEN(keep); i++) {
        const char *v = pf_k8s_map_get(&p->labels, keep[i]);
        if (!v) continue;
        if (!labels) {
            labels = pf_node_get(pod, "labels");
            if (!labels)
                labels = pf_node_set_map(pod, "labels");
            else if (labels->kind != PF_NODE_MAP)
                return;
        }
        if (!pf_node_get(labels, keep[i])) pf_node_set_str(labels, keep[i], v);
    }
}

/* ---------------------------------------------------------------- SR-IOV device plugin */

int pf_k8s_pcidevice_var(char *out, size_t n, const char *resource)
{
    const char *slash = strchr(resource, '/');
    if (!slash || slash == resource || !slash[1] || strchr(slash + 1, '/'))
        return pf_err_set(PF_EINVAL, "resource %s is not prefix/name", resource);
    int r = pf_snprintf(out, n, "PCIDEVICE_%.*s_%s", (int)(slash - resource), resource, slash + 1);
    if (r < 0) return pf_err_set(r, "resource name %s is too long", resource);
    for (char *c = out; *c; c++)
        *c = *c == '.' ? '_' : (char)toupper((unsigned char)*c);
    return 0;
}

int pf_k8s_bdf_parse(char out[PF_K8S_BDF_MAX], const char *s)
{
    /* dddd:bb:dd.f */
    static const char shape[] = "hhhh:hh:hh.o";
    size_t i;
    for (i = 0; shape[i]; i++) {
        char c = s[i];
        if (shape[i] == 'h'   ? hexval(c) < 0
            : shape[i] == 'o' ? (c < '0' || c > '7')
                              : c != shape[i])
            return pf_err_set(PF_EINVAL, "%.40s is not a PCI address (dddd:bb:dd.f)", s);
        out[i] = (char)tolower((unsigned char)c);
    }
    if (s[i] != '\0') return pf_err_set(PF_EINVAL, "%.40s is not a PCI address (dddd:bb:dd.f)", s);
    out[i] = '\0';
    if (hexval(out[8]) * 16 + hexval(out[9]) > 0x1f)
        return pf_err_set(PF_EINVAL, "%s: device number over 1f", out);
    return 0;
}

int pf_k8s_pciinfo_parse(struct pf_k8s_pciinfo *out, const char *json, size_t len)
{
    memset(out, 0, sizeof(*out));
    json_error_t err;
    json_t *root = json_loadb(json, len, 0, &err);
    if (!root)
        return pf_err_set(PF_EINVAL, "not JSON: %s (line %d, column %d)", err.text, err.line,
                          err.column);
    int r = 0;
    if (!json_is_object(root)) {
        r = pf_err_set(PF_EINVAL, "not a JSON object of devices");
        goto out;
    }
    size_t n = json_object_size(root);
    if (n > PF_K8S_MAX_NETWORKS) {
        r = pf_err_set(PF_EINVAL, "%zu devices (at most %d)", n, PF_K8S_MAX_NETWORKS);
        goto out;
    }
    out->v = pf_xcalloc(n ? n : 1, sizeof(*out->v));
    const char *key;
    json_t *dev;
    json_object_foreach(root, key, dev)
    {
        if (!json_is_object(dev)) {
            r = pf_err_set(PF_EINVAL, "device %.64s is not an object", key);
            goto fail;
        }
        struct pf_k8s_pciinfo_dev *d = &out->v[out->n++];
        char bdf[PF_K8S_BDF_MAX];
        if (pf_k8s_bdf_parse(bdf, key) == 0)
            snprintf(d->device, sizeof(d->device), "%s", bdf);
        else if (pf_snprintf(d->device, sizeof(d->device), "%s", key) < 0 || !*key) {
            r = pf_err_set(PF_EINVAL, "device name %.64s is empty or too long", key);
            goto fail;
        }
        pf_err_clear();
        json_t *rdma = json_object_get(dev, "rdma");
        if (!rdma || json_is_null(rdma)) continue;
        if (!json_is_object(rdma)) {
            r = pf_err_set(PF_EINVAL, "device %s: \"rdma\" is not an object", d->device);
            goto fail;
        }
        d->rdma = true;
        json_t *v = json_object_get(rdma, "rdma_dev");
        if (json_is_string(v))
            snprintf(d->rdma_dev, sizeof(d->rdma_dev), "%s", json_string_value(v));
        v = json_object_get(rdma, "uverbs");
        if (json_is_string(v)) snprintf(d->uverbs, sizeof(d->uverbs), "%s", json_string_value(v));
    }
    goto out;
fail:
    pf_k8s_pciinfo_free(out);
out:
    json_decref(root);
    return r;
}

void pf_k8s_pciinfo_free(struct pf_k8s_pciinfo *p)
{
    free(p->v);
    p->v = NULL;
    p->n = 0;
}
