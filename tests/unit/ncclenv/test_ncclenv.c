/* NCCL's environment syntax: lists, integers, levels, names, socket interface choice. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "../../../pkg/ncclenv/ncclenv.h"

/* ---- lists */

static void test_list_exclude_exact_ports(void **state)
{
    (void)state;
    struct pf_ncclenv_list l;
    assert_int_equal(pf_ncclenv_list_parse(&l, "^=mlx5_0:1,mlx5_1"), 0);
    assert_true(l.exclude);
    assert_true(l.exact);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.v[0].name, "mlx5_0");
    assert_int_equal(l.v[0].port, 1);
    assert_string_equal(l.v[1].name, "mlx5_1");
    assert_int_equal(l.v[1].port, -1);
    /* exclusion: mlx5_0 port 1 and all of mlx5_1 are out, mlx5_0 port 2 and mlx5_10 in */
    assert_false(pf_ncclenv_list_match(&l, "mlx5_0", 1));
    assert_true(pf_ncclenv_list_match(&l, "mlx5_0", 2));
    assert_false(pf_ncclenv_list_match(&l, "mlx5_1", 1));
    assert_true(pf_ncclenv_list_match(&l, "mlx5_10", 1));
}

static void test_list_prefix_matches_longer_names(void **state)
{
    (void)state;
    struct pf_ncclenv_list l;
    assert_int_equal(pf_ncclenv_list_parse(&l, "mlx5_1"), 0);
    assert_false(l.exclude);
    assert_false(l.exact);
    assert_true(pf_ncclenv_list_match(&l, "mlx5_1", 1));
    assert_true(pf_ncclenv_list_match(&l, "mlx5_10", 1));
    assert_true(pf_ncclenv_list_match(&l, "mlx5_17", -1));
    assert_false(pf_ncclenv_list_match(&l, "mlx5_2", 1));
    assert_false(pf_ncclenv_list_match(&l, "mlx5_", 1)); /* shorter than the entry */
    assert_int_equal(pf_ncclenv_list_parse(&l, "=mlx5_1"), 0);
    assert_true(pf_ncclenv_list_match(&l, "mlx5_1", 1));
    assert_false(pf_ncclenv_list_match(&l, "mlx5_10", 1));
}

static void test_list_port_any(void **state)
{
    (void)state;
    struct pf_ncclenv_list l;
    assert_int_equal(pf_ncclenv_list_parse(&l, "mlx5_0:1,mlx5_2::3"), 0);
    assert_int_equal(l.v[0].port, 1);
    assert_int_equal(l.v[1].port, -1); /* empty port field means any */
    assert_true(pf_ncclenv_list_match(&l, "mlx5_0", -1));
    assert_true(pf_ncclenv_list_match(&l, "mlx5_0", 1));
    assert_false(pf_ncclenv_list_match(&l, "mlx5_0", 2));
    assert_true(pf_ncclenv_list_match(&l, "mlx5_2", 7));
}

static void test_list_caret_after_equal_is_not_exclusion(void **state)
{
    (void)state;
    struct pf_ncclenv_list l;
    assert_int_equal(pf_ncclenv_list_parse(&l, "=^eth0"), PF_EINVAL);
    assert_non_null(strstr(pf_err_msg(), "^="));
    assert_false(l.exclude);
    assert_true(l.exact);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.v[0].name, "^eth0");
    assert_false(pf_ncclenv_list_match(&l, "eth0", -1));
    assert_false(pf_ncclenv_list_match(&l, "net1", -1));
}

static void test_list_blank_after_comma(void **state)
{
    (void)state;
    struct pf_ncclenv_list l;
    assert_int_equal(pf_ncclenv_list_parse(&l, "eth0, net1"), PF_EINVAL);
    assert_non_null(strstr(pf_err_msg(), "blank"));
    assert_int_equal(l.n, 2);
    assert_string_equal(l.v[1].name, " net1");
    assert_true(pf_ncclenv_list_match(&l, "eth0", -1));
    assert_false(pf_ncclenv_list_match(&l, "net1", -1));
}

