/* What the identity rules read besides the environment: the host name, its FQDN (only when the
 * answer depends on it: a lookup), the downward-API labels and annotations, and Volcano's
 * hostfiles; all files under the root prefix. The rules themselves are pkg/rendezvous's
 * pf_identity_derive_pod; the meeting takes the identity found here (struct pf_rdv_setup). */
#define _GNU_SOURCE
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"

#include "../k8s/k8s.h"

static void canonical_name(const char *host, char *out, size_t n)
{
    out[0] = '\0';
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_flags = AI_CANONNAME;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, NULL, &hints, &res) == 0 && res) {
        if (res->ai_canonname) pf_strcpy(out, n, res->ai_canonname);
        freeaddrinfo(res);
    }
}

/* A downward-API map file; false when it is not there. A malformed file is an error. */
static int read_map(struct pf_k8s_map *out, bool *have, struct pf_ctx *ctx, const char *dir,
                    const char *name)
{
    *have = false;
    char *text = NULL;
    size_t len = 0;
    if (pf_host_read_all(&text, &len, PF_K8S_FILE_MAX, &ctx->host, "%s/%s", dir, name) < 0)
        return 0;
    char what[512];
    snprintf(what, sizeof(what), "%s/%s", dir, name);
    int r = pf_k8s_map_parse(out, what, text, len);
    free(text);
    if (r < 0) return pf_err_set(PF_EUSAGE, "%s", pf_err_msg());
    *have = true;
    return 0;
}

/* /etc/volcano/<task>.host files as task -> text */
static void read_volcano(struct pf_k8s_map *out, struct pf_ctx *ctx)
{
    struct pf_strlist names = {0};
    if (pf_host_list(&names, &ctx->host, "/etc/volcano") < 0) return;
    for (size_t i = 0; i < names.n && out->n < 64; i++) {
        size_t l = strlen(names.v[i]);
        if (l <= 5 || strcmp(names.v[i] + l - 5, ".host") != 0) continue;
        char *text = NULL;
        if (pf_host_read_all(&text, NULL, 1 << 20, &ctx->host, "/etc/volcano/%s", names.v[i]) < 0)
            continue;
        out->v = pf_xrealloc(out->v, (out->n + 1) * sizeof(*out->v));
        struct pf_k8s_kv *kv = &out->v[out->n++];
        kv->key = pf_xstrdup(names.v[i]);
        kv->key[l - 5] = '\0';
        kv->value = text;
        kv->value_len = strlen(text);
    }
    pf_strlist_free(&names);
}

int pf_run_whoami(struct pf_identity *out, const struct pf_identity_opts *o, struct pf_ctx *ctx,
                  int default_port)
{
    char host[256] = "", fqdn[512] = "";
    if (gethostname(host, sizeof(host)) != 0) host[0] = '\0';
    host[sizeof(host) - 1] = '\0';
    const char *dir = pf_k8s_podinfo_dir(&ctx->env);
    struct pf_k8s_map labels = {0}, annotations = {0}, volcano = {0};
    bool have_l, have_a;
    int r = read_map(&labels, &have_l, ctx, dir, "labels");
    if (r == 0) r = read_map(&annotations, &have_a, ctx, dir, "annotations");
    if (r < 0) goto out;
    read_volcano(&volcano, ctx);
    struct pf_identity_podinfo pi = {.hostname = host,
                                     .fqdn = NULL,
                                     .labels = have_l ? &labels : NULL,
                                     .annotations = have_a ? &annotations : NULL,
                                     .volcano_hosts = volcano.n ? &volcano : NULL};
    r = pf_identity_derive_pod(out, o, &ctx->env, &pi, default_port);
    if (out->wants_fqdn) { /* the answer depends on the subdomain: look it up */
        canonical_name(host, fqdn, sizeof(fqdn));
        pi.fqdn = fqdn;
        if (fqdn[0]) r = pf_identity_derive_pod(out, o, &ctx->env, &pi, default_port);
    }
out:
    pf_k8s_map_free(&labels);
    pf_k8s_map_free(&annotations);
    pf_k8s_map_free(&volcano);
    return r;
}

void pf_run_ident_evidence(struct pf_node *map, const struct pf_identity *id)
{
    pf_node_set_str(map, "rule", id->rule);
    if (id->member) {
        pf_node_set_int(map, "rank", id->rank);
        pf_node_set_int(map, "worldSize", id->world_size);
        if (id->coordinator[0]) pf_node_set_str(map, "coordinator", id->coordinator);
    } else {
        pf_node_set_bool(map, "member", false);
    }
    if (id->explain[0]) pf_node_set_str(map, "explain", id->explain);
    /* the job its JOIN names (rank 0 refuses another job's pod), or why it is unknown */
    char job[PF_WIRE_JOB_MAX];
    pf_identity_job_text(job, sizeof(job), &id->job);
    pf_node_set_str(map, "job", job);
    pf_node_set_str(map, "jobFrom",
                    id->job.from[0] ? id->job.from
                                    : "none of PREFLIGHT_JOB or a launcher's job "
                                      "labels (podinfo) is there");
    struct pf_node *f = pf_node_set_seq(map, "from");
    for (int i = 0; i < id->nfrom; i++)
        pf_node_add_str(f, id->from[i]);
}
