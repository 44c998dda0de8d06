/* pkg/k8s: Go-quoted values, downward-API map files, Multus network-status, PCIDEVICE_*
 * names and _INFO, pod identity from a podinfo folder. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../../pkg/k8s/k8s.h"
#include "../helpers/helpers.h"

/* ---- strconv.Quote literals */

struct unq_case {
    const char *in;
    const char *want; /* NULL: must fail */
    size_t want_len;  /* 0: strlen(want) */
    const char *err;  /* a part of the error message */
};

static const struct unq_case unq_cases[] = {
    {"\"\"", "", 0, NULL},
    {"\"plain ascii\"", "plain ascii", 0, NULL},
    {"\"\\a\\b\\f\\n\\r\\t\\v\"", "\a\b\f\n\r\t\v", 0, NULL},
    {"\"\\\\ and \\\"\"", "\\ and \"", 0, NULL},
    {"\"\\x41\\x7f\\xff\"", "A\x7f\xff", 0, NULL},
    {"\"a\\x00b\"", "a\0b", 3, NULL},
    {"\"\\u00e9\\u200b\"", "\xc3\xa9\xe2\x80\x8b", 0, NULL},
    {"\"\\U0001F600\"", "\xf0\x9f\x98\x80", 0, NULL},
    {"\"\\U0010ffff\"", "\xf4\x8f\xbf\xbf", 0, NULL},
    {"\"raw \xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80\"", "raw \xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80",
     0, NULL},
    {"\"\\101\\000\\377\"", "A\0\xff", 3, NULL},
    {"\"[{\\n    \\\"name\\\": \\\"x\\\"\\n}]\"", "[{\n    \"name\": \"x\"\n}]", 0, NULL},
    /* invalid */
    {"", NULL, 0, "does not start"},
    {"abc", NULL, 0, "does not start"},
    {"'abc'", NULL, 0, "does not start"},
    {"\"abc", NULL, 0, "no closing"},
    {"\"abc\\\"", NULL, 0, "no closing"},
    {"\"abc\" ", NULL, 0, "after the closing"},
    {"\"a\"b\"", NULL, 0, "after the closing"},
    {"\"\\q\"", NULL, 0, "unknown escape \\q"},
    {"\"\\'\"", NULL, 0, "unknown escape \\'"},
    {"\"\\", NULL, 0, "backslash at the end"},
    {"\"\\x4\"", NULL, 0, "\\x needs 2 hex digits"},
    {"\"\\xZZ\"", NULL, 0, "\\x needs 2 hex digits"},
    {"\"\\u12\"", NULL, 0, "\\u needs 4 hex digits"},
    {"\"\\U0001F60\"", NULL, 0, "\\U needs 8 hex digits"},
    {"\"\\ud800\"", NULL, 0, "not a valid rune"},
    {"\"\\U00110000\"", NULL, 0, "not a valid rune"},
    {"\"\\400\"", NULL, 0, "over \\377"},
    {"\"\\12\"", NULL, 0, "octal escape needs 3 digits"},
    {"\"a\nb\"", NULL, 0, "raw control byte 0x0a"},
    {"\"a\tb\"", NULL, 0, "raw control byte 0x09"},
    {"\"\x7f\"", NULL, 0, "raw control byte 0x7f"},
    {"\"\xff\"", NULL, 0, "invalid UTF-8"},
    {"\"\xc3\"", NULL, 0, "invalid UTF-8"},
    {"\"\xed\xa0\x80\"", NULL, 0, "invalid UTF-8"}, /* a surrogate in raw UTF-8 */
    {"\"\xc0\xaf\"", NULL, 0, "invalid UTF-8"},     /* overlong */
};

static void test_unquote_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(unq_cases) / sizeof(unq_cases[0]); i++) {
        const struct unq_case *c = &unq_cases[i];
        char *out = NULL;
        size_t len = 0;
        int r = pf_k8s_unquote(&out, &len, c->in, strlen(c->in));
        if (c->want) {
            if (r != 0) fail_msg("case %zu (%s): %s", i, c->in, pf_err_msg());
            size_t wl = c->want_len ? c->want_len : strlen(c->want);
            assert_int_equal(len, wl);
            assert_memory_equal(out, c->want, wl);
            assert_int_equal(out[len], '\0');
            free(out);
        } else {
            if (r != PF_EINVAL) fail_msg("case %zu (%s) should fail", i, c->in);
            assert_null(out);
            if (!strstr(pf_err_msg(), c->err))
                fail_msg("case %zu: message '%s' lacks '%s'", i, pf_err_msg(), c->err);
        }
    }
}

