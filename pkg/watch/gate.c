/* The gate's verdict (preflight/v1, docs/verdict.md) as `preflight run` writes it: what it
 * measured of this pod's NCCL. Read with libyaml; the file lies in a folder the trainer can
 * write, so it is outside input: bounded in size, depth and aliases, every field optional. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "internal.h"

#define GATE_DEPTH_MAX 64

/* A pass over the events first: deeper nesting or an alias refuse the file (a verdict has
 * neither; both make loading a document slow or large). */
static int shape(const char *text, size_t len, char *why, size_t wn)
{
    yaml_parser_t ps;
    if (!yaml_parser_initialize(&ps)) return snprintf(why, wn, "libyaml: no parser"), -1;
    yaml_parser_set_input_string(&ps, (const unsigned char *)text, len);
    int depth = 0, r = 0;
    for (bool done = false; !done && r == 0;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&ps, &ev)) {
            snprintf(why, wn, "not YAML (line %zu: %s)", ps.problem_mark.line + 1,
                     ps.problem ? ps.problem : "syntax error");
            r = -1;
            break;
        }
        if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
            if (++depth > GATE_DEPTH_MAX) snprintf(why, wn, "nested deeper than a verdict"), r = -1;
        } else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
            depth--;
        } else if (ev.type == YAML_ALIAS_EVENT) {
            snprintf(why, wn, "has a YAML alias (a verdict has none)");
            r = -1;
        } else if (ev.type == YAML_STREAM_END_EVENT) {
            done = true;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&ps);
    return r;
}

static yaml_node_t *get(yaml_document_t *d, yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE) return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(d, p->key);
        if (k && k->type == YAML_SCALAR_NODE && strlen(key) == k->data.scalar.length &&
            memcmp(k->data.scalar.value, key, k->data.scalar.length) == 0)
            return yaml_document_get_node(d, p->value);
    }
    return NULL;
}

/* The scalar at key copied into out ("" when absent or not a scalar). */
static bool scalar(char *out, size_t n, yaml_document_t *d, yaml_node_t *map, const char *key)
{
    yaml_node_t *v = get(d, map, key);
    out[0] = '\0';
    if (!v || v->type != YAML_SCALAR_NODE) return false;
    size_t l = v->data.scalar.length < n - 1 ? v->data.scalar.length : n - 1;
    memcpy(out, v->data.scalar.value, l);
    out[l] = '\0';
    /* one token: the verdict writes versions and network names without blanks or controls */
    for (size_t i = 0; i < l; i++)
        if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f) out[i] = '?';
    return true;
}

static int count_seq(yaml_node_t *v)
{
    if (!v || v->type != YAML_SEQUENCE_NODE) return -1;
    return (int)(v->data.sequence.items.top - v->data.sequence.items.start);
}

