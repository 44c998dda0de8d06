/* gpu.devices: the NVIDIA GPUs this pod can use. The driver lists every GPU it manages under
 * /proc/driver/nvidia/gpus/<busid>/information; the pod can open only the /dev/nvidiaN nodes
 * its runtime put in it (N is the GPU's "Device Minor"). */
#define _GNU_SOURCE
#include "checks.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GPU_INFO_MAX (64 * 1024)

struct gpu {
    char bus_id[64]; /* the folder name under /proc/driver/nvidia/gpus */
    char model[128];
    char uuid[96];
    char location[64]; /* "Bus Location" */
    int minor;         /* "Device Minor"; -1 when missing or not a number */
    char problem[160]; /* why the information file could not be used; "" when fine */
    bool has_node;     /* /dev/nvidia<minor> is in the pod */
};

/* Copies the value of a "Key: \t value" line, trimmed. */
static void info_value(char *out, size_t n, const char *line, size_t keylen)
{
    snprintf(out, n, "%s", line + keylen);
    pf_trim(out);
}

static void gpu_parse_info(struct gpu *g, const struct pf_host *h)
{
    char *info = NULL;
    g->minor = -1;
    if (pf_host_read_all(&info, NULL, GPU_INFO_MAX, h, "/proc/driver/nvidia/gpus/%s/information",
                         g->bus_id) < 0) {
        snprintf(g->problem, sizeof(g->problem), "%s", pf_err_msg());
        return;
    }
    char minor[32] = "";
    bool have_minor = false;
    char *save = NULL;
    for (char *line = strtok_r(info, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "Model:", 6) == 0)
            info_value(g->model, sizeof(g->model), line, 6);
        else if (strncmp(line, "GPU UUID:", 9) == 0)
            info_value(g->uuid, sizeof(g->uuid), line, 9);
        else if (strncmp(line, "Bus Location:", 13) == 0)
            info_value(g->location, sizeof(g->location), line, 13);
        else if (strncmp(line, "Device Minor:", 13) == 0) {
            info_value(minor, sizeof(minor), line, 13);
            have_minor = true;
        }
    }
    free(info);
    if (!have_minor) {
        snprintf(g->problem, sizeof(g->problem),
                 "/proc/driver/nvidia/gpus/%s/information has no \"Device Minor\" line", g->bus_id);
        return;
    }
    char *end = NULL;
    long v = strtol(minor, &end, 10);
    if (minor[0] == '\0' || !isdigit((unsigned char)minor[0]) || *end != '\0' || v > 255) {
        snprintf(g->problem, sizeof(g->problem),
                 "/proc/driver/nvidia/gpus/%s/information: Device Minor is \"%.32s\", not a number",
                 g->bus_id, minor);
        return;
    }
    g->minor = (int)v;
}

/* A driver version: digits and dots, at least one dot, none first or last ("550.90.07",
 * "550.120"; not "x86_64", "31." of a localized date, or "09:35:42"). */
static bool is_version_word(const char *w)
{
    size_t n = strlen(w);
    if (n == 0 || !isdigit((unsigned char)w[0]) || !isdigit((unsigned char)w[n - 1])) return false;
    bool dot = false;
    for (const char *q = w; *q; q++) {
        if (*q == '.') {
            if (q[1] == '.') return false;
            dot = true;
        } else if (!isdigit((unsigned char)*q))
            return false;
    }
    return dot;
}

bool pf_nvidia_driver_version(char *out, size_t n, const char *text)
{
    const char *p = strstr(text, "NVRM version:");
    if (!p) return false;
    p += strlen("NVRM version:");
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) : strlen(p);
    char line[512];
    snprintf(line, sizeof(line), "%.*s", (int)(len < sizeof(line) ? len : sizeof(line) - 1), p);
    char word[64];
    int used = 0;
    for (const char *q = line; sscanf(q, " %63s%n", word, &used) == 1; q += used) {
        if (is_version_word(word)) {
            snprintf(out, n, "%s", word);
            return true;
        }
    }
    return false;
}

static bool driver_version(char *out, size_t n, const struct pf_host *h)
{
    char text[1024];
    if (pf_host_read(text, sizeof(text), h, "/proc/driver/nvidia/version") < 0) return false;
    return pf_nvidia_driver_version(out, n, text);
}