static void test_unquote_names_the_byte(void **state)
{
    (void)state;
    char *out = NULL;
    const char *in = "\"abc\\qdef\"";
    assert_int_equal(pf_k8s_unquote(&out, NULL, in, strlen(in)), PF_EINVAL);
    assert_string_equal(pf_err_msg(), "byte 4: unknown escape \\q");
}

/* ---- map files */

static void test_map_parse_format(void **state)
{
    (void)state;
    const char *text = "a.example.com/x=\"1\"\nb=\"two words\"\nc=\"\"\nd=\"x=y\"\n";
    struct pf_k8s_map m;
    assert_int_equal(pf_k8s_map_parse(&m, "annotations", text, strlen(text)), 0);
    assert_int_equal(m.n, 4);
    assert_string_equal(pf_k8s_map_get(&m, "a.example.com/x"), "1");
    assert_string_equal(pf_k8s_map_get(&m, "b"), "two words");
    assert_string_equal(pf_k8s_map_get(&m, "c"), "");
    assert_string_equal(pf_k8s_map_get(&m, "d"), "x=y");
    assert_null(pf_k8s_map_get(&m, "e"));
    pf_k8s_map_free(&m);

    assert_int_equal(pf_k8s_map_parse(&m, "empty", "", 0), 0);
    assert_int_equal(m.n, 0);
    assert_null(pf_k8s_map_get(&m, "a"));
    pf_k8s_map_free(&m);
}

struct map_bad {
    const char *text;
    const char *err;
};

