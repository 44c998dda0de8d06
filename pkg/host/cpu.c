/* The CPU this process waited for (struct pf_host_cpu): the run-queue wait of its threads,
 * the host's steal time and the cgroup's CPU pressure, each read as the kernel writes it. */
#define _GNU_SOURCE
#include "host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pf_host_psi_parse(long long *total_us, double *avg10, const char *text)
{
    /* kernel/sched/psi.c, psi_show(): "some avg10=%lu.%02lu avg60=... total=%llu\n" */
    const char *l = text;
    while (l && strncmp(l, "some ", 5) != 0) {
        l = strchr(l, '\n');
        if (l) l++;
    }
    if (!l) return pf_err_set(PF_EINVAL, "cpu.pressure: no \"some\" line");
    const char *a = strstr(l, "avg10="), *t = strstr(l, "total=");
    const char *eol = strchr(l, '\n');
    if (!a || !t || (eol && (a > eol || t > eol)))
        return pf_err_set(PF_EINVAL, "cpu.pressure: no avg10= or total= on the \"some\" line");
    char *end;
    double v = strtod(a + 6, &end);
    if (end == a + 6 || !(v >= 0 && v <= 100))
        return pf_err_set(PF_EINVAL, "cpu.pressure: avg10 not a share");
    long long tot = strtoll(t + 6, &end, 10);
    if (end == t + 6 || tot < 0) return pf_err_set(PF_EINVAL, "cpu.pressure: total not a count");
    *avg10 = v;
    *total_us = tot;
    return 0;
}

static long long threads_wait_ns(const struct pf_host *h)
{
    struct pf_strlist tids = {0};
    if (pf_host_list(&tids, h, "/proc/self/task") < 0) {
        pf_strlist_free(&tids);
        return -1;
    }
    long long sum = 0;
    int got = 0;
    for (size_t i = 0; i < tids.n; i++) {
        char line[128];
        unsigned long long run, delay;
        if (pf_host_read(line, sizeof(line), h, "/proc/self/task/%s/schedstat", tids.v[i]) < 0)
            continue;
        if (sscanf(line, "%llu %llu", &run, &delay) != 2) continue;
        sum += (long long)delay;
        got++;
    }
    pf_strlist_free(&tids);
    return got ? sum : -1;
}

static void host_steal(struct pf_host_cpu *out, const struct pf_host *h)
{
    char buf[512];
    out->steal = out->total = -1;
    /* the first line only: "cpu  user nice system idle iowait irq softirq steal ..." */
    char *text = NULL;
    size_t len = 0;
    if (pf_host_read_all(&text, &len, 1 << 20, h, "/proc/stat") < 0) return;
    size_t n = strcspn(text, "\n");
    if (n >= sizeof(buf)) n = sizeof(buf) - 1;
    memcpy(buf, text, n);
    buf[n] = '\0';
    free(text);
    if (strncmp(buf, "cpu ", 4) != 0) return;
    long long tot = 0, steal = -1;
    char *p = buf + 4, *end;
    for (int k = 0; k < 10; k++) {
        long long v = strtoll(p, &end, 10);
        if (end == p) break;
        if (k == 7) steal = v;
        tot += v;
        p = end;
    }
    if (steal < 0) return;
    out->steal = steal;
    out->total = tot;
}

static void psi(struct pf_host_cpu *out, const struct pf_host *h)
{
    out->psi_us = -1;
    out->psi_avg10 = -1;
    out->psi_own = false;
    char cg[1024] = "", text[512];
    char *all = NULL;
    if (pf_host_read_all(&all, NULL, 1 << 16, h, "/proc/self/cgroup") == 0) {
        /* the cgroup v2 line: "0::/kubepods.slice/..." */
        for (char *l = all; l && *l;) {
            char *nl = strchr(l, '\n');
            if (nl) *nl = '\0';
            if (strncmp(l, "0::", 3) == 0) pf_strcpy(cg, sizeof(cg), l + 3);
            l = nl ? nl + 1 : NULL;
        }
        free(all);
    }
    if (cg[0] == '/' && cg[1] &&
        pf_host_read(text, sizeof(text), h, "/sys/fs/cgroup%s/cpu.pressure", cg) >= 0 &&
        pf_host_psi_parse(&out->psi_us, &out->psi_avg10, text) == 0) {
        out->psi_own = true;
        return;
    }
    if (pf_host_read(text, sizeof(text), h, "/proc/pressure/cpu") >= 0 &&
        pf_host_psi_parse(&out->psi_us, &out->psi_avg10, text) < 0) {
        out->psi_us = -1;
        out->psi_avg10 = -1;
    }
}

void pf_host_cpu_read(struct pf_host_cpu *out, const struct pf_host *h)
{
    memset(out, 0, sizeof(*out));
    out->wait_ns = threads_wait_ns(h);
    host_steal(out, h);
    psi(out, h);
}
