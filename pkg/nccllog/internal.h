/* nccllog: declarations shared by the module's files (not a public header). */
#ifndef PF_NCCLLOG_INTERNAL_H
#define PF_NCCLLOG_INTERNAL_H

#include "nccllog.h"

#define NL_PROCS_MAX 4096
#define NL_LIST_MAX 64
#define NL_WARNS_KEPT 16

/* What a launcher or log collector put around NCCL's line. */
struct nl_decor {
    char pod[128]; /* kubectl --prefix pod, docker compose service, Ray ip */
    char tag[32];  /* launcher rank: Open MPI [1,N], [rankN], [defaultN], srun -l "N: " */
    int repeat;    /* Ray " [repeated Nx across cluster]": N, else 1 */
};

/* decor.c: cleans buf in place (ANSI colours, CR, control bytes and invalid UTF-8 become
 * spaces or '?') and returns where NCCL's own text starts after launcher prefixes and
 * timestamps; d gets what the prefixes said. */
char *nl_decor_strip(char *buf, struct nl_decor *d);
/* Strips a leading timestamp from s (ISO 8601, "[YYYY-MM-DD hh:mm:ss]", syslog "Mon dd
 * hh:mm:ss"); returns the text after it (s when there is none). */
const char *nl_skip_timestamp(const char *s);

/* lines.c */
void nl_copy(char *out, size_t n, const char *s, size_t len);
void nl_list_add(struct pf_strlist *l, const char *s);
void nl_parse_info(struct pf_nccllog *log, struct pf_nccllog_proc *p, const char *msg);
void nl_parse_warn(struct pf_nccllog_proc *p, const char *where, size_t wlen, const char *msg,
                   int repeat);
bool nl_parse_version(char *ver, size_t vn, char *cuda, size_t cn, const char *msg);

/* model.c */
struct pf_nccllog_proc *nl_find_proc(struct pf_nccllog *log, const char *host, long pid,
                                     const char *pod);
void nl_proc_name(char *out, size_t n, const struct pf_nccllog_proc *p);
void nl_host_free(struct pf_nccllog_host *h);
/* Whether the process used CollNet: its own lines, or 2.20's "N collnet channels" (2.21 to
 * 2.30 print the ring channel count there, src/init.cc). */
bool nl_proc_collnet(const struct pf_nccllog_proc *p);

/* verdict.c: "0-7,16,18-19" from a list of numbers as text. */
void nl_ranks_text(char *out, size_t n, const struct pf_strlist *l);

#endif