static void test_map_parse_errors(void **state)
{
    (void)state;
    static const struct map_bad cases[] = {
        {"a=\"1\"\nnoequals", "labels:2: no '=' (want key=\"value\")"},
        {"a=\"1\"\n=\"2\"", "labels:2: empty or malformed key"},
        {"a b=\"1\"", "labels:1: empty or malformed key"},
        {"a=1", "labels:1: a: value does not start with a double quote"},
        {"a=\"1\"\nb=\"2\"\nc=\"\\z\"", "labels:3: c: byte 1: unknown escape \\z"},
        {"a=\"1\"\nb=\"open", "labels:2: b: no closing double quote"},
        {"a=\"1\"\na=\"2\"", "labels: duplicate key a"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct pf_k8s_map m;
        assert_int_equal(pf_k8s_map_parse(&m, "labels", cases[i].text, strlen(cases[i].text)),
                         PF_EINVAL);
        assert_string_equal(pf_err_msg(), cases[i].err);
        assert_int_equal(m.n, 0);
        assert_null(m.v);
    }
}

/* ---- network-status */

static const char multus_written[] =
    "[{\n"
    "    \"name\": \"ovn-kubernetes\",\n"
    "    \"interface\": \"eth0\",\n"
    "    \"ips\": [\n        \"10.135.0.147\"\n    ],\n"
    "    \"mac\": \"0a:58:0a:87:00:93\",\n"
    "    \"default\": true,\n"
    "    \"dns\": {}\n"
    "},{\n"
    "    \"name\": \"team-a/sriov-rdma-net\",\n"
    "    \"interface\": \"net1\",\n"
    "    \"ips\": [\n        \"192.168.1.11/24\",\n        \"fd00::11\"\n    ],\n"
    "    \"mac\": \"d6:25:47:a2:36:6b\",\n"
    "    \"mtu\": 9000,\n"
    "    \"dns\": {\n        \"nameservers\": [\n            \"10.0.0.10\"\n        ]\n    },\n"
    "    \"gateway\": [\n        \"192.168.1.1\"\n    ],\n"
    "    \"device-info\": {\n"
    "        \"type\": \"pci\",\n"
    "        \"version\": \"1.1.0\",\n"
    "        \"pci\": {\n"
    "            \"pci-address\": \"0000:c0:01.3\",\n"
    "            \"rdma-device\": \"mlx5_11, mlx5_12,,mlx5_11\",\n"
    "            \"pf-pci-address\": \"0000:c0:00.0\",\n"
    "            \"representor-device\": \"pf0vf3\"\n"
    "        }\n"
    "    },\n"
    "    \"future-field\": {\"x\": [1, 2]}\n"
    "},{\n"
    "    \"name\": \"plain\"\n"
    "}]";

static void test_netstatus_parse(void **state)
{
    (void)state;
    struct pf_k8s_netstatus s;
    assert_int_equal(pf_k8s_netstatus_parse(&s, multus_written, strlen(multus_written)), 0);
    assert_int_equal(s.n, 3);
    const struct pf_k8s_network *c = &s.v[0], *r = &s.v[1], *p = &s.v[2];
    assert_string_equal(c->name, "ovn-kubernetes");
    assert_true(c->is_default);
    assert_false(c->has_device_info);
    assert_ptr_equal(pf_k8s_netstatus_default(&s), c);
    assert_true(pf_k8s_network_is_cluster(&s, 0));
    assert_false(pf_k8s_network_is_cluster(&s, 1));

    assert_string_equal(r->interface, "net1");
    assert_int_equal(r->ips.n, 2);
    assert_string_equal(r->ips.v[0], "192.168.1.11"); /* CIDR tolerated, prefix dropped */
    assert_string_equal(r->ips.v[1], "fd00::11");
    assert_int_equal(r->mtu, 9000);
    assert_false(r->is_default);
    assert_int_equal(r->gateway.n, 1);
    assert_string_equal(r->dns_nameservers.v[0], "10.0.0.10");
    assert_true(r->has_device_info);
    assert_string_equal(r->di_type, "pci");
    assert_string_equal(r->di_version, "1.1.0");
    assert_string_equal(r->pci_address, "0000:c0:01.3");
    assert_string_equal(r->pf_pci_address, "0000:c0:00.0");
    assert_string_equal(r->representor, "pf0vf3");
    assert_string_equal(r->vhost_net, "");
    assert_int_equal(r->rdma_devices.n, 2); /* comma-joined, blanks and repeats dropped */
    assert_string_equal(r->rdma_devices.v[0], "mlx5_11");
    assert_string_equal(r->rdma_devices.v[1], "mlx5_12");

    /* every field but the name may be missing */
    assert_string_equal(p->interface, "");
    assert_string_equal(p->mac, "");
    assert_int_equal(p->ips.n, 0);
    assert_int_equal(p->mtu, 0);
    pf_k8s_netstatus_free(&s);
}

static void test_netstatus_no_default_marker(void **state)
{
    (void)state;
    /* old Multus: no "default" key; the cluster network is listed first */
    const char *j = "[{\"name\": \"cbr0\", \"interface\": \"eth0\"},{\"name\": \"sriov-a\"}]";
    struct pf_k8s_netstatus s;
    assert_int_equal(pf_k8s_netstatus_parse(&s, j, strlen(j)), 0);
    assert_null(pf_k8s_netstatus_default(&s));
    assert_true(pf_k8s_network_is_cluster(&s, 0));
    assert_false(pf_k8s_network_is_cluster(&s, 1));
    assert_false(pf_k8s_network_is_cluster(&s, 2));
    pf_k8s_netstatus_free(&s);

    assert_int_equal(pf_k8s_netstatus_parse(&s, "[]", 2), 0);
    assert_int_equal(s.n, 0);
    pf_k8s_netstatus_free(&s);
}

struct ns_bad {
    const char *json;
    int code;
    const char *err;
};

static void test_netstatus_errors(void **state)
{
    (void)state;
    static const struct ns_bad cases[] = {
        {"", PF_ENOENT, "network-status is empty"},
        {"  \n ", PF_ENOENT, "network-status is empty"},
        {"[{\"name\": \"a\"},]", PF_EINVAL, "network-status is not JSON"},
        {"{\"name\": \"a\"}", PF_EINVAL, "network-status is not a JSON list"},
        {"[1]", PF_EINVAL, "network-status element 1 is not an object"},
        {"[{\"name\": 7}]", PF_EINVAL, "network-status element 1: \"name\" is not a string"},
        {"[{\"name\": \"a\"},{\"name\": \"b\", \"mtu\": \"9000\"}]", PF_EINVAL,
         "network-status element 2 (b): \"mtu\" is not an MTU"},
        {"[{\"name\": \"a\", \"mtu\": -1}]", PF_EINVAL, "\"mtu\" is not an MTU"},
        {"[{\"name\": \"a\", \"ips\": \"1.2.3.4\"}]", PF_EINVAL,
         "network-status element 1 (a): \"ips\" is not a list of strings"},
        {"[{\"name\": \"a\", \"ips\": [4]}]", PF_EINVAL, "\"ips\" is not a list of strings"},
        {"[{\"name\": \"a\", \"default\": \"yes\"}]", PF_EINVAL,
         "\"default\" is not true or false"},
        {"[{\"name\": \"a\", \"device-info\": []}]", PF_EINVAL, "\"device-info\" is not an object"},
        {"[{\"name\": \"a\", \"device-info\": {\"pci\": {\"rdma-device\": 3}}}]", PF_EINVAL,
         "\"rdma-device\" is not a string"},
        {"[{\"name\": \"a\", \"interface\": 1}]", PF_EINVAL, "\"interface\" is not a string"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct pf_k8s_netstatus s;
        int r = pf_k8s_netstatus_parse(&s, cases[i].json, strlen(cases[i].json));
        if (r != cases[i].code) fail_msg("case %zu: got %d (%s)", i, r, pf_err_msg());
        if (!strstr(pf_err_msg(), cases[i].err))
            fail_msg("case %zu: message '%s' lacks '%s'", i, pf_err_msg(), cases[i].err);
        assert_int_equal(s.n, 0);
        assert_null(s.v);
    }
}

static void test_network_name_match(void **state)
{
    (void)state;
    assert_true(pf_k8s_network_name_match("ml/sriov-a", "ml/sriov-a"));
    assert_true(pf_k8s_network_name_match("ml/sriov-a", "sriov-a")); /* old Multus */
    assert_true(pf_k8s_network_name_match("sriov-a", "ml/sriov-a"));
    assert_true(pf_k8s_network_name_match("sriov-a", "sriov-a"));
    assert_false(pf_k8s_network_name_match("ml/sriov-a", "other/sriov-a"));
    assert_false(pf_k8s_network_name_match("ml/sriov-a", "ml/sriov-ab"));
    assert_false(pf_k8s_network_name_match("sriov-a", "sriov-b"));
}

/* ---- PCIDEVICE_* */

static void test_pcidevice_var(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"mellanox.com/mlnx_sriov_rdma", "PCIDEVICE_MELLANOX_COM_MLNX_SRIOV_RDMA"},
        {"intel.com/intel_sriov_netdevice", "PCIDEVICE_INTEL_COM_INTEL_SRIOV_NETDEVICE"},
        {"nvidia.com/rail-1.a", "PCIDEVICE_NVIDIA_COM_RAIL-1_A"}, /* hyphens stay */
        {"openshift.io/mlxnics", "PCIDEVICE_OPENSHIFT_IO_MLXNICS"},
    };
    char out[128];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(pf_k8s_pcidevice_var(out, sizeof(out), cases[i][0]), 0);
        assert_string_equal(out, cases[i][1]);
    }
    assert_int_equal(pf_k8s_pcidevice_var(out, sizeof(out), "noslash"), PF_EINVAL);
    assert_int_equal(pf_k8s_pcidevice_var(out, sizeof(out), "/x"), PF_EINVAL);
    assert_int_equal(pf_k8s_pcidevice_var(out, sizeof(out), "a/"), PF_EINVAL);
    assert_int_equal(pf_k8s_pcidevice_var(out, sizeof(out), "a/b/c"), PF_EINVAL);
    assert_true(pf_k8s_pcidevice_var(out, 10, "mellanox.com/mlnx_sriov_rdma") < 0);
}

