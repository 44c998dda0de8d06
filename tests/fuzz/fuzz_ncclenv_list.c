/* Fuzz target: NCCL's interface/HCA list syntax (NCCL_SOCKET_IFNAME, NCCL_IB_HCA:
 * "^=name:port,..."), matching, and the socket interfaces NCCL would pick from a fixed set of
 * interfaces with that list, NCCL_SOCKET_FAMILY and NCCL_COMM_ID. The input is split at the
 * first two '\n' into IFNAME, FAMILY and COMM_ID. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "../../pkg/ncclenv/ncclenv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void iface(struct pf_netif *n, const char *name, bool up, const char *addr, int family)
{
    memset(n, 0, sizeof(*n));
    strcpy(n->name, name);
    n->up = n->running = n->carrier = up;
    n->loopback = strcmp(name, "lo") == 0;
    n->mtu = 1500;
    if (addr) {
        n->addrs[0].family = family;
        strcpy(n->addrs[0].text, addr);
        n->addrs[0].prefix_len = family == AF_INET ? 24 : 64;
        n->naddrs = 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    char *family = NULL, *comm_id = NULL;
    char *nl = strchr(s, '\n');
    if (nl) {
        *nl = '\0';
        family = nl + 1;
        nl = strchr(family, '\n');
        if (nl) {
            *nl = '\0';
            comm_id = nl + 1;
        }
    }

    struct pf_ncclenv_list l;
    if (pf_ncclenv_list_parse(&l, s) == 0) {
        if (l.n > PF_NCCLENV_LIST_MAX) abort();
        static const char *const names[] = {"mlx5_0", "mlx5_1", "mlx5_10", "eth0", "net1", ""};
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
            for (int port = -1; port <= 2; port++)
                (void)pf_ncclenv_list_match(&l, names[i], port);
        for (size_t i = 0; i < l.n; i++) {
            if (!memchr(l.v[i].name, 0, sizeof(l.v[i].name))) abort();
            (void)pf_ncclenv_list_match(&l, l.v[i].name, l.v[i].port);
        }
    }

    struct pf_netif ifs_v[6];
    iface(&ifs_v[0], "lo", true, "127.0.0.1", AF_INET);
    iface(&ifs_v[1], "eth0", true, "10.135.0.147", AF_INET);
    iface(&ifs_v[2], "net1", true, "10.203.1.11", AF_INET);
    iface(&ifs_v[3], "ib0", true, "fd00::5", AF_INET6);
    iface(&ifs_v[4], "docker0", true, "172.17.0.1", AF_INET);
    iface(&ifs_v[5], "net2", false, NULL, AF_INET);
    struct pf_netif_list ifs = {ifs_v, 6};
    struct pf_strlist out = {0};
    int n = pf_ncclenv_socket_ifaces_ex(&out, &ifs, s, family, comm_id);
    if (n < 0 || n > 16 || (size_t)n != out.n) abort();
    pf_strlist_free(&out);
    (void)pf_ncclenv_socket_ifaces(&out, &ifs, s, family);
    pf_strlist_free(&out);
    free(s);
    return 0;
}
