/* The HCAs the RDMA checks share (rdma_hca.h): each one of the pod's RDMA devices, its provider
 * read from sysfs, the uverbsN that /sys/class/infiniband_verbs maps it to, and whether that
 * device node is in the pod (opened read-write and closed again when asked: only uverbsN nodes
 * are ever opened, never umadN and never issmN, whose opening sets the port's IsSM bit). */
#define _GNU_SOURCE
#include "rdma_hca.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool pf_rdma_expect_none(const struct pf_ctx *ctx)
{
    return ctx->config && ctx->config->expect_rdma == PF_RDMA_NONE;
}

static const char *errno_name(int e)
{
    switch (e) {
    case ENXIO:
        return "ENXIO";
    case ENODEV:
        return "ENODEV";
    case EACCES:
        return "EACCES";
    case EPERM:
        return "EPERM";
    case ENOENT:
        return "ENOENT";
    case EBUSY:
        return "EBUSY";
    case EIO:
        return "EIO";
    case EINVAL:
        return "EINVAL";
    case EISDIR:
        return "EISDIR";
    default:
        return "errno";
    }
}

/* Opens a uverbs node read-write and closes it again; 0, or the errno. */
static int probe_open(struct hca *hc, const struct pf_host *h)
{
    char path[PF_HOST_PATH_MAX];
    if (pf_host_path(path, sizeof(path), h, DEV_IB "/%s", hc->uverbs) < 0) {
        snprintf(hc->why, sizeof(hc->why), "%s", pf_err_msg());
        return EINVAL;
    }
    struct stat st;
    if (stat(path, &st) != 0) return errno;
    /* a regular file only stands in for a node in trees made without root */
    if (!S_ISCHR(st.st_mode) && !S_ISREG(st.st_mode)) {
        snprintf(hc->why, sizeof(hc->why), DEV_IB "/%s is not a character device", hc->uverbs);
        return ENODEV;
    }
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        const char *hint = "";
        if (e == ENXIO || e == ENODEV)
            hint = ": no driver behind it (the node's major:minor is not a loaded uverbs device)";
        else if (e == EACCES || e == EPERM)
            hint = ": not allowed (the container's device cgroup or the node's mode forbids it)";
        snprintf(hc->why, sizeof(hc->why), "open(" DEV_IB "/%s, O_RDWR) failed with %s (%s)%s",
                 hc->uverbs, errno_name(e), strerror(e), hint);
        return e;
    }
    close(fd);
    return 0;
}

/* Lists the HCAs of ctx, maps each to its uverbsN through sysfs, and looks for its node
 * (opening it when open_nodes). */
void pf_rdma_hca_scan(struct hca_set *s, struct pf_ctx *ctx, bool open_nodes)
{
    const struct pf_host *h = &ctx->host;
    memset(s, 0, sizeof(*s));
    s->n = ctx->hcas.n;
    s->v = s->n ? pf_xcalloc(s->n, sizeof(*s->v)) : NULL;
    struct stat st;
    s->dev_dir = pf_host_stat(&st, h, DEV_IB) == 0 && S_ISDIR(st.st_mode);

    struct pf_strlist verbs = {0};
    (void)pf_host_list(&verbs, h, SYS_VERBS);
    char unreadable[160] = "";
    for (size_t i = 0; i < s->n; i++) {
        snprintf(s->v[i].name, sizeof(s->v[i].name), "%s", ctx->hcas.v[i]);
        pf_rdma_identify(&s->v[i].id, h, s->v[i].name);
    }
    for (size_t j = 0; j < verbs.n; j++) {
        if (strncmp(verbs.v[j], "uverbs", 6) != 0) continue; /* abi_version */
        char ibdev[128];
        if (pf_host_read(ibdev, sizeof(ibdev), h, SYS_VERBS "/%s/ibdev", verbs.v[j]) <= 0) {
            if (!unreadable[0])
                snprintf(unreadable, sizeof(unreadable), SYS_VERBS "/%s/ibdev is %s", verbs.v[j],
                         pf_host_exists(h, SYS_VERBS "/%s/ibdev", verbs.v[j])
                             ? "empty or unreadable"
                             : "missing");
            continue;
        }
        pf_trim(ibdev);
        for (size_t i = 0; i < s->n; i++)
            if (strcmp(s->v[i].name, ibdev) == 0 && !s->v[i].uverbs[0])
                snprintf(s->v[i].uverbs, sizeof(s->v[i].uverbs), "%s", verbs.v[j]);
    }
    pf_strlist_free(&verbs);

    for (size_t i = 0; i < s->n; i++) {
        struct hca *hc = &s->v[i];
        if (!hc->uverbs[0]) {
            hc->node = NODE_NO_UVERBS;
            hc->ibdev_unread = unreadable[0] != '\0';
            snprintf(hc->why, sizeof(hc->why), "no " SYS_VERBS "/uverbsN/ibdev names %s%s%s",
                     hc->name, unreadable[0] ? "; " : " (is ib_uverbs loaded on the node?)",
                     unreadable);
            continue;
        }
        if (!pf_host_exists(h, DEV_IB "/%s", hc->uverbs)) {
            hc->node = NODE_MISSING;
            continue;
        }
        if (!open_nodes) {
            hc->node = NODE_PRESENT;
            continue;
        }
        int e = probe_open(hc, h);
        hc->node = e == 0 ? NODE_OPENABLE : e == ENOENT ? NODE_MISSING : NODE_UNOPENABLE;
    }
}

void pf_rdma_hca_set_free(struct hca_set *s)
{
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

/* the pod was given it: its uverbs node is in the pod */
bool pf_rdma_hca_in_pod(const struct hca *h)
{
    return h->node == NODE_PRESENT || h->node == NODE_OPENABLE || h->node == NODE_UNOPENABLE;
}
/* in the pod, or cannot tell (no uverbs mapping in sysfs) */
bool pf_rdma_hca_in_scope(const struct hca *h)
{
    return h->node != NODE_MISSING;
}

/* How many HCAs of s pass. */
size_t pf_rdma_hca_count(const struct hca_set *s, bool (*pass)(const struct hca *))
{
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        n += pass(&s->v[i]);
    return n;
}