static void test_bdf_parse(void **state)
{
    (void)state;
    char b[PF_K8S_BDF_MAX];
    assert_int_equal(pf_k8s_bdf_parse(b, "0000:C4:00.2"), 0);
    assert_string_equal(b, "0000:c4:00.2");
    assert_int_equal(pf_k8s_bdf_parse(b, "0001:3b:1f.7"), 0);
    static const char *const bad[] = {"",
                                      "c4:00.2",
                                      "0000:c4:00.8",
                                      "0000:c4:20.0",
                                      "0000:c4:00.2 ",
                                      "0000-c4:00.2",
                                      "0000:g4:00.2",
                                      "0000:c4:00.2,"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (pf_k8s_bdf_parse(b, bad[i]) != PF_EINVAL) fail_msg("'%s' should not parse", bad[i]);
}

static void test_pciinfo_parse(void **state)
{
    (void)state;
    const char *j = "{\"0000:C4:00.2\":{\"generic\":{\"deviceID\":\"0000:c4:00.2\"},"
                    "\"rdma\":{\"rdma_cm\":\"/dev/infiniband/rdma_cm\",\"uverbs\":"
                    "\"/dev/infiniband/uverbs3\",\"umad\":\"/dev/infiniband/umad3\","
                    "\"rdma_dev\":\"mlx5_3\"}},"
                    "\"0000:c4:00.3\":{\"generic\":{\"deviceID\":\"0000:c4:00.3\"}}}";
    struct pf_k8s_pciinfo p;
    assert_int_equal(pf_k8s_pciinfo_parse(&p, j, strlen(j)), 0);
    assert_int_equal(p.n, 2);
    assert_string_equal(p.v[0].device, "0000:c4:00.2");
    assert_true(p.v[0].rdma);
    assert_string_equal(p.v[0].rdma_dev, "mlx5_3");
    assert_string_equal(p.v[0].uverbs, "/dev/infiniband/uverbs3");
    assert_string_equal(p.v[1].device, "0000:c4:00.3");
    assert_false(p.v[1].rdma);
    pf_k8s_pciinfo_free(&p);

    assert_int_equal(pf_k8s_pciinfo_parse(&p, "[]", 2), PF_EINVAL);
    assert_int_equal(pf_k8s_pciinfo_parse(&p, "{\"x\": 1}", 8), PF_EINVAL);
    assert_int_equal(pf_k8s_pciinfo_parse(&p, "{\"x\": {\"rdma\": 1}}", 18), PF_EINVAL);
    assert_int_equal(pf_k8s_pciinfo_parse(&p, "{", 1), PF_EINVAL);
    assert_int_equal(p.n, 0);
}

/* ---- podinfo folders (fixtures written by tests/fixtures/gen-podinfo.py) */

/* The root prefix must be absolute: tests run in tests/. */
static int root_at(struct pf_host *h, const char *fixture)
{
    char path[4096];
    th_abs_path(path, sizeof(path), fixture);
    return pf_host_init(h, path);
}

static void test_podinfo_healthy(void **state)
{
    (void)state;
    struct pf_host h;
    assert_int_equal(root_at(&h, "fixtures/podinfo-healthy"), 0);
    struct pf_k8s_podinfo pi;
    assert_int_equal(pf_k8s_podinfo_read(&pi, &h, NULL, NULL, NULL), 0);
    assert_string_equal(pi.dir, "/etc/podinfo");
    assert_true(pi.have_annotations);
    assert_true(pi.have_labels);
    assert_true(pi.networks_requested);
    assert_false(pi.netstatus_empty);
    assert_non_null(pi.netstatus);
    assert_string_equal(pi.netstatus_source, "annotation k8s.v1.cni.cncf.io/network-status in "
                                             "/etc/podinfo/annotations");
    /* every escape of the notes annotation came back */
    const struct pf_k8s_kv *kv = pf_k8s_map_find(&pi.annotations, "example.com/notes");
    assert_non_null(kv);
    const char want[] = "tab\there \"quoted\" back\\slash bell\a nul\0 \xc3\xa9 \xe2\x9c\x93 "
                        "\xe2\x80\x8b";
    assert_int_equal(kv->value_len, sizeof(want) - 1);
    assert_memory_equal(kv->value, want, sizeof(want) - 1);

    struct pf_k8s_netstatus s;
    assert_int_equal(pf_k8s_netstatus_parse(&s, pi.netstatus, strlen(pi.netstatus)), 0);
    assert_int_equal(s.n, 3);
    assert_string_equal(s.v[2].name, "ml/sriov-b");
    assert_string_equal(s.v[2].di_version, "1.0.0");
    assert_int_equal(s.v[2].rdma_devices.n, 2);
    pf_k8s_netstatus_free(&s);

    struct pf_node *pod = pf_node_new_map();
    pf_node_set_str(pod, "name", "trainer-3");
    pf_k8s_podinfo_record(&pi, pod);
    assert_string_equal(pf_node_get_str(pod, "name"), "trainer-3"); /* kept */
    struct pf_node *labels = pf_node_get(pod, "labels");
    assert_non_null(labels);
    assert_string_equal(pf_node_get_str(labels, "batch.kubernetes.io/job-completion-index"), "3");
    assert_string_equal(pf_node_get_str(labels, "jobset.sigs.k8s.io/jobset-name"), "llm");
    assert_null(pf_node_get(labels, "controller-uid")); /* not a label of interest */
    pf_node_free(pod);
    pf_k8s_podinfo_free(&pi);
}

/* An older Multus wrote only the plural key; a default network whose CNI config has no
 * name is an element with "name": "" (tests/fixtures/gen-podinfo.py, podinfo-old-noname):
 * both parse, nothing is rejected. */
static void test_podinfo_old_key_empty_name(void **state)
{
    (void)state;
    struct pf_host h;
    assert_int_equal(root_at(&h, "fixtures/podinfo-old-noname"), 0);
    struct pf_k8s_podinfo pi;
    assert_int_equal(pf_k8s_podinfo_read(&pi, &h, NULL, NULL, NULL), 0);
    assert_non_null(pi.netstatus);
    assert_non_null(strstr(pi.netstatus_source, "networks-status"));
    struct pf_k8s_netstatus s;
    assert_int_equal(pf_k8s_netstatus_parse(&s, pi.netstatus, strlen(pi.netstatus)), 0);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.v[0].name, "");
    assert_true(s.v[0].is_default);
    assert_string_equal(s.v[0].ips.v[0], "10.42.0.15");
    assert_ptr_equal(pf_k8s_netstatus_default(&s), &s.v[0]);
    assert_string_equal(s.v[1].name, "default/sriov-mlnx-dhcp");
    assert_string_equal(s.v[1].interface, "net1");
    assert_true(pf_k8s_network_name_match("sriov-mlnx-dhcp", s.v[1].name));
    pf_k8s_netstatus_free(&s);
    /* a missing name is read as "" too */
    const char *j = "[{\"interface\": \"net1\", \"ips\": [\"10.0.0.2\"]}]";
    assert_int_equal(pf_k8s_netstatus_parse(&s, j, strlen(j)), 0);
    assert_string_equal(s.v[0].name, "");
    pf_k8s_netstatus_free(&s);
    pf_k8s_podinfo_free(&pi);
}

