/* gpu.health's judgement (pf_gpu_health_judge) fact by fact, on tables of what NVML answers:
 * a healthy H100 SXM as gpud's nvidia-smi-query.535.183.01.out.0.valid shows it
 * (tests/e2e/nccl-double/nvml_profiles.h), then one fault, one "not supported" and one unknown
 * answer per row. Also the model table, the Xid reader and the inventory the gang comparison
 * reads. tests/e2e/test_gpu_health.sh drives the same check through the NVML double. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../pkg/checks/checks.h"
#include "../../../pkg/dl/nvml.h"
#include "../helpers/helpers.h"

#define OK PF_NVML_SUCCESS
#define NS PF_NVML_ERROR_NOT_SUPPORTED

static void healthy(struct pf_nvml_health *g, unsigned i)
{
    memset(g, 0, sizeof(*g));
    g->index = i;
    g->handle_rc = OK;
    snprintf(g->bus_id, sizeof(g->bus_id), "00000000:%02X:00.0", 0x53 + 0x11 * i);
    snprintf(g->name, sizeof(g->name), "NVIDIA H100 80GB HBM3");
    snprintf(g->uuid, sizeof(g->uuid), "GPU-%u", i);
    g->persistence = (struct pf_nvml_fact){OK, 1};
    g->mig_current = g->mig_pending = (struct pf_nvml_fact){OK, 0};
    g->ecc_mode = (struct pf_nvml_fact){OK, 1};
    g->ecc_unc_volatile = g->ecc_cor_volatile = (struct pf_nvml_fact){OK, 0};
    g->ecc_unc_aggregate = g->ecc_cor_aggregate = (struct pf_nvml_fact){OK, 0};
    g->retired_sbe = g->retired_dbe = g->retired_pending = (struct pf_nvml_fact){NS, 0};
    g->remap_rc = OK;
    g->clocks_event = (struct pf_nvml_fact){OK, PF_NVML_CLOCKS_EVENT_GPU_IDLE};
    g->pcie_width_max = g->pcie_width_cur = (struct pf_nvml_fact){OK, 16};
    g->nvlink_rc = OK;
    g->nvlink_supported = g->nvlink_active = 18;
    for (unsigned k = 0; k < 18; k++)
        g->link[k] = PF_NVLINK_ACTIVE;
    for (unsigned k = 0; k < PF_NVML_NVLINK_ERROR_COUNT; k++)
        g->nvlink_errors[k] = (struct pf_nvml_fact){OK, 0};
}

static void links_down(struct pf_nvml_health *g, unsigned active)
{
    g->nvlink_active = active;
    for (unsigned k = active; k < 18; k++)
        g->link[k] = PF_NVLINK_INACTIVE;
}

/* one mutation of GPU 1 of 2 */
static void m_none(struct pf_nvml_health *g)
{
    (void)g;
}
static void m_ecc(struct pf_nvml_health *g)
{
    g->ecc_unc_volatile.v = 3;
    g->ecc_cor_volatile.v = 7;
}
static void m_ecc_ns(struct pf_nvml_health *g)
{
    g->ecc_unc_volatile = (struct pf_nvml_fact){NS, 0};
    g->ecc_mode = (struct pf_nvml_fact){NS, 0};
}
static void m_ecc_perm(struct pf_nvml_health *g)
{
    g->ecc_unc_volatile = (struct pf_nvml_fact){PF_NVML_ERROR_NO_PERMISSION, 0};
}
static void m_remap_pending(struct pf_nvml_health *g)
{
    g->remap_unc = 4;
    g->remap_pending = 1;
}
static void m_remap_failed(struct pf_nvml_health *g)
{
    g->remap_unc = 9;
    g->remap_failed = 1;
}
static void m_remap_ns(struct pf_nvml_health *g)
{
    g->remap_rc = NS;
}
static void m_remap_nofn(struct pf_nvml_health *g)
{
    g->remap_rc = PF_NVML_ERROR_FUNCTION_NOT_FOUND;
}
static void m_retire(struct pf_nvml_health *g)
{
    g->retired_sbe = (struct pf_nvml_fact){OK, 2};
    g->retired_dbe = (struct pf_nvml_fact){OK, 1};
    g->retired_pending = (struct pf_nvml_fact){OK, 1};
}
static void m_nvlink14(struct pf_nvml_health *g)
{
    links_down(g, 14);
}
static void m_nvlink_unknown(struct pf_nvml_health *g)
{
    /* 4 links whose state NVML could not give: not counted inactive */
    g->nvlink_active = 14;
    g->nvlink_unknown = 4;
    g->nvlink_supported = 14;
    for (unsigned k = 14; k < 18; k++)
        g->link[k] = PF_NVLINK_UNKNOWN;
}
static void m_nvlink_ns(struct pf_nvml_health *g)
{
    g->nvlink_rc = NS;
    g->nvlink_supported = g->nvlink_active = 0;
}
static void m_pcie_card(struct pf_nvml_health *g)
{
    /* an H100 PCIe lists 18 links with 6 never used (Azure/azurehpc-health-checks#162) */
    snprintf(g->name, sizeof(g->name), "NVIDIA H100 PCIe");
    links_down(g, 12);
}
static void m_powerbrake(struct pf_nvml_health *g)
{
    g->clocks_event.v =
        PF_NVML_CLOCKS_THROTTLE_HW_SLOWDOWN | PF_NVML_CLOCKS_THROTTLE_HW_POWER_BRAKE_SLOWDOWN;
}
static void m_thermal(struct pf_nvml_health *g)
{
    g->clocks_event.v = PF_NVML_CLOCKS_THROTTLE_HW_THERMAL_SLOWDOWN;
}
static void m_powercap(struct pf_nvml_health *g)
{
    g->clocks_event.v = PF_NVML_CLOCKS_EVENT_SW_POWER_CAP;
}
static void m_clocks_ns(struct pf_nvml_health *g)
{
    g->clocks_event = (struct pf_nvml_fact){NS, 0};
}
static void m_pcie8(struct pf_nvml_health *g)
{
    g->pcie_width_cur.v = 8;
}
static void m_pcie_unknown(struct pf_nvml_health *g)
{
    g->pcie_width_cur = (struct pf_nvml_fact){PF_NVML_ERROR_UNKNOWN, 0};
}
static void m_mig(struct pf_nvml_health *g)
{
    g->mig_current.v = g->mig_pending.v = 1;
}
static void m_persistence_off(struct pf_nvml_health *g)
{
    g->persistence.v = 0;
}
static void m_handle(struct pf_nvml_health *g)
{
    g->handle_rc = 15; /* NVML_ERROR_GPU_IS_LOST */
}

