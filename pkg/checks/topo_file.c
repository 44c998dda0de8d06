/* The PCI bus ids an NCCL topology file (NCCL_TOPO_FILE) names: the busid="..." attributes
 * of its <cpu>/<pci>/<gpu>/<nic> elements. A plain attribute scanner, no XML parser: NCCL's
 * own reader needs no more (see docs/checks/40-nccl-env.md, topo-file-mismatch). */
#define _GNU_SOURCE
#include "checks.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

size_t pf_topo_busids(struct pf_strlist *out, const char *text, size_t len)
{
    size_t found = 0;
    for (size_t i = 0; i + 7 <= len; i++) {
        if (strncasecmp(text + i, "busid", 5) != 0) continue;
        if (i > 0 && !isspace((unsigned char)text[i - 1])) continue;
        size_t j = i + 5;
        while (j < len && isspace((unsigned char)text[j]))
            j++;
        if (j >= len || text[j] != '=') continue;
        j++;
        while (j < len && isspace((unsigned char)text[j]))
            j++;
        if (j >= len || (text[j] != '"' && text[j] != '\'')) continue;
        char q = text[j++];
        char id[PF_TOPO_BUSID_MAX];
        size_t n = 0;
        bool ok = true;
        while (j < len && text[j] != q) {
            unsigned char c = (unsigned char)text[j++];
            if (n + 1 >= sizeof(id) || !(isxdigit(c) || c == ':' || c == '.')) ok = false;
            if (ok) id[n++] = (char)tolower(c);
        }
        if (j >= len || !ok || n == 0) continue;
        id[n] = '\0';
        i = j;
        if (pf_strlist_has(out, id)) continue;
        if (out->n >= PF_TOPO_BUSIDS_MAX) break;
        pf_strlist_add(out, id);
        found++;
    }
    return found;
}
