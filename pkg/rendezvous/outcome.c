/* What the meeting concluded, as data for the caller: the ranks lost and the ranks that
 * reported a failure (marks), and the notes that the caller writes into its verdict (the
 * checks `rendezvous` and `collective.tcp`, the pod's rank, a culprit); and the progress
 * lines it hands the caller. */
#define _GNU_SOURCE
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- notes: what the caller writes into its verdict, in the order made */

static char *dup_or_null(const char *s)
{
    return s ? pf_xstrdup(s) : NULL;
}

static void note_free(struct pf_rdv_note *x)
{
    free((char *)x->code);
    free((char *)x->key);
    free((char *)x->text);
    free((char *)x->pod);
    free((char *)x->node);
}

/* Queues a copy of x (its texts duplicated) and tells the caller. */
static void note_add(struct rdv_session *S, const struct pf_rdv_note *x)
{
    struct rdv_notes *q = &S->notes;
    if (q->n == q->cap) {
        q->cap = q->cap ? q->cap * 2 : 16;
        q->v = pf_xrealloc(q->v, q->cap * sizeof(*q->v));
    }
    struct pf_rdv_note *y = &q->v[q->n++];
    *y = *x;
    y->code = dup_or_null(x->code);
    y->key = dup_or_null(x->key);
    y->text = dup_or_null(x->text);
    y->pod = dup_or_null(x->pod);
    y->node = dup_or_null(x->node);
    if (S->su.noted) S->su.noted(S->su.arg);
}

bool rdv_note_take(struct rdv_session *S, struct pf_rdv_note *out)
{
    struct rdv_notes *q = &S->notes;
    if (q->taken) {
        for (size_t i = 0; i < q->taken; i++)
            note_free(&q->v[i]);
        memmove(q->v, q->v + q->taken, (q->n - q->taken) * sizeof(*q->v));
        q->n -= q->taken;
        q->taken = 0;
    }
    if (q->n == 0) return false;
    *out = q->v[0];
    q->taken = 1;
    return true;
}

void rdv_notes_free(struct rdv_notes *q)
{
    for (size_t i = 0; i < q->n; i++)
        note_free(&q->v[i]);
    free(q->v);
    pf_strlist_free(&q->found);
    memset(q, 0, sizeof(*q));
}

void rdv_note_check(struct rdv_session *S, const char *check)
{
    note_add(S, &(struct pf_rdv_note){.kind = PF_RDV_NOTE_CHECK, .check = check});
}

bool rdv_note_finding(struct rdv_session *S, const char *check, const char *code, int sev,
                      bool fleet, const char *text)
{
    char *k = pf_xasprintf("%s\x1f%s\x1f%s", check, code, text);
    bool seen = pf_strlist_has(&S->notes.found, k);
    if (!seen) pf_strlist_add(&S->notes.found, k);
    free(k);
    if (seen) return false;
    note_add(S, &(struct pf_rdv_note){.kind = PF_RDV_NOTE_FINDING,
                                      .check = check,
                                      .code = code,
                                      .text = text,
                                      .fail = sev == RDV_FAIL,
                                      .fleet = fleet});
    return true;
}

void rdv_skip(struct rdv_session *S, const char *check, bool soft, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    note_add(S, &(struct pf_rdv_note){
                    .kind = PF_RDV_NOTE_SKIP, .check = check, .text = text, .soft = soft});
}

void rdv_message(struct rdv_session *S, const char *check, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    note_add(S, &(struct pf_rdv_note){.kind = PF_RDV_NOTE_MESSAGE, .check = check, .text = text});
}

void rdv_ev_int(struct rdv_session *S, const char *key, long long v)
{
    note_add(S, &(struct pf_rdv_note){
                    .kind = PF_RDV_NOTE_INT, .check = "rendezvous", .key = key, .i = v});
}

void rdv_ev_dbl(struct rdv_session *S, const char *key, double v)
{
    note_add(S, &(struct pf_rdv_note){
                    .kind = PF_RDV_NOTE_DBL, .check = "rendezvous", .key = key, .d = v});
}

void rdv_ev_str(struct rdv_session *S, const char *key, const char *v)
{
    note_add(S, &(struct pf_rdv_note){
                    .kind = PF_RDV_NOTE_STR, .check = "rendezvous", .key = key, .text = v});
}

void rdv_note_identity(struct rdv_session *S)
{
    note_add(S, &(struct pf_rdv_note){.kind = PF_RDV_NOTE_IDENTITY, .check = "rendezvous"});
}

void rdv_note_pod(struct rdv_session *S, int rank, int world)
{
    note_add(S, &(struct pf_rdv_note){.kind = PF_RDV_NOTE_POD, .i = rank, .world = world});
}

void rdv_note_culprit(struct rdv_session *S, int rank, const char *pod, const char *node,
                      const char *text)
{
    note_add(S,
             &(struct pf_rdv_note){
                 .kind = PF_RDV_NOTE_CULPRIT, .i = rank, .pod = pod, .node = node, .text = text});
}

void rdv_say(struct rdv_session *S, const char *fmt, ...)
{
    if (!S->su.progress) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    S->su.progress(S->su.arg, line);
}

/* ---- naming ranks, findings, the guard: what every file of the meeting calls */

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

void rdv_add_finding_text(struct rdv_session *S, const char *check, const char *code, int sev,
                          const char *msg)
{
    (void)rdv_note_finding(S, check, code, sev, false, msg);
}

/* A finding every rank's verdict carries: rank 0 notes it for the fleet, whose summary every
 * rank takes. */
void rdv_note_shared(struct rdv_session *S, const char *check, const char *code, int sev,
                     const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    (void)rdv_note_finding(S, check, code, sev, S->m != NULL, msg);
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

void rdv_guard(struct rdv_session *S, const char *stage_id, const char *fmt, ...)
{
    char doing[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(doing, sizeof(doing), fmt, ap);
    va_end(ap);
    if (S->su.doing) S->su.doing(S->su.arg, stage_id, doing);
}
