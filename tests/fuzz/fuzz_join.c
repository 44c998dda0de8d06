/* Fuzz target: JOIN admission at rank 0, without sockets. Rank 0 of a world of 4 takes the
 * same JOIN on two connections (a first join, then a rejoin or a second claim). Byte 0 sets
 * what the connection layer would have found (bit 0: the MAC verified, bit 1: the frame had
 * one), byte 1 rank 0's side (bit 0: it has a token, bit 1: the run already started, bit 2:
 * it knows its job, Job ml/trainer uid u-a); the rest is the JOIN payload. Admission must never
 * crash, a member it admits holds the rank it claimed and names no other job than rank 0's,
 * and a JOIN that fails the token check changes nothing: no rank's state, no refusal on the
 * list the fleet judges. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/rendezvous/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define WORLD 4

/* The refusals listed for the fleet so far. */
static size_t fleet_findings(const struct rdv_session *S)
{
    return S->nrefusals;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    struct pf_rdv_msg msg;
    memset(&msg, 0, sizeof(msg));
    msg.type = PF_WIRE_JOIN;
    msg.mac_ok = data[0] & 1;
    msg.had_mac = (data[0] & 2) != 0;
    if (pf_wire_fields_decode(&msg.f, data + 2, size - 2) < 0) return 0;

    struct rdv_session st, *S = &st;
    rdv_session_init(S);
    S->auth = data[1] & 1;
    S->token = S->auth ? "fuzz-token" : NULL;
    S->world = WORLD;
    S->n = (data[1] & 2) ? 2 : 0;
    pf_strcpy(S->pod, sizeof(S->pod), "trainer-0");
    if (data[1] & 4)
        S->id.job =
            (struct pf_identity_job){.kind = "Job", .ns = "ml", .name = "trainer", .uid = "u-a"};
    struct pf_identity_job theirs = {0};
    pf_wire_fields_str(theirs.kind, sizeof(theirs.kind), &msg.f, "jobKind");
    pf_wire_fields_str(theirs.ns, sizeof(theirs.ns), &msg.f, "jobNamespace");
    pf_wire_fields_str(theirs.name, sizeof(theirs.name), &msg.f, "jobName");
    pf_wire_fields_str(theirs.uid, sizeof(theirs.uid), &msg.f, "jobUid");
    rdv_members_init(S);
    S->m[0].state = PF_RDV_JOINED;
    S->nsc = 2;
    S->sc = calloc(S->nsc, sizeof(*S->sc));
    if (!S->sc) abort();
    bool unverified = S->auth ? !msg.mac_ok : msg.had_mac;
    for (size_t i = 0; i < S->nsc; i++) {
        pf_rdv_conn_init(&S->sc[i].c, -1, "fuzz", false);
        S->sc[i].used = true;
        S->sc[i].rank = -1;
        int before[WORLD];
        for (int r = 0; r < WORLD; r++)
            before[r] = S->m[r].state;
        size_t nf = fleet_findings(S);
        rdv_admit(S, i, &msg);
        int r = S->sc[i].rank;
        if (r >= 0 && (r < 1 || r >= WORLD || S->m[r].state != PF_RDV_JOINED)) abort();
        if (r >= 0 && pf_identity_job_other(&S->id.job, &theirs)) abort(); /* another job's */
        if (unverified) {
            if (r >= 0 || fleet_findings(S) != nf) abort();
            for (int k = 0; k < WORLD; k++)
                if (S->m[k].state != before[k]) abort();
        }
    }
    rdv_session_free(S);
    pf_wire_fields_free(&msg.f);
    return 0;
}
