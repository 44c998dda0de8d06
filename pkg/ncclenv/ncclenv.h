/* ncclenv: NCCL's own syntax for its environment variables, as NCCL 2.x parses them
 * (REFERENCE.md section 5): interface/HCA lists, integer parameters, the names NCCL reads,
 * and which socket interfaces NCCL would pick. */
#ifndef PF_NCCLENV_H
#define PF_NCCLENV_H

#include <stdbool.h>
#include <stddef.h>

#include "../base/base.h"
#include "../netif/netif.h"

#define PF_NCCLENV_LIST_MAX 32

struct pf_ncclenv_entry {
    char name[64];
    int port; /* -1: any */
};

/* "^=mlx5_0:1,mlx5_1" -> exclude, exact, [{mlx5_0,1},{mlx5_1,-1}] */
struct pf_ncclenv_list {
    bool exclude;
    bool exact;
    struct pf_ncclenv_entry v[PF_NCCLENV_LIST_MAX];
    size_t n;
};

/* Parses a list as NCCL does; PF_EINVAL with a message for text NCCL would misread. */
int pf_ncclenv_list_parse(struct pf_ncclenv_list *out, const char *text);
/* Whether a device (and port, -1 for any) is selected by the list, as NCCL matches it. */
bool pf_ncclenv_list_match(const struct pf_ncclenv_list *l, const char *name, int port);

/* NCCL's integer parameters: strtoll(s, NULL, 0). *clean is false when the text is not a
 * complete number (NCCL silently uses the parsed prefix, 0 for "true"). */
long long pf_ncclenv_int(const char *s, bool *clean);

/* Whether NCCL (documented or not) reads a variable of this name. */
bool pf_ncclenv_known(const char *name);
/* The nearest known name for a near miss, or NULL. */
const char *pf_ncclenv_suggest(const char *name);

/* The socket interfaces NCCL would use (bootstrap uses the first), by NCCL's rules:
 * NCCL_SOCKET_IFNAME (ignored unless longer than 1 character), NCCL_SOCKET_FAMILY,
 * IFF_RUNNING with an address, at most 16; otherwise ib*, then not docker/lo/virbr, then
 * docker, lo, virbr. ifname/family may be NULL (unset). */
int pf_ncclenv_socket_ifaces(struct pf_strlist *out, const struct pf_netif_list *ifs,
                             const char *ifname, const char *family);

#endif