struct row {
    const char *name;
    void (*mutate)(struct pf_nvml_health *g);
    enum pf_status status;
    const char *codes;  /* the findings' codes, ',' between them */
    const char *needle; /* in the first finding's message, or in the evidence's YAML */
};

static const struct row rows[] = {
    {"healthy", m_none, PF_PASS, "", "2 GPUs healthy as NVML reports them"},
    {"ecc", m_ecc, PF_FAIL, "ecc-uncorrected",
     "GPU 1 (00000000:64:00.0, NVIDIA H100 80GB HBM3): 3 uncorrected ECC errors since the driver "
     "loaded (nvmlDeviceGetTotalEccErrors, volatile; 7 corrected)"},
    {"ecc not supported", m_ecc_ns, PF_PASS, "", "volatileUncorrected: not supported"},
    {"ecc unknown", m_ecc_perm, PF_PASS, "",
     "volatileUncorrected: \"unknown: nvmlDeviceGetTotalEccErrors: NVML_ERROR_NO_PERMISSION\""},
    {"remap pending", m_remap_pending, PF_FAIL, "row-remap-pending",
     "a row remapping is pending (nvmlDeviceGetRemappedRows: isPending; 4 rows remapped for "
     "uncorrectable, 0 for correctable errors)"},
    {"remap failed", m_remap_failed, PF_FAIL, "row-remap-failed", "a row remapping failed"},
    {"remap not supported", m_remap_ns, PF_PASS, "", "state: not supported"},
    {"remap call missing", m_remap_nofn, PF_PASS, "",
     "unknown: this libnvidia-ml has no nvmlDeviceGetRemappedRows"},
    {"pages pending", m_retire, PF_FAIL, "page-retirement-pending",
     "pages are pending retirement (2 single-bit, 1 double-bit"},
    {"14 of 18", m_nvlink14, PF_FAIL, "nvlink-inactive",
     "GPU 1 (00000000:64:00.0, NVIDIA H100 80GB HBM3): 14 of 18 NVLinks active (inactive: 14, "
     "15, 16, 17); the H100 SXM5 has 18 (nvmlDeviceGetNvLinkState)"},
    {"links unknown", m_nvlink_unknown, PF_PASS, "", "unknownLinks: 4"},
    {"nvlink not supported", m_nvlink_ns, PF_PASS, "", "state: not supported"},
    {"pcie card", m_pcie_card, PF_PASS, "", "inactiveLinks:"},
    {"power brake", m_powerbrake, PF_WARN, "clocks-slowdown",
     "clocks slowed now by HW slowdown, HW power brake slowdown "
     "(nvmlDeviceGetCurrentClocksEventReasons 0x88)"},
    {"thermal", m_thermal, PF_WARN, "clocks-slowdown", "HW thermal slowdown"},
    {"power cap", m_powercap, PF_PASS, "", "SW power cap"},
    {"clocks not supported", m_clocks_ns, PF_PASS, "", "clocksEventReasons: not supported"},
    {"pcie x8", m_pcie8, PF_WARN, "pcie-width-degraded", "PCIe link x8, the GPU's maximum is x16"},
    {"pcie unknown", m_pcie_unknown, PF_PASS, "", "current: \"unknown: "},
    {"mig", m_mig, PF_PASS, "", "migEnabled: 1"},
    {"persistence off", m_persistence_off, PF_PASS, "", "persistenceDisabled: 1"},
    {"handle lost", m_handle, PF_PASS, "", "nvmlDeviceGetHandleByIndex_v2: NVML_ERROR_GPU_IS_LOST"},
};

