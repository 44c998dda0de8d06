/* pkg/netif on real interfaces: the loopback of this namespace, and (as root) a veth pair
 * made in a private network namespace, read back with its MTU, state, MAC and address. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../../pkg/netif/netif.h"
#include "../helpers/helpers.h"

static void test_loopback(void **state)
{
    (void)state;
    struct pf_netif_list l = {0};
    assert_int_equal(pf_netif_list(&l), 0);
    assert_true(l.n >= 1);
    for (size_t i = 1; i < l.n; i++)
        assert_true(l.v[i - 1].index < l.v[i].index); /* sorted by index */
    const struct pf_netif *lo = pf_netif_find(&l, "lo");
    assert_non_null(lo);
    assert_true(lo->loopback);
    assert_true(lo->index > 0);
    assert_true(lo->mtu > 0);
    if (lo->up) {
        assert_true(pf_netif_has_addr(lo, "127.0.0.1"));
        assert_true(pf_netif_has_addr(lo, "127.0.0.1/8")); /* a prefix length is ignored */
    }
    assert_false(pf_netif_has_addr(lo, "192.0.2.1"));
    assert_null(pf_netif_find(&l, "no-such-if0"));
    pf_netif_list_free(&l);
}

static void test_veth_in_own_namespace(void **state)
{
    (void)state;
    if (geteuid() != 0 || (access("/usr/sbin/ip", X_OK) != 0 && access("/sbin/ip", X_OK) != 0)) {
        skip();
        return;
    }
    /* a namespace of this process alone: it goes when the test ends */
    if (unshare(CLONE_NEWNET) != 0) {
        skip();
        return;
    }
    th_sh("ip link add pft0 type veth peer name pft1 && ip link set pft0 mtu 1400 &&"
          " ip link set pft0 address 02:00:00:00:00:07 && ip addr add 10.9.8.7/24 dev pft0 &&"
          " ip link set pft1 up && ip link set pft0 up");
    struct pf_netif_list l = {0};
    assert_int_equal(pf_netif_list(&l), 0);
    assert_int_equal(l.n, 3); /* lo, pft0, pft1 */
    const struct pf_netif *a = pf_netif_find(&l, "pft0");
    const struct pf_netif *b = pf_netif_find(&l, "pft1");
    const struct pf_netif *lo = pf_netif_find(&l, "lo");
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(lo);
    assert_false(lo->up); /* a new namespace's loopback is down */
    assert_false(a->loopback);
    assert_int_equal(a->mtu, 1400);
    assert_int_equal(b->mtu, 1500);
    assert_true(a->up);
    assert_string_equal(a->mac, "02:00:00:00:00:07");
    assert_true(pf_netif_has_addr(a, "10.9.8.7"));
    assert_false(pf_netif_has_addr(b, "10.9.8.7"));
    int v4 = -1;
    for (size_t i = 0; i < a->naddrs; i++)
        if (a->addrs[i].family == AF_INET) v4 = (int)i;
    assert_true(v4 >= 0);
    assert_string_equal(a->addrs[v4].text, "10.9.8.7");
    assert_int_equal(a->addrs[v4].prefix_len, 24);
    pf_netif_list_free(&l);
    /* one end down: the other loses its carrier, not its address */
    th_sh("ip link set pft1 down");
    assert_int_equal(pf_netif_list(&l), 0);
    a = pf_netif_find(&l, "pft0");
    b = pf_netif_find(&l, "pft1");
    assert_false(b->up);
    assert_true(a->up);
    assert_false(a->carrier);
    assert_false(a->running);
    assert_true(pf_netif_has_addr(a, "10.9.8.7"));
    pf_netif_list_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loopback),
        cmocka_unit_test(test_veth_in_own_namespace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