static void test_podinfo_old_key_and_env(void **state)
{
    (void)state;
    struct pf_host h;
    assert_int_equal(root_at(&h, "fixtures/podinfo-old"), 0);
    struct pf_k8s_podinfo pi;
    assert_int_equal(pf_k8s_podinfo_read(&pi, &h, "/etc/podinfo/", "NETWORK_STATUS", "[]"), 0);
    assert_non_null(strstr(pi.netstatus_source, "networks-status"));
    struct pf_k8s_netstatus s;
    assert_int_equal(pf_k8s_netstatus_parse(&s, pi.netstatus, strlen(pi.netstatus)), 0);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.v[1].name, "sriov-a");
    assert_string_equal(s.v[1].ips.v[0], "10.203.1.11");
    pf_k8s_netstatus_free(&s);
    pf_k8s_podinfo_free(&pi);

    /* the first start: the key is there but empty; a variable set with fieldPath is used */
    assert_int_equal(root_at(&h, "fixtures/podinfo-empty"), 0);
    assert_int_equal(pf_k8s_podinfo_read(&pi, &h, NULL, NULL, NULL), 0);
    assert_null(pi.netstatus);
    assert_true(pi.netstatus_empty);
    pf_k8s_podinfo_free(&pi);
    assert_int_equal(pf_k8s_podinfo_read(&pi, &h, NULL, "NETWORK_STATUS", "[{\"name\":\"x\"}]"), 0);
    assert_string_equal(pi.netstatus, "[{\"name\":\"x\"}]");
    assert_string_equal(pi.netstatus_source, "variable NETWORK_STATUS");
    pf_k8s_podinfo_free(&pi);

    /* no folder at all is not an error */
    assert_int_equal(root_at(&h, "fixtures/sriov-healthy"), 0);
    assert_int_equal(pf_k8s_podinfo_read(&pi, &h, NULL, NULL, NULL), 0);
    assert_false(pi.have_annotations);
    assert_null(pi.netstatus);
    pf_k8s_podinfo_free(&pi);
}