/* The /dev/nvidiaN nodes (N all digits: not nvidiactl, nvidia-uvm, nvidia-modeset). */
static void list_dev_nodes(struct pf_strlist *out, const struct pf_host *h)
{
    struct pf_strlist all = {0};
    (void)pf_host_list(&all, h, "/dev");
    for (size_t i = 0; i < all.n; i++) {
        const char *s = all.v[i];
        if (strncmp(s, "nvidia", 6) != 0 || s[6] == '\0') continue;
        bool digits = true;
        for (const char *q = s + 6; *q; q++)
            digits = digits && isdigit((unsigned char)*q);
        if (digits) pf_strlist_add(out, s);
    }
    pf_strlist_free(&all);
}

/* PCI bus ids are fixed-width hex: byte order is bus order (natural order is not: it puts
 * 0000:2a:00.0 before 0000:18:00.0). */
static int gpu_cmp(const void *a, const void *b)
{
    return strcmp(((const struct gpu *)a)->bus_id, ((const struct gpu *)b)->bus_id);
}

static struct gpu *gpu_by_minor(struct gpu *g, size_t n, int minor)
{
    for (size_t i = 0; i < n; i++)
        if (g[i].minor == minor) return &g[i];
    return NULL;
}

/* The evidence, first: whatever the outcome, the human sees what was there. */
static void gpu_evidence(struct pf_check *out, const struct gpu *gpus, size_t ngpus,
                         const struct pf_strlist *nodes, const char *version, int expect)
{
    struct pf_node *ev = out->evidence;
    pf_node_set_int(ev, "count", (long long)nodes->n);
    pf_node_set_int(ev, "driverGpus", (long long)ngpus);
    if (version) pf_node_set_str(ev, "driverVersion", version);
    if (expect >= 0) pf_node_set_int(ev, "expected", expect);
    struct pf_node *seq = pf_node_set_seq(ev, "gpus");
    for (size_t i = 0; i < ngpus; i++) {
        struct pf_node *m = pf_node_add_map(seq);
        pf_node_set_str(m, "busId", gpus[i].bus_id);
        if (gpus[i].model[0]) pf_node_set_str(m, "model", gpus[i].model);
        if (gpus[i].uuid[0]) pf_node_set_str(m, "uuid", gpus[i].uuid);
        if (gpus[i].minor >= 0) pf_node_set_strf(m, "devNode", "/dev/nvidia%d", gpus[i].minor);
        pf_node_set_bool(m, "inPod", gpus[i].has_node);
    }
}