static const struct row *row_named(const char *name)
{
    for (size_t i = 0; i < PF_ARRAY_LEN(rows); i++)
        if (strcmp(rows[i].name, name) == 0) return &rows[i];
    fail_msg("no row %s", name);
    return NULL;
}

static char *judge(struct pf_verdict *v, struct pf_check **out, const struct row *r,
                   const struct pf_xid_log *xid)
{
    struct pf_nvml_health g[2];
    healthy(&g[0], 0);
    healthy(&g[1], 1);
    if (r) r->mutate(&g[1]);
    struct pf_nvml_system sys = {OK, "535.183.01", OK, 12020};
    pf_verdict_init(v);
    struct pf_check *c = pf_verdict_add_check(v, "gpu.health");
    struct pf_xid_log none = {0};
    snprintf(none.why, sizeof(none.why), "/dev/kmsg is not in the pod");
    pf_gpu_health_judge(c, &sys, g, 2, xid ? xid : &none);
    *out = c;
    char *yaml = NULL;
    size_t len = 0;
    assert_int_equal(pf_node_to_yaml(&yaml, &len, c->evidence), 0);
    return yaml;
}

static enum pf_status worst(const struct pf_check *c)
{
    enum pf_status s = PF_PASS;
    for (size_t i = 0; i < c->nfindings; i++)
        if (c->findings[i].status > s) s = c->findings[i].status;
    return s;
}

static void test_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < PF_ARRAY_LEN(rows); i++) {
        const struct row *r = &rows[i];
        struct pf_verdict v;
        struct pf_check *c;
        char *yaml = judge(&v, &c, r, NULL);
        char codes[256] = "";
        for (size_t k = 0; k < c->nfindings; k++) {
            size_t len = strlen(codes);
            snprintf(codes + len, sizeof(codes) - len, "%s%s", k ? "," : "", c->findings[k].code);
        }
        if (strcmp(codes, r->codes) != 0)
            fail_msg("%s: codes '%s', want '%s'", r->name, codes, r->codes);
        if (worst(c) != r->status) fail_msg("%s: status %d, want %d", r->name, worst(c), r->status);
        const char *hay = c->nfindings ? c->findings[0].message : NULL;
        if (!hay && c->message && strstr(c->message, r->needle)) hay = c->message;
        if (!hay || !strstr(hay, r->needle)) hay = yaml;
        if (!strstr(hay, r->needle))
            fail_msg("%s: '%s' not in:\n%s\n%s", r->name, r->needle,
                     c->nfindings ? c->findings[0].message : "", yaml);
        free(yaml);
        pf_verdict_free(&v);
    }
}

