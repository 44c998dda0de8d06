/* netif: the real network interfaces of this network namespace (not under the root prefix:
 * tests create real interfaces in their own namespaces). */
#ifndef PF_NETIF_H
#define PF_NETIF_H

#include <stdbool.h>
#include <stddef.h>

#include "../base/base.h"

#define PF_NETIF_MAX_ADDRS 16

struct pf_netif_addr {
    int family;    /* AF_INET or AF_INET6 */
    char text[64]; /* "10.0.0.5" or "fe80::1" (no prefix length) */
    int prefix_len;
};

struct pf_netif {
    char name[64];
    int index;
    unsigned flags; /* IFF_* */
    bool up;        /* IFF_UP */
    bool running;   /* IFF_RUNNING: NCCL's condition */
    bool carrier;   /* IFF_LOWER_UP */
    bool loopback;
    int mtu;
    char mac[32]; /* "aa:bb:cc:dd:ee:ff", "" when none */
    struct pf_netif_addr addrs[PF_NETIF_MAX_ADDRS];
    size_t naddrs;
};

struct pf_netif_list {
    struct pf_netif *v;
    size_t n;
};

/* Lists every interface of this network namespace, sorted by index. */
int pf_netif_list(struct pf_netif_list *out);
const struct pf_netif *pf_netif_find(const struct pf_netif_list *l, const char *name);
/* True when the interface holds this address (text form, a prefix length is ignored). */
bool pf_netif_has_addr(const struct pf_netif *i, const char *addr);
void pf_netif_list_free(struct pf_netif_list *l);

#endif