void pf_check_gpu_devices(struct pf_check *out, struct pf_ctx *ctx)
{
    const struct pf_host *h = &ctx->host;
    const int expect = ctx->config ? ctx->config->expect_gpus_per_pod : -1;
    size_t ngpus = ctx->gpus.n;
    struct gpu *gpus = ngpus ? pf_xcalloc(ngpus, sizeof(*gpus)) : NULL;
    struct pf_strlist nodes = {0};
    list_dev_nodes(&nodes, h);

    for (size_t i = 0; i < ngpus; i++) {
        snprintf(gpus[i].bus_id, sizeof(gpus[i].bus_id), "%s", ctx->gpus.v[i]);
        gpu_parse_info(&gpus[i], h);
        if (gpus[i].minor >= 0)
            gpus[i].has_node = pf_host_exists(h, "/dev/nvidia%d", gpus[i].minor);
    }

    if (ngpus > 1) qsort(gpus, ngpus, sizeof(*gpus), gpu_cmp);

    char version[64] = "";
    bool have_version = driver_version(version, sizeof(version), h);

    gpu_evidence(out, gpus, ngpus, &nodes, have_version ? version : NULL, expect);

    if (ngpus == 0 && nodes.n == 0) {
        if (expect > 0)
            pf_check_add_finding(out, "no-gpus", PF_FAIL, NULL,
                                 "no NVIDIA GPU is visible (no /proc/driver/nvidia/gpus entry, no "
                                 "/dev/nvidiaN node); expect.gpusPerPod is %d",
                                 expect);
        else
            pf_check_skip(out, "no NVIDIA GPUs visible");
        goto done;
    }

    /* GPUs the driver knows whose information cannot be used: which /dev/nvidiaN they are is
     * unknown, and so is whether the pod's nodes match the driver's list (the driver writes
     * "Device Minor: \t N" in each information file, nv-procfs.c) */
    size_t unknown = 0;
    for (size_t i = 0; i < ngpus; i++)
        if (gpus[i].problem[0] && ++unknown)
            pf_check_unknown(out, "gpu-count",
                             "GPU %s: %s: cannot tell which /dev/nvidiaN is this GPU",
                             gpus[i].bus_id, gpus[i].problem);

    /* nodes with no GPU behind them in /proc (only meaningful when /proc lists any and every
     * listed GPU says its minor) */
    if (ngpus > 0 && unknown == 0) {
        for (size_t i = 0; i < nodes.n; i++) {
            int minor = atoi(nodes.v[i] + 6);
            if (!gpu_by_minor(gpus, ngpus, minor))
                pf_check_add_finding(
                    out, "gpu-count", PF_FAIL, NULL,
                    "/dev/%s is in the pod but no GPU in /proc/driver/nvidia/gpus has Device "
                    "Minor %d",
                    nodes.v[i], minor);
        }
    } else if (ngpus == 0) {
        /* a runtime may hide /proc/driver/nvidia (CDI specs, gVisor): nothing says they are
         * not the driver's */
        pf_check_unknown(out, "gpu-count",
                         "%zu /dev/nvidiaN node%s in the pod but /proc/driver/nvidia/gpus lists "
                         "no GPU: which GPUs they are is not known",
                         nodes.n, nodes.n == 1 ? "" : "s");
    }

    /* GPUs the driver lists whose node the pod lacks */
    char missing[512] = "";
    size_t nmissing = 0;
    for (size_t i = 0; i < ngpus; i++) {
        if (gpus[i].has_node || gpus[i].minor < 0) continue;
        size_t len = strlen(missing);
        snprintf(missing + len, sizeof(missing) - len, "%s/dev/nvidia%d (%s)", len ? ", " : "",
                 gpus[i].minor, gpus[i].bus_id);
        nmissing++;
    }

    if (nodes.n == 0) {
        /* the driver lists GPUs (an unmasked /proc) but none is usable here: a fault only when
         * the pod was meant to have GPUs (expect.gpusPerPod); without it a CPU pod on a GPU
         * node looks the same, and a gang run compares the pods' counts (gang-gpu-count) */
        if (expect > 0)
            pf_check_add_finding(out, "no-gpus", PF_FAIL, NULL,
                                 "the driver lists %zu GPU%s but no /dev/nvidiaN node is in the "
                                 "pod (missing: %s)",
                                 ngpus, ngpus == 1 ? "" : "s", missing);
        else {
            pf_check_unknown(out, "no-gpus",
                             "the driver lists %zu GPU%s but no /dev/nvidiaN node is in the pod "
                             "(missing: %s); whether the pod should have GPUs: no "
                             "expect.gpusPerPod",
                             ngpus, ngpus == 1 ? "" : "s", missing);
            pf_check_skip(out, "no /dev/nvidiaN node in the pod (the driver lists %zu GPU%s)",
                          ngpus, ngpus == 1 ? "" : "s");
        }
        goto done;
    }

    if (expect >= 0 && (int)nodes.n != expect) {
        if (nmissing)
            pf_check_add_finding(out, "gpu-count", PF_FAIL, NULL,
                                 "%zu GPU%s usable in the pod, expect.gpusPerPod is %d (listed by "
                                 "the driver but not in the pod: %s)",
                                 nodes.n, nodes.n == 1 ? "" : "s", expect, missing);
        else
            pf_check_add_finding(out, "gpu-count", PF_FAIL, NULL,
                                 "%zu GPU%s usable in the pod, expect.gpusPerPod is %d", nodes.n,
                                 nodes.n == 1 ? "" : "s", expect);
    } else if (expect < 0 && nmissing) {
        /* Without an expectation this is either a node the device plugin failed to mount or
         * a runtime that does not mask /proc (CDI): unknown; a gang run compares the pods'
         * counts (gang-gpu-count). */
        pf_check_unknown(out, "gpu-count",
                         "/proc/driver/nvidia/gpus lists %zu GPUs, the pod has %zu of their nodes "
                         "(not in the pod: %s); whether it should have them: no expect.gpusPerPod",
                         ngpus, nodes.n, missing);
    }

    {
        const char *model = ngpus && gpus[0].model[0] ? gpus[0].model : "NVIDIA GPU";
        bool same = true;
        for (size_t i = 1; i < ngpus; i++)
            same = same && strcmp(gpus[i].model, gpus[0].model) == 0;
        pf_check_set_message(out, "%zu x %s, driver %s", nodes.n, same ? model : "GPUs (mixed)",
                             have_version ? version : "version unknown");
    }

done:
    pf_strlist_free(&nodes);
    free(gpus);
}