static void test_models(void **state)
{
    (void)state;
    const char *m = NULL;
    assert_int_equal(pf_gpu_nvlinks_expected("NVIDIA H100 80GB HBM3", &m), 18);
    assert_string_equal(m, "H100 SXM5");
    assert_int_equal(pf_gpu_nvlinks_expected("NVIDIA A100-SXM4-80GB", &m), 12);
    assert_int_equal(pf_gpu_nvlinks_expected("Tesla V100-SXM2-32GB", NULL), 6);
    assert_int_equal(pf_gpu_nvlinks_expected("NVIDIA H200", NULL), 18);
    assert_int_equal(pf_gpu_nvlinks_expected("NVIDIA GB200", NULL), 18);
    assert_int_equal(pf_gpu_nvlinks_expected("NVIDIA B200", NULL), 18);
    /* bridged PCIe cards and unknown models: not judged */
    assert_int_equal(pf_gpu_nvlinks_expected("NVIDIA H200 NVL", &m), 0);
    assert_null(m);
    assert_int_equal(pf_gpu_nvlinks_expected("NVIDIA H100 PCIe", NULL), 0);
    assert_int_equal(pf_gpu_nvlinks_expected("NVIDIA H100 NVL", NULL), 0);
    assert_int_equal(pf_gpu_nvlinks_expected("NVIDIA H800 PCIe", NULL), 0);
    assert_int_equal(pf_gpu_nvlinks_expected("NVIDIA H800", NULL), 8);
    assert_int_equal(pf_gpu_nvlinks_expected("NVIDIA A100-PCIE-40GB", NULL), 0);
    assert_int_equal(pf_gpu_nvlinks_expected("NVIDIA A100 80GB PCIe", NULL), 0);
    assert_int_equal(pf_gpu_nvlinks_expected("NVIDIA H2000", NULL), 0);
    assert_int_equal(pf_gpu_nvlinks_expected("", NULL), 0);
    assert_int_equal(pf_gpu_nvlinks_expected(NULL, NULL), 0);
}

/* Xid lines as /dev/kmsg and dmesg give them; the first two are wtdcode/vllm-backport#62's
 * and gpud's README's forms. */
static const char kmsg[] =
    "4,1093,812345678,-;NVRM: Xid (PCI:0000:64:00): 48, pid=1797828, name=pt_main_thread, "
    "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer\n"
    " SUBSYSTEM=pci\n"
    "4,1094,812345679,-;NVRM: Xid (PCI:0000:64:00): 63, pid='<unknown>', name=<unknown>, Row "
    "Remapper: New row marked for remapping, reset gpu to activate.\n"
    "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, "
    "Graphics SM Warp Exception\n"
    "4,1095,812345680,-;NVRM: Xid (PCI:0000:64:00): 48, pid=1, again\n"
    "6,1096,1,-;NVRM: Xid (PCI:0000:64:00): , no number\n"
    "6,1097,1,-;NVRM: Xid (PCI:zz:64:00): 79, bad address\n"
    "6,1098,1,-;NVRM: Xid (PCI:0000:ee:00): 79, a GPU of another pod\n"
    "6,1099,1,-;NVRM: Xid (PCI:0000:64:00): 79";