static void test_podinfo_bad_names_file_and_line(void **state)
{
    (void)state;
    struct pf_host h;
    assert_int_equal(root_at(&h, "fixtures/podinfo-bad"), 0);
    struct pf_k8s_podinfo pi;
    assert_int_equal(pf_k8s_podinfo_read(&pi, &h, NULL, NULL, NULL), PF_EINVAL);
    assert_string_equal(pf_err_msg(), "/etc/podinfo/annotations:3: "
                                      "k8s.v1.cni.cncf.io/network-status: byte 13: unknown "
                                      "escape \\q");
    assert_false(pi.have_annotations);
    assert_true(pi.have_labels); /* the other file is still read */
    assert_null(pi.netstatus);
    pf_k8s_podinfo_free(&pi);
}

/* The request annotation as Multus parses it (multus-cni pkg/k8sclient/k8sclient.go
 * parsePodNetworkAnnotation): comma-separated "[ns/]name[@ifname]", or JSON selection elements;
 * the pod's namespace where an element names none; bad elements are errors naming them. */
static void test_network_requests(void **state)
{
    (void)state;
    struct pf_strlist r;
    const char *t = " ml/sriov-a@net1 , sriov-b,ml/sriov-a";
    assert_int_equal(pf_k8s_network_requests_parse(&r, t, strlen(t), "team"), 0);
    assert_int_equal(r.n, 2);
    assert_string_equal(r.v[0], "ml/sriov-a");
    assert_string_equal(r.v[1], "team/sriov-b");
    pf_strlist_free(&r);
    assert_int_equal(pf_k8s_network_requests_parse(&r, t, strlen(t), NULL), 0);
    assert_string_equal(r.v[1], "sriov-b");
    pf_strlist_free(&r);
    t = "[{\"name\": \"sriov-a\", \"namespace\": \"ml\", \"interface\": \"net1\"}, "
        "{\"name\": \"sriov-b\"}]";
    assert_int_equal(pf_k8s_network_requests_parse(&r, t, strlen(t), "ml"), 0);
    assert_int_equal(r.n, 2);
    assert_string_equal(r.v[1], "ml/sriov-b");
    pf_strlist_free(&r);
    static const char *const bad[] = {
        "a/b/c",           "ml/,x",        "a,,b",
        "[{\"name\": 3}]", "[{\"name\": ", "[{\"name\": \"x\", \"namespace\": \"a/b\"}]"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (pf_k8s_network_requests_parse(&r, bad[i], strlen(bad[i]), "ml") != PF_EINVAL)
            fail_msg("%s: not PF_EINVAL", bad[i]);
        assert_int_equal(r.n, 0);
        assert_non_null(strstr(pf_err_msg(), "networks request"));
    }
    assert_int_equal(pf_k8s_network_requests_parse(&r, "  ", 2, "ml"), 0);
    assert_int_equal(r.n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unquote_table),
        cmocka_unit_test(test_unquote_names_the_byte),
        cmocka_unit_test(test_map_parse_format),
        cmocka_unit_test(test_map_parse_errors),
        cmocka_unit_test(test_netstatus_parse),
        cmocka_unit_test(test_netstatus_no_default_marker),
        cmocka_unit_test(test_netstatus_errors),
        cmocka_unit_test(test_network_name_match),
        cmocka_unit_test(test_pcidevice_var),
        cmocka_unit_test(test_bdf_parse),
        cmocka_unit_test(test_pciinfo_parse),
        cmocka_unit_test(test_network_requests),
        cmocka_unit_test(test_podinfo_healthy),
        cmocka_unit_test(test_podinfo_old_key_and_env),
        cmocka_unit_test(test_podinfo_old_key_empty_name),
        cmocka_unit_test(test_podinfo_bad_names_file_and_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