static void test_list_bad_port_and_empty_entries(void **state)
{
    (void)state;
    struct pf_ncclenv_list l;
    assert_int_equal(pf_ncclenv_list_parse(&l, "mlx5_0:x"), PF_EINVAL);
    assert_int_equal(l.v[0].port, 0); /* atoi("x") */
    assert_false(pf_ncclenv_list_match(&l, "mlx5_0", 1));
    /* empty entries are skipped like strtok does; a nameless entry is dropped */
    assert_int_equal(pf_ncclenv_list_parse(&l, ",,eth0,,"), 0);
    assert_int_equal(l.n, 1);
    assert_int_equal(pf_ncclenv_list_parse(&l, ":1,net1"), PF_EINVAL);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.v[0].name, "net1");
}

static void test_list_empty(void **state)
{
    (void)state;
    struct pf_ncclenv_list l;
    assert_int_equal(pf_ncclenv_list_parse(&l, ""), 0);
    assert_true(pf_ncclenv_list_match(&l, "anything", -1)); /* no list: everything */
    assert_int_equal(pf_ncclenv_list_parse(&l, NULL), 0);
    assert_true(pf_ncclenv_list_match(&l, "anything", -1));
    assert_int_equal(pf_ncclenv_list_parse(&l, "^"), PF_EINVAL);
    assert_true(l.exclude);
    assert_false(pf_ncclenv_list_match(&l, "anything", -1)); /* "^": nothing */
}

static void test_list_limits(void **state)
{
    (void)state;
    struct pf_ncclenv_list l;
    char big[2048] = "";
    for (int i = 0; i < 40; i++) {
        char e[16];
        snprintf(e, sizeof(e), "%sd%d", i ? "," : "", i);
        strcat(big, e);
    }
    assert_int_equal(pf_ncclenv_list_parse(&l, big), PF_EINVAL);
    assert_int_equal(l.n, PF_NCCLENV_LIST_MAX);
    assert_string_equal(l.v[31].name, "d31");
    char longname[200];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(pf_ncclenv_list_parse(&l, longname), PF_EINVAL);
    assert_int_equal(strlen(l.v[0].name), 63);
}

/* ---- integers */

static void test_int_strtoll_base0(void **state)
{
    (void)state;
    bool clean;
    assert_int_equal(pf_ncclenv_int("1", &clean), 1);
    assert_true(clean);
    assert_int_equal(pf_ncclenv_int("010", &clean), 8);
    assert_true(clean);
    assert_int_equal(pf_ncclenv_int("0x10", &clean), 16);
    assert_true(clean);
    assert_int_equal(pf_ncclenv_int("-2", &clean), -2);
    assert_true(clean);
    assert_int_equal(pf_ncclenv_int("08", &clean), 0);
    assert_false(clean);
    assert_int_equal(pf_ncclenv_int("true", &clean), 0);
    assert_false(clean);
    assert_int_equal(pf_ncclenv_int("1abc", &clean), 1);
    assert_false(clean);
    assert_int_equal(pf_ncclenv_int(" 4 ", &clean), 4);
    assert_true(clean);
    assert_int_equal(pf_ncclenv_int("", &clean), 0);
    assert_false(clean);
}

static void test_param_defaults(void **state)
{
    (void)state;
    long long v;
    assert_int_equal(pf_ncclenv_param(NULL, -2, &v), PF_NCCLENV_INT_UNSET);
    assert_int_equal(v, -2);
    assert_int_equal(pf_ncclenv_param("", -2, &v), PF_NCCLENV_INT_UNSET);
    assert_int_equal(v, -2);
    assert_int_equal(pf_ncclenv_param("true", 0, &v), PF_NCCLENV_INT_PARTIAL);
    assert_int_equal(v, 0);
    assert_int_equal(pf_ncclenv_param("99999999999999999999", 7, &v), PF_NCCLENV_INT_RANGE);
    assert_int_equal(v, 7);
    assert_int_equal(pf_ncclenv_param("0x1F", 0, &v), PF_NCCLENV_INT_CLEAN);
    assert_int_equal(v, 31);
    assert_true(pf_ncclenv_is_octal("010"));
    assert_true(pf_ncclenv_is_octal("08"));
    assert_false(pf_ncclenv_is_octal("0"));
    assert_false(pf_ncclenv_is_octal("0x10"));
    assert_false(pf_ncclenv_is_octal("10"));
}