static void test_xid(void **state)
{
    (void)state;
    struct pf_xid_log log = {0};
    assert_int_equal(pf_xid_parse(&log, kmsg, strlen(kmsg)), 6);
    assert_int_equal(log.v[0].xid, 48);
    assert_int_equal(log.v[0].bus, 0x64);
    assert_int_equal(log.v[2].xid, 13);
    assert_int_equal(log.v[2].bus, 0xcb);
    assert_int_equal(log.v[5].xid, 79);
    assert_string_equal(log.v[5].text, "");
    assert_int_equal(log.v[4].bus, 0xee);
    assert_non_null(strstr(log.v[1].text, "Row Remapper"));
    log.readable = true;
    snprintf(log.source, sizeof(log.source), "/dev/kmsg");
    struct pf_verdict v;
    struct pf_check *c;
    char *yaml = judge(&v, &c, row_named("healthy"), &log);
    /* 13 is the application's, 79 on 0000:ee:00 another pod's GPU: evidence only; 48, 63, 79
     * on GPU 1, each once */
    assert_int_equal(c->nfindings, 1);
    assert_string_equal(c->findings[0].code, "gpu-xid");
    assert_string_equal(c->findings[0].message,
                        "GPU 1 (00000000:64:00.0, NVIDIA H100 80GB HBM3), PCI 0000:64:00: Xid 48 "
                        "(double-bit ECC error), Xid 63 (row remapping recorded, a reset applies "
                        "it), Xid 79 (GPU has fallen off the bus) in the kernel log (/dev/kmsg)");
    assert_non_null(strstr(yaml, "xid: 13"));
    assert_non_null(strstr(yaml, "gpu: not in the pod"));
    free(yaml);
    pf_verdict_free(&v);
    free(log.v);
    /* the log not readable: said so, never "no Xid" */
    yaml = judge(&v, &c, row_named("healthy"), NULL);
    assert_non_null(strstr(yaml, "state: \"could not be read: /dev/kmsg is not in the pod\""));
    assert_null(strstr(yaml, "events"));
    free(yaml);
    pf_verdict_free(&v);
    /* more lines than kept */
    struct pf_xid_log many = {0};
    for (int i = 0; i < PF_XID_MAX + 3; i++)
        pf_xid_parse(&many, "NVRM: Xid (PCI:0000:01:00): 79, x", 33);
    assert_int_equal(many.n, PF_XID_MAX);
    assert_int_equal(many.dropped, 3);
    free(many.v);
}

static void test_inventory(void **state)
{
    (void)state;
    struct pf_verdict v;
    struct pf_check *c;
    char *yaml = judge(&v, &c, row_named("14 of 18"), NULL);
    free(yaml);
    struct pf_gpu_inventory inv;
    pf_gpu_inventory_read(&inv, c->evidence);
    assert_true(inv.known);
    assert_int_equal(inv.gpus, 2);
    assert_string_equal(inv.model, "NVIDIA H100 80GB HBM3");
    assert_int_equal(inv.nvlinks_active, 18 + 14);
    assert_int_equal(inv.nvlinks_supported, 36);
    assert_int_equal(inv.nvlinks_active_min, 14);
    assert_int_equal(inv.mig_enabled, 0);
    assert_int_equal(inv.persistence_disabled, 0);
    assert_string_equal(inv.driver, "535.183.01");
    assert_string_equal(inv.cuda, "12.2");
    pf_verdict_free(&v);
    /* a GPU lost: links, MIG and persistence unknown (-1, absent from the evidence), not 0 */
    yaml = judge(&v, &c, row_named("handle lost"), NULL);
    assert_null(strstr(yaml, "nvlinksActive"));
    assert_null(strstr(yaml, "migEnabled"));
    free(yaml);
    pf_gpu_inventory_read(&inv, c->evidence);
    assert_true(inv.known);
    assert_int_equal(inv.nvlinks_active, -1);
    assert_int_equal(inv.mig_enabled, -1);
    assert_int_equal(inv.persistence_disabled, -1);
    pf_verdict_free(&v);
    /* links NVML could not answer for: the sums are not known */
    yaml = judge(&v, &c, row_named("links unknown"), NULL);
    free(yaml);
    pf_gpu_inventory_read(&inv, c->evidence);
    assert_int_equal(inv.nvlinks_active, -1);
    pf_verdict_free(&v);
    /* no NVLink (NOT_SUPPORTED on GPU 1): GPU 0's 18, the fewest 0 */
    yaml = judge(&v, &c, row_named("nvlink not supported"), NULL);
    free(yaml);
    pf_gpu_inventory_read(&inv, c->evidence);
    assert_int_equal(inv.nvlinks_active, 18);
    assert_int_equal(inv.nvlinks_active_min, 0);
    pf_verdict_free(&v);
    /* no evidence: not known */
    pf_gpu_inventory_read(&inv, NULL);
    assert_false(inv.known);
    assert_int_equal(inv.nvlinks_active, -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_models),
        cmocka_unit_test(test_xid),
        cmocka_unit_test(test_inventory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
