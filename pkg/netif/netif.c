#define _GNU_SOURCE
#include "netif.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef IFF_LOWER_UP
#define IFF_LOWER_UP 0x10000
#endif

static struct pf_netif *get_or_add(struct pf_netif_list *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].name, name) == 0) return &l->v[i];
    if (l->n >= 4096) return NULL;
    l->v = pf_xrealloc(l->v, (l->n + 1) * sizeof(*l->v));
    struct pf_netif *i = &l->v[l->n++];
    memset(i, 0, sizeof(*i));
    snprintf(i->name, sizeof(i->name), "%s", name);
    i->index = (int)if_nametoindex(name);
    return i;
}

static int prefix_of(const struct sockaddr *mask)
{
    if (!mask) return -1;
    const unsigned char *b;
    size_t n;
    if (mask->sa_family == AF_INET) {
        b = (const unsigned char *)&((const struct sockaddr_in *)(const void *)mask)->sin_addr;
        n = 4;
    } else if (mask->sa_family == AF_INET6) {
        b = (const unsigned char *)&((const struct sockaddr_in6 *)(const void *)mask)->sin6_addr;
        n = 16;
    } else {
        return -1;
    }
    int bits = 0;
    for (size_t k = 0; k < n; k++)
        for (int j = 7; j >= 0; j--)
            bits += (b[k] >> j) & 1;
    return bits;
}

static int cmp_index(const void *a, const void *b)
{
    const struct pf_netif *x = a, *y = b;
    return (x->index > y->index) - (x->index < y->index);
}

int pf_netif_list(struct pf_netif_list *out)
{
    struct ifaddrs *ifa = NULL;
    memset(out, 0, sizeof(*out));
    if (getifaddrs(&ifa) != 0) return pf_err_set(PF_ERR, "getifaddrs: %s", strerror(errno));
    for (struct ifaddrs *p = ifa; p; p = p->ifa_next) {
        if (!p->ifa_name) continue;
        struct pf_netif *i = get_or_add(out, p->ifa_name);
        if (!i) break;
        i->flags = p->ifa_flags;
        if (!p->ifa_addr) continue;
        int fam = p->ifa_addr->sa_family;
        if (fam == AF_PACKET) {
            const struct sockaddr_ll *ll = (const struct sockaddr_ll *)(const void *)p->ifa_addr;
            if (ll->sll_halen == 6) {
                const unsigned char *m = ll->sll_addr;
                snprintf(i->mac, sizeof(i->mac), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2],
                         m[3], m[4], m[5]);
            }
        } else if ((fam == AF_INET || fam == AF_INET6) && i->naddrs < PF_NETIF_MAX_ADDRS) {
            struct pf_netif_addr *a = &i->addrs[i->naddrs];
            const void *src =
                fam == AF_INET
                    ? (const void *)&((const struct sockaddr_in *)(const void *)p->ifa_addr)
                          ->sin_addr
                    : (const void *)&((const struct sockaddr_in6 *)(const void *)p->ifa_addr)
                          ->sin6_addr;
            if (inet_ntop(fam, src, a->text, sizeof(a->text))) {
                a->family = fam;
                a->prefix_len = prefix_of(p->ifa_netmask);
                i->naddrs++;
            }
        }
    }
    freeifaddrs(ifa);

    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    for (size_t k = 0; k < out->n; k++) {
        struct pf_netif *i = &out->v[k];
        if (fd >= 0) {
            struct ifreq ifr;
            memset(&ifr, 0, sizeof(ifr));
            memcpy(ifr.ifr_name, i->name, strnlen(i->name, sizeof(ifr.ifr_name) - 1));
            if (ioctl(fd, SIOCGIFMTU, &ifr) == 0) i->mtu = ifr.ifr_mtu;
            if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0)
                i->flags = (unsigned)(unsigned short)ifr.ifr_flags | (i->flags & ~0xffffu);
        }
        i->up = i->flags & IFF_UP;
        i->running = i->flags & IFF_RUNNING;
        i->carrier = i->flags & IFF_LOWER_UP;
        i->loopback = i->flags & IFF_LOOPBACK;
    }
    if (fd >= 0) close(fd);
    if (out->n > 1) qsort(out->v, out->n, sizeof(*out->v), cmp_index);
    return 0;
}

const struct pf_netif *pf_netif_find(const struct pf_netif_list *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].name, name) == 0) return &l->v[i];
    return NULL;
}

bool pf_netif_has_addr(const struct pf_netif *i, const char *addr)
{
    char want[64];
    snprintf(want, sizeof(want), "%s", addr);
    char *slash = strchr(want, '/');
    if (slash) *slash = '\0';
    /* compare in binary form so that "fe80::1" and "fe80:0::1" agree */
    unsigned char a[16], b[16];
    int fam = strchr(want, ':') ? AF_INET6 : AF_INET;
    if (inet_pton(fam, want, a) != 1) return false;
    for (size_t k = 0; k < i->naddrs; k++) {
        if (i->addrs[k].family != fam) continue;
        if (inet_pton(fam, i->addrs[k].text, b) == 1 && memcmp(a, b, fam == AF_INET ? 4 : 16) == 0)
            return true;
    }
    return false;
}

void pf_netif_list_free(struct pf_netif_list *l)
{
    free(l->v);
    l->v = NULL;
    l->n = 0;
}