/* ---- levels */

static void test_levels(void **state)
{
    (void)state;
    assert_string_equal(pf_ncclenv_level("PHB"), "PHB");
    assert_string_equal(pf_ncclenv_level("C2C"), "C2C");
    assert_null(pf_ncclenv_level("phb")); /* case-sensitive */
    assert_null(pf_ncclenv_level("NODE"));
    assert_null(pf_ncclenv_level(""));
    assert_string_equal(pf_ncclenv_level("0"), "LOC");
    assert_string_equal(pf_ncclenv_level("1"), "PIX");
    assert_string_equal(pf_ncclenv_level("2"), "PXB");
    assert_string_equal(pf_ncclenv_level("3"), "PHB");
    assert_string_equal(pf_ncclenv_level("4"), "SYS");
    assert_string_equal(pf_ncclenv_level("9"), "SYS");
    assert_null(pf_ncclenv_level("99999999999"));
}

/* ---- names */

static void test_names_table_sorted_unique(void **state)
{
    (void)state;
    assert_true(pf_ncclenv_names_count > 200);
    for (size_t i = 1; i < pf_ncclenv_names_count; i++)
        assert_true(strcmp(pf_ncclenv_names[i - 1], pf_ncclenv_names[i]) < 0);
    for (size_t i = 0; i < pf_ncclenv_names_count; i++)
        assert_true(strncmp(pf_ncclenv_names[i], "NCCL_", 5) == 0);
}