int pf_watch_gate_parse(struct pf_watch_gate *g, const char *name, const char *text, size_t len)
{
    memset(g, 0, sizeof(*g));
    g->hcas = g->gdr = -1;
    char why[200] = "";
    if (shape(text, len, why, sizeof(why)) < 0) {
        snprintf(g->error, sizeof(g->error), "%s", why);
        return pf_err_set(PF_EUSAGE, "watch: the gate's verdict %s: %s", name, why);
    }
    yaml_parser_t ps;
    yaml_document_t d;
    if (!yaml_parser_initialize(&ps)) return pf_err_set(PF_ERR, "libyaml: no parser");
    yaml_parser_set_input_string(&ps, (const unsigned char *)text, len);
    int r = 0;
    if (!yaml_parser_load(&ps, &d)) {
        yaml_parser_delete(&ps);
        snprintf(g->error, sizeof(g->error), "not YAML");
        return pf_err_set(PF_EUSAGE, "watch: the gate's verdict %s: not YAML", name);
    }
    yaml_node_t *root = yaml_document_get_root_node(&d);
    char api[32], kind[32];
    scalar(api, sizeof(api), &d, root, "apiVersion");
    scalar(kind, sizeof(kind), &d, root, "kind");
    if (strcmp(api, "preflight/v1") != 0 || strcmp(kind, "Verdict") != 0) {
        snprintf(g->error, sizeof(g->error),
                 "not a preflight verdict (apiVersion \"%s\", kind "
                 "\"%s\")",
                 api, kind);
        r = pf_err_set(PF_EUSAGE, "watch: %s: %s", name, g->error);
        goto out;
    }
    g->found = true;
    scalar(g->verdict, sizeof(g->verdict), &d, root, "verdict");
    yaml_node_t *env = get(&d, root, "environment");
    scalar(g->version, sizeof(g->version), &d, env, "ncclVersion");
    scalar(g->network, sizeof(g->network), &d, env, "ncclNetwork");
    yaml_node_t *checks = get(&d, root, "checks");
    if (checks && checks->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = checks->data.sequence.items.start;
             it < checks->data.sequence.items.top; it++) {
            yaml_node_t *c = yaml_document_get_node(&d, *it);
            char id[64];
            if (!scalar(id, sizeof(id), &d, c, "id") || strcmp(id, "collective.nccl") != 0)
                continue;
            yaml_node_t *ev = get(&d, c, "evidence");
            if (!g->network[0]) {
                char t[32];
                if (scalar(t, sizeof(t), &d, ev, "transport") && strcmp(t, "unknown") != 0)
                    snprintf(g->network, sizeof(g->network), "%s", t);
            }
            int h = count_seq(get(&d, ev, "hcas"));
            if (h >= 0) g->hcas = h;
        }
    }
    yaml_node_t *colls = get(&d, root, "collectives");
    if (colls && colls->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = colls->data.sequence.items.start;
             it < colls->data.sequence.items.top; it++) {
            yaml_node_t *c = yaml_document_get_node(&d, *it);
            char backend[16], gdr[16];
            if (!scalar(backend, sizeof(backend), &d, c, "backend") || strcmp(backend, "nccl"))
                continue;
            if (!scalar(gdr, sizeof(gdr), &d, c, "gpuDirectRdma")) continue;
            if (strcmp(gdr, "true") == 0)
                g->gdr = 1;
            else if (strcmp(gdr, "false") == 0 && g->gdr < 0)
                g->gdr = 0;
        }
    }
out:
    yaml_document_delete(&d);
    yaml_parser_delete(&ps);
    return r;
}

int pf_watch_gate_load(struct pf_watch_gate *g, const char *path)
{
    memset(g, 0, sizeof(*g));
    g->hcas = g->gdr = -1;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e != ENOENT) snprintf(g->error, sizeof(g->error), "cannot read: %s", strerror(e));
        return pf_err_set(e == ENOENT ? PF_ENOENT : PF_EUSAGE, "watch: cannot read %s: %s", path,
                          strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)PF_WATCH_GATE_MAX) {
        close(fd);
        snprintf(g->error, sizeof(g->error), "not a regular file of at most %u bytes",
                 PF_WATCH_GATE_MAX);
        return pf_err_set(PF_EUSAGE, "watch: %s: %s", path, g->error);
    }
    char *buf = pf_xmalloc((size_t)st.st_size + 1);
    size_t have = 0;
    while (have < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + have, (size_t)st.st_size - have);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        have += (size_t)n;
    }
    close(fd);
    int r = pf_watch_gate_parse(g, path, buf, have);
    free(buf);
    return r;
}

void pf_watch_gate_refresh(struct pf_watch *w)
{
    w->gate_checked = pf_now();
    if (w->gate.found) return;
    struct pf_watch_gate g;
    (void)pf_watch_gate_load(&g, w->gate_path);
    w->gate = g;
    if (g.found)
        for (size_t i = 0; i < w->log.n; i++)
            pf_watch_judge_proc(w, i);
}
