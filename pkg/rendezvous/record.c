/* What the meeting records, as facts for the caller: how this pod's meeting ended (and why),
 * its counters, and rank 0's refusals; the progress lines it hands the caller, and the naming
 * of ranks every file of the meeting uses. The meeting names no check and no finding:
 * pkg/run (meet.c) and pkg/fleet (agree.c) give these facts their names. */
#define _GNU_SOURCE
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- how the meeting ended, its refusals */

void rdv_end(struct rdv_session *S, enum pf_rdv_end end, const char *fmt, ...)
{
    S->end = end;
    PF_FORMAT_ARGS(S->end_msg, fmt);
}

void rdv_end_refused(struct rdv_session *S, enum pf_wire_refusal why, const char *text)
{
    S->refusal = why;
    rdv_end(S, PF_RDV_END_REJECTED, "%s", text);
}

static bool same_refusal(const struct pf_wire_refused *a, const struct pf_wire_refused *b)
{
    return a->why == b->why && a->rank == b->rank && a->world == b->world &&
           strcmp(a->claim, b->claim) == 0 && strcmp(a->holder, b->holder) == 0 &&
           strcmp(a->holder_addr, b->holder_addr) == 0 && strcmp(a->job, b->job) == 0;
}

void rdv_refused(struct rdv_session *S, const struct pf_wire_refused *x)
{
    for (size_t k = 0; k < S->nrefusals; k++)
        if (same_refusal(&S->refusals[k], x)) return;
    if (S->nrefusals == RDV_REFUSALS_MAX) {
        S->refusals_left_out++;
        return;
    }
    S->refusals = pf_xrealloc(S->refusals, (S->nrefusals + 1) * sizeof(*S->refusals));
    S->refusals[S->nrefusals++] = *x;
}

void rdv_say(struct rdv_session *S, const char *fmt, ...)
{
    if (!S->su.progress) return;
    char line[1024];
    PF_FORMAT_ARGS(line, fmt);
    S->su.progress(S->su.arg, line);
}

/* ---- naming ranks, the guard: what every file of the meeting calls */

double rdv_wait_end(const struct rdv_session *S, double secs)
{
    return secs > 0 ? pf_deadline_in(secs, S->cutoff) : S->cutoff;
}

const char *rdv_pod_of(const struct rdv_session *S, int rank, char *buf, size_t n)
{
    if (S->m && rank >= 0 && rank < S->world && S->m[rank].pod[0]) return S->m[rank].pod;
    for (int i = 0; i < S->n; i++)
        if (S->rk[i] == rank && S->ro.peer[i].pod[0]) return S->ro.peer[i].pod;
    pf_identity_pod_name(buf, n, &S->id, rank);
    return buf;
}

const char *rdv_node_of(const struct rdv_session *S, int rank)
{
    if (S->m && rank >= 0 && rank < S->world && S->m[rank].node[0]) return S->m[rank].node;
    for (int i = 0; i < S->n; i++)
        if (S->rk[i] == rank) return S->ro.peer[i].node;
    return "";
}

/* "rank 5 (trainer-5)" */
void rdv_who(char *out, size_t n, const struct rdv_session *S, int rank)
{
    char b[NAME_MAX_];
    const char *p = rdv_pod_of(S, rank, b, sizeof(b));
    if (p && *p)
        snprintf(out, n, "rank %d (%s)", rank, p);
    else
        snprintf(out, n, "rank %d", rank);
}

/* Appends "5, 11, 12": at most PF_WIRE_LIST_MAX, then "and K more". */
void rdv_list_numbers(struct pf_buf *b, const int *ranks, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (i == PF_WIRE_LIST_MAX) {
            pf_buf_addf(b, " and %zu more", n - i);
            break;
        }
        pf_buf_addf(b, "%s%d", i ? ", " : "", ranks[i]);
    }
}

void rdv_guard(struct rdv_session *S, const char *fmt, ...)
{
    char doing[768];
    PF_FORMAT_ARGS(doing, fmt);
    if (S->su.doing) S->su.doing(S->su.arg, doing);
}