static void test_known_names(void **state)
{
    (void)state;
    static const char *const yes[] = {
        "NCCL_IB_HCA",        "NCCL_SOCKET_IFNAME", "NCCL_HOSTID",          "NCCL_COMM_ID",
        "NCCL_SOCKET_INLINE", "NCCL_P2P_LEVEL",     "NCCL_NET_GDR_LEVEL",   "NCCL_IB_GDR_LEVEL",
        "NCCL_CONF_FILE",     "NCCL_DEBUG_SUBSYS",  "NCCL_NSOCKS_PERTHREAD"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        assert_true(pf_ncclenv_known(yes[i]));
    assert_false(pf_ncclenv_known("NCCL_ASYNC_ERROR_HANDLING"));
    assert_false(pf_ncclenv_known("NCCL_SOCKET_IFNAMES"));
    assert_false(pf_ncclenv_known("nccl_ib_hca"));
    assert_false(pf_ncclenv_known("NCCL_INIT")); /* a debug subsystem, not a variable */
    assert_false(pf_ncclenv_known(""));
    assert_false(pf_ncclenv_known(NULL));
}

static void test_suggest_near_misses_only(void **state)
{
    (void)state;
    assert_string_equal(pf_ncclenv_suggest("NCCL_SOCKET_IFNAMES"), "NCCL_SOCKET_IFNAME");
    assert_string_equal(pf_ncclenv_suggest("NCCL_NSOCKS_PER_THREAD"), "NCCL_NSOCKS_PERTHREAD");
    assert_string_equal(pf_ncclenv_suggest("nccl_ib_hca"), "NCCL_IB_HCA");
    assert_string_equal(pf_ncclenv_suggest("NCCL_IB_HCAS"), "NCCL_IB_HCA");
    assert_null(pf_ncclenv_suggest("NCCL_IB_HCA"));
    assert_null(pf_ncclenv_suggest("NCCL_TOTALLY_DIFFERENT_THING"));
    assert_null(pf_ncclenv_suggest("NCCL_ASYNC_ERROR_HANDLING"));
    assert_null(pf_ncclenv_suggest(""));
}

static void test_int_params_and_obsolete(void **state)
{
    (void)state;
    assert_true(pf_ncclenv_int_names_count > 100);
    for (size_t i = 1; i < pf_ncclenv_int_names_count; i++)
        assert_true(strcmp(pf_ncclenv_int_names[i - 1], pf_ncclenv_int_names[i]) < 0);
    assert_null(pf_ncclenv_int_names[pf_ncclenv_int_names_count]);
    assert_true(pf_ncclenv_is_int_param("NCCL_IB_DISABLE"));
    assert_true(pf_ncclenv_is_int_param("NCCL_SOCKET_NTHREADS"));
    assert_true(pf_ncclenv_is_int_param("NCCL_IB_TIMEOUT"));
    assert_false(pf_ncclenv_is_int_param("NCCL_DEBUG"));
    assert_false(pf_ncclenv_is_int_param("NCCL_IB_HCA"));
    assert_false(pf_ncclenv_is_int_param("NCCL_P2P_LEVEL"));
    for (size_t i = 0; i < pf_ncclenv_int_names_count; i++)
        assert_true(pf_ncclenv_known(pf_ncclenv_int_names[i]));
    assert_non_null(strstr(pf_ncclenv_obsolete("NCCL_IB_GDR_LEVEL"), "NCCL_NET_GDR_LEVEL"));
    assert_true(pf_ncclenv_known("NCCL_IB_GDR_LEVEL")); /* documented: not a typo */
    assert_null(pf_ncclenv_obsolete("NCCL_NET_GDR_LEVEL"));
}

static void test_foreign_names(void **state)
{
    (void)state;
    assert_non_null(
        strstr(pf_ncclenv_foreign("NCCL_ASYNC_ERROR_HANDLING"), "TORCH_NCCL_ASYNC_ERROR_HANDLING"));
    assert_non_null(pf_ncclenv_foreign("NCCL_VERSION"));
    assert_null(pf_ncclenv_foreign("NCCL_IB_HCA"));
    assert_null(pf_ncclenv_foreign("NCCL_FOO"));
}

/* ---- socket interfaces */

static void add_if(struct pf_netif_list *l, const char *name, bool running, const char *v4,
                   int v4len, const char *v6)
{
    l->v = realloc(l->v, (l->n + 1) * sizeof(*l->v));
    assert_non_null(l->v);
    struct pf_netif *i = &l->v[l->n];
    memset(i, 0, sizeof(*i));
    snprintf(i->name, sizeof(i->name), "%s", name);
    i->index = (int)l->n + 1;
    i->up = true;
    i->running = running;
    i->carrier = running;
    i->loopback = strcmp(name, "lo") == 0;
    i->mtu = 1500;
    if (v4) {
        i->addrs[i->naddrs].family = AF_INET;
        snprintf(i->addrs[i->naddrs].text, sizeof(i->addrs[0].text), "%s", v4);
        i->addrs[i->naddrs++].prefix_len = v4len;
    }
    if (v6) {
        i->addrs[i->naddrs].family = AF_INET6;
        snprintf(i->addrs[i->naddrs].text, sizeof(i->addrs[0].text), "%s", v6);
        i->addrs[i->naddrs++].prefix_len = 64;
    }
    l->n++;
}

static void pod(struct pf_netif_list *l)
{
    memset(l, 0, sizeof(*l));
    add_if(l, "lo", true, "127.0.0.1", 8, "::1");
    add_if(l, "eth0", true, "10.0.0.5", 24, NULL);
    add_if(l, "docker0", true, "172.17.0.1", 16, NULL);
    add_if(l, "net1", true, NULL, 0, "fd00::1");
    add_if(l, "net2", false, "10.1.0.1", 24, NULL);
    add_if(l, "net3", true, "10.2.0.1", 24, NULL);
}

static void joined(char *out, size_t n, const struct pf_strlist *l)
{
    pf_strlist_join(out, n, l, ",");
}

static void expect_ifaces(const struct pf_netif_list *ifs, const char *ifname, const char *fam,
                          const char *comm, const char *want)
{
    struct pf_strlist got = {0};
    int n = pf_ncclenv_socket_ifaces_ex(&got, ifs, ifname, fam, comm);
    char s[512] = "";
    joined(s, sizeof(s), &got);
    assert_string_equal(s, want);
    assert_int_equal(n, (int)got.n);
    pf_strlist_free(&got);
}

static void test_socket_auto_order(void **state)
{
    (void)state;
    struct pf_netif_list l;
    pod(&l);
    /* IPv4 addresses first (by index), then IPv6; not docker/lo/virbr; net2 not running */
    expect_ifaces(&l, NULL, NULL, NULL, "eth0,net3,net1");
    expect_ifaces(&l, "e", NULL, NULL, "eth0,net3,net1"); /* one character: ignored */
    expect_ifaces(&l, NULL, "AF_INET6", NULL, "net1");    /* ::1 is skipped */
    expect_ifaces(&l, NULL, "AF_INET", NULL, "eth0,net3");
    expect_ifaces(&l, NULL, "inet", NULL, "eth0,net3,net1"); /* unknown family: no filter */
    /* NCCL_COMM_ID's subnet picks one interface */
    expect_ifaces(&l, NULL, NULL, "10.2.0.77:29500", "net3");
    expect_ifaces(&l, NULL, NULL, "comm-host:29500", "eth0,net3,net1");
    add_if(&l, "ib0", true, "192.168.0.2", 24, NULL);
    expect_ifaces(&l, NULL, NULL, NULL, "ib0");
    expect_ifaces(&l, NULL, NULL, "10.2.0.77:29500", "ib0");
    pf_netif_list_free(&l);
}

static void test_socket_user_list(void **state)
{
    (void)state;
    struct pf_netif_list l;
    pod(&l);
    expect_ifaces(&l, "net", NULL, NULL, "net3,net1");
    expect_ifaces(&l, "=net", NULL, NULL, "");
    expect_ifaces(&l, "eth9", NULL, NULL, "");
    expect_ifaces(&l, "^eth", NULL, NULL, "lo,docker0,net3,net1");
    expect_ifaces(&l, "^=eth0,lo,docker0", NULL, NULL, "net3,net1");
    expect_ifaces(&l, "net2", NULL, NULL, ""); /* not running */
    pf_netif_list_free(&l);
}

static void test_socket_fallbacks_and_limit(void **state)
{
    (void)state;
    struct pf_netif_list l;
    memset(&l, 0, sizeof(l));
    add_if(&l, "lo", true, "127.0.0.1", 8, "::1");
    add_if(&l, "docker0", true, "172.17.0.1", 16, NULL);
    expect_ifaces(&l, NULL, NULL, NULL, "docker0");
    l.v[1].running = false;
    expect_ifaces(&l, NULL, NULL, NULL, "lo");
    pf_netif_list_free(&l);

    memset(&l, 0, sizeof(l));
    for (int i = 0; i < 20; i++) {
        char name[16], addr[32];
        snprintf(name, sizeof(name), "net%d", i);
        snprintf(addr, sizeof(addr), "10.9.%d.1", i);
        add_if(&l, name, true, addr, 24, NULL);
    }
    struct pf_strlist got = {0};
    assert_int_equal(pf_ncclenv_socket_ifaces(&got, &l, NULL, NULL), 16);
    assert_string_equal(got.v[0], "net0");
    assert_string_equal(got.v[15], "net15");
    pf_strlist_free(&got);
    pf_netif_list_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_exclude_exact_ports),
        cmocka_unit_test(test_list_prefix_matches_longer_names),
        cmocka_unit_test(test_list_port_any),
        cmocka_unit_test(test_list_caret_after_equal_is_not_exclusion),
        cmocka_unit_test(test_list_blank_after_comma),
        cmocka_unit_test(test_list_bad_port_and_empty_entries),
        cmocka_unit_test(test_list_empty),
        cmocka_unit_test(test_list_limits),
        cmocka_unit_test(test_int_strtoll_base0),
        cmocka_unit_test(test_param_defaults),
        cmocka_unit_test(test_levels),
        cmocka_unit_test(test_names_table_sorted_unique),
        cmocka_unit_test(test_known_names),
        cmocka_unit_test(test_suggest_near_misses_only),
        cmocka_unit_test(test_int_params_and_obsolete),
        cmocka_unit_test(test_foreign_names),
        cmocka_unit_test(test_socket_auto_order),
        cmocka_unit_test(test_socket_user_list),
        cmocka_unit_test(test_socket_fallbacks_and_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
