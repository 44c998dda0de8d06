/* collective.nccl: NCCL collectives among every GPU of every pod, through the image's own
 * libnccl and the CUDA driver API (both loaded with dlopen; gpus.c drives the devices). The
 * stage in order: every pod prepares its GPUs and rank 0 makes the ncclUniqueId, which every
 * pod gets through the rendezvous' allgather; the communicators are made; each collective
 * runs and the pods share their timings; NCCL's own INFO log (log.c) tells which transport
 * it chose. */
#define _GNU_SOURCE
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static int exchange(struct stage *st, const void *mine, void *all, size_t len)
{
    if (st->world == 1) {
        memcpy(all, mine, len);
        return 0;
    }
    return st->peers->allgather(st->peers->rdv, mine, all, len);
}

static void record_results(struct stage *st, const struct pf_nccllog_proc *me)
{
    struct pf_ctx *ctx = st->ctx;
    struct pf_check *c = st->c;
    int gdr = me ? pf_nccllog_gdr(me) : -1;
    const char *transport = me && me->network[0] ? me->network : "unknown";
    struct pf_nccl_expect ex;
    pf_nccl_expected_busbw(&ex, ctx->config, st->world);
    char summary[512] = "";
    size_t used = 0;
    for (int k = 0; k < st->nops; k++) {
        struct opres *o = &st->ops[k];
        if (!o->ran) continue;
        struct pf_node *m = pf_node_add_map(ctx->verdict->collectives);
        double algbw = o->seconds > 0 ? (double)o->bytes / 1e9 / o->seconds : 0;
        double busbw = algbw * pf_nccl_busbw_factor(o->op, st->nranks);
        pf_node_set_str(m, "backend", "nccl");
        pf_node_set_str(m, "op", o->op);
        pf_node_set_int(m, "bytes", (long long)o->bytes);
        pf_node_set_int(m, "ranks", st->nranks);
        pf_node_set_str(m, "transport", transport);
        if (gdr >= 0)
            pf_node_set_bool(m, "gpuDirectRdma", gdr == 1);
        else
            pf_node_set_null(m, "gpuDirectRdma");
        pf_node_set_dbl(m, "timeUs", round(o->seconds * 1e7) / 10);
        pf_node_set_dbl(m, "algbwGBps", round(algbw * 100) / 100);
        pf_node_set_dbl(m, "busbwGBps", round(busbw * 100) / 100);
        bool floor = strcmp(o->op, "allreduce") == 0 && ex.gbps >= 0;
        if (floor) {
            pf_node_set_dbl(m, "expectedMinBusbwGBps", round(ex.gbps * 100) / 100);
            pf_node_set_str(m, "rule", ex.rule);
        } else {
            pf_node_set_null(m, "expectedMinBusbwGBps");
            if (ex.rule[0] && strcmp(o->op, "allreduce") == 0) pf_node_set_str(m, "rule", ex.rule);
        }
        pf_node_set_bool(m, "correct", o->wrong == 0);
        if (o->wrong)
            pf_check_add_finding(c, "wrong-result", PF_FAIL, NULL,
                                 "%s of %zu bytes over %d ranks: %lld wrong elements (%s)", o->op,
                                 o->bytes, st->nranks, o->wrong, o->why);
        if (floor && busbw < ex.gbps)
            pf_check_add_finding(c, "below-threshold", PF_FAIL, NULL,
                                 "%s busbw %.1f GB/s over %d ranks is below %.1f GB/s (%s)", o->op,
                                 busbw, st->nranks, ex.gbps, ex.rule);
        if (used < sizeof(summary))
            used += (size_t)snprintf(summary + used, sizeof(summary) - used, "%s%s %.1f GB/s busbw",
                                     used ? ", " : "", o->op, busbw);
    }
    /* transport verification */
    const char *want = ctx->config->expect_transport;
    bool want_rdma = strcasecmp(want, "IB") == 0 || strcasecmp(want, "OFI") == 0;
    bool want_socket = strcasecmp(want, "Socket") == 0; /* asked for: no fallback */
    if (me && strcmp(me->network, "Socket") == 0 && !want_socket &&
        (ctx->hcas.n > 0 || want_rdma)) {
        char hcas[256] = "", ifs[256] = "";
        pf_strlist_join(hcas, sizeof(hcas), &ctx->hcas, ", ");
        pf_strlist_join(ifs, sizeof(ifs), &me->ifaces, ", ");
        pf_check_add_finding(c, "socket-fallback", PF_FAIL, NULL, "NCCL chose NET/Socket (%s) %s",
                             ifs[0] ? ifs : "interfaces not logged",
                             want_rdma ? "while expect.transport asks for RDMA"
                                       : "while this pod has RDMA devices");
        pf_node_set_str(c->evidence, "hcas", hcas);
    } else if (me && want[0] && strcasecmp(want, "any") != 0 && me->network[0] &&
               strcasecmp(want, me->network) != 0 &&
               !(strcasecmp(want, "OFI") == 0 && strstr(me->network, "Libfabric"))) {
        pf_check_add_finding(c, "socket-fallback", PF_FAIL, NULL,
                             "NCCL chose network %s, expect.transport is %s", me->network, want);
    }
    if (me && (strcmp(me->network, "IB") == 0 || strstr(me->network, "Libfabric")) && gdr < 0 &&
        st->ngpus > 0)
        /* no channel line and no GPU Direct RDMA line (NCCL_DEBUG below INFO, or a subsystem
         * filter): nothing says either way */
        pf_check_unknown(c, "no-gdr",
                         "NCCL used %s and logged no channel line and no \"GPU "
                         "Direct RDMA\" line",
                         me->network);
    if (me && (strcmp(me->network, "IB") == 0 || strstr(me->network, "Libfabric")) && gdr == 0 &&
        st->ngpus > 0)
        pf_check_add_finding(c, "no-gdr", PF_WARN, NULL,
                             "NCCL used %s without GPUDirect RDMA (%d of %d network channels "
                             "via GDRDMA)",
                             me->network, me->gdr_channels, me->net_channels);
    if (me) {
        pf_node_set_str(c->evidence, "transport", transport);
        if (me->hcas.n) {
            struct pf_node *s = pf_node_set_seq(c->evidence, "hcas");
            for (size_t i = 0; i < me->hcas.n; i++)
                pf_node_add_str(s, me->hcas.v[i]);
        }
        if (me->ifaces.n) {
            struct pf_node *s = pf_node_set_seq(c->evidence, "interfaces");
            for (size_t i = 0; i < me->ifaces.n; i++)
                pf_node_add_str(s, me->ifaces.v[i]);
        }
        if (me->nvls) pf_node_set_bool(c->evidence, "nvls", true);
        if (me->collnet) pf_node_set_bool(c->evidence, "collnet", true);
        if (me->nwarns) {
            struct pf_node *s = pf_node_set_seq(c->evidence, "ncclWarnings");
            for (size_t i = 0; i < me->warns.n; i++)
                pf_node_add_str(s, me->warns.v[i]);
        }
        if (me->version[0] && me->cuda[0])
            pf_node_set_strf(ctx->verdict->environment, "ncclBuild", "%s+cuda%s", me->version,
                             me->cuda);
        if (me->network[0]) pf_node_set_str(ctx->verdict->environment, "ncclNetwork", me->network);
    }
    pf_check_set_message(c, "%d ranks (%d pod%s x %d GPU%s), transport %s%s: %s", st->nranks,
                         st->world, st->world == 1 ? "" : "s", st->ngpus, st->ngpus == 1 ? "" : "s",
                         transport, gdr == 1 ? " with GPUDirect RDMA" : "",
                         summary[0] ? summary : "no collective ran");
}

/* The run's deadline for this stage: nccl.timeoutSeconds, within the context's deadline
 * (pkg/run keeps its own margin there). */
static void set_deadline(struct stage *st)
{
    const struct pf_config *cfg = st->ctx->config;
    double budget = cfg->nccl_timeout_s; /* pf_config_defaults: 120; at least 1 */
    double left = pf_ctx_left(st->ctx, 0);
    if (left < budget) budget = left > 1 ? left : 1;
    st->deadline = pf_now() + budget;
    pf_node_set_dbl(st->c->evidence, "deadlineSeconds", round(budget * 10) / 10);
}

/* This pod's hello: its GPUs prepared and, on rank 0, the ncclUniqueId. Returns its state
 * (0 ready, 1 skip, 2 fail; why set). */
static int hello_mine(struct stage *st, struct hello *mine, char *why, size_t wn)
{
    struct pf_check *c = st->c;
    int state = nc_prepare(st, why, wn);
    if (st->nccl) {
        int v = 0;
        if (st->nccl->GetVersion(&v) == PF_NCCL_SUCCESS) {
            char vs[32];
            pf_nccl_version_string(vs, sizeof(vs), v);
            pf_node_set_str(st->ctx->verdict->environment, "ncclVersion", vs);
        }
        pf_node_set_str(c->evidence, "ncclLibrary", st->nccl->path);
    }
    memset(mine, 0, sizeof(*mine));
    mine->ngpus = st->ngpus;
    if (state == 0) {
        nc_debug_setup(st);
        if (st->debug_note[0]) pf_node_set_str(c->evidence, "ncclDebug", st->debug_note);
        if (st->rank == 0) {
            struct pf_ncclUniqueId id;
            pf_ncclResult_t r = st->nccl->GetUniqueId(&id);
            if (r != PF_NCCL_SUCCESS) {
                nc_ncclerr(why, wn, st, "ncclGetUniqueId", 0, r);
                state = 2;
            } else {
                memcpy(mine->id, id.internal, sizeof(mine->id));
            }
        }
    }
    mine->state = state;
    snprintf(mine->why, sizeof(mine->why), "%s", why);
    return state;
}

/* What every pod tells the others first (8 bytes, not the hello's 256: the exchange sends
 * every pod's to every pod). */
struct brief {
    int32_t ngpus;
    int32_t state;
};

/* Every pod's state, shared. When no pod can go on (a fleet without GPUs, the usual case of
 * a CPU-only run) each says its own reason and the whole hello is never sent: false, with
 * the skip or the finding. True: the hello follows (some pod is ready, so it needs the id
 * or the reason of the pod that is not). Every pod decides alike from the same table. */
static bool briefs_go_on(struct stage *st, const struct hello *mine, const char *why)
{
    struct brief b = {mine->ngpus, mine->state};
    struct brief *all = pf_xcalloc((size_t)st->world, sizeof(*all));
    if (exchange(st, &b, all, sizeof(b)) < 0) {
        pf_check_add_finding(st->c, "init-failed", PF_FAIL, NULL,
                             "could not share the NCCL id among pods: %s", pf_err_msg());
        free(all);
        return false;
    }
    bool ready = false;
    for (int r = 0; r < st->world; r++)
        ready = ready || all[r].state == 0;
    free(all);
    if (ready) return true;
    if (mine->state == 1)
        pf_check_skip(st->c, "%s", why);
    else
        pf_check_add_finding(st->c, "init-failed", PF_FAIL, NULL, "%s", why);
    return false;
}

/* Every pod's hello, shared; false (with a skip or a finding) when any pod cannot go on.
 * On true, st->nranks and st->base are set and id is rank 0's. */
static bool hello_all(struct stage *st, struct pf_ncclUniqueId *id)
{
    struct pf_check *c = st->c;
    char why[300] = "";
    struct hello mine;
    int state = hello_mine(st, &mine, why, sizeof(why));
    pf_ctx_progress(st->ctx, "NCCL: %d GPU%s here, exchanging the NCCL id", st->ngpus,
                    st->ngpus == 1 ? "" : "s");
    if (!briefs_go_on(st, &mine, why)) return false;
    struct hello *all = pf_xcalloc((size_t)st->world, sizeof(*all));
    if (exchange(st, &mine, all, sizeof(mine)) < 0) {
        pf_check_add_finding(c, "init-failed", PF_FAIL, NULL,
                             "could not share the NCCL id among pods: %s", pf_err_msg());
        free(all);
        return false;
    }
    /* everyone decides alike from the same table */
    int bad = -1;
    for (int r = 0; r < st->world; r++)
        if (all[r].state != 0 && (bad < 0 || all[r].state > all[bad].state)) bad = r;
    if (bad >= 0) {
        all[bad].why[sizeof(all[bad].why) - 1] = '\0';
        if (state == 1)
            pf_check_skip(c, "%s", why);
        else if (state == 2)
            pf_check_add_finding(c, "init-failed", PF_FAIL, NULL, "%s", why);
        else if (all[bad].state == 2)
            pf_check_add_finding(c, "init-failed", PF_FAIL, NULL, "rank %d could not start: %s",
                                 bad, all[bad].why);
        else
            pf_check_skip(c, "rank %d: %s", bad, all[bad].why);
        free(all);
        return false;
    }
    st->nranks = 0;
    for (int r = 0; r < st->world; r++) {
        if (r == st->rank) st->base = st->nranks;
        st->nranks += all[r].ngpus;
    }
    memcpy(id->internal, all[0].id, sizeof(id->internal));
    free(all);
    pf_node_set_int(c->evidence, "gpusHere", st->ngpus);
    pf_node_set_int(c->evidence, "firstRank", st->base);
    return true;
}

/* Makes the communicators and agrees with the other pods that all of them are up; false
 * (communicators aborted, a finding added) when any pod's failed or timed out. rall: room
 * for every pod's result. */
static bool comms_up(struct stage *st, const struct pf_ncclUniqueId *id, struct result *rall)
{
    pf_ctx_progress(st->ctx, "NCCL: creating %d communicators (%d ranks in all)", st->ngpus,
                    st->nranks);
    char why[300] = "";
    int w = nc_init_comms(st, id, why, sizeof(why));
    struct result res = {0};
    res.state = w;
    snprintf(res.why, sizeof(res.why), "%s", why);
    bool shared = exchange(st, &res, rall, sizeof(res)) == 0, go = shared;
    if (!shared && w == WAIT_OK) { /* a pod was lost while this one's were coming up */
        w = WAIT_LOST;
        snprintf(why, sizeof(why), "%s", pf_err_msg());
    }
    for (int r = 0; go && r < st->world; r++)
        if (rall[r].state != WAIT_OK) {
            go = false;
            if (w == WAIT_OK) /* another pod failed: say which */
                snprintf(why, sizeof(why), "rank %d: %.*s", r, (int)sizeof(rall[r].why) - 1,
                         rall[r].why);
            if (w == WAIT_OK) w = rall[r].state;
        }
    if (go) return true;
    nc_abort_comms(st);
    pf_check_add_finding(st->c,
                         w == WAIT_TIMEOUT ? "timeout"
                         : w == WAIT_LOST  ? "peer-lost"
                                           : "init-failed",
                         PF_FAIL, NULL, "NCCL communicators (%d ranks): %s", st->nranks,
                         why[0] ? why : "the pods could not agree to go on");
    return false;
}

/* Runs each planned op and sums what every pod measured into st->ops; stops at the first op
 * that failed or timed out anywhere (communicators aborted, a finding added). */
static void run_ops(struct stage *st, struct result *rall)
{
    struct pf_check *c = st->c;
    struct result res;
    for (int k = 0; k < st->nops; k++) {
        struct opres *o = &st->ops[k];
        const char *miss = nc_op_missing(st->nccl, o->op);
        if (miss) {
            snprintf(o->why, sizeof(o->why), "%s is missing in this NCCL", miss);
            pf_node_set_strf(c->evidence, o->op, "not run: %s", o->why);
            continue;
        }
        pf_ctx_progress(st->ctx, "NCCL: %s", o->op);
        (void)nc_run_op(st, o->op, &res);
        if (exchange(st, &res, rall, sizeof(res)) < 0) {
            /* the exchange fails only when a pod was lost: this pod's own watch may have
             * seen which one, and when */
            nc_abort_comms(st);
            if (res.state == WAIT_LOST)
                pf_check_add_finding(c, "peer-lost", PF_FAIL, NULL, "%s over %d ranks: %.*s", o->op,
                                     st->nranks, (int)sizeof(res.why) - 1, res.why);
            else
                pf_check_add_finding(c, "peer-lost", PF_FAIL, NULL,
                                     "%s: the pods could not share their results: %s", o->op,
                                     pf_err_msg());
            return;
        }
        int worst = WAIT_OK, who = -1;
        double tsum = 0;
        long long n = 0, wrong = 0;
        for (int r = 0; r < st->world; r++) {
            if (rall[r].state > worst) worst = rall[r].state, who = r;
            tsum += rall[r].tsum;
            n += rall[r].ngpus;
            wrong += rall[r].wrong;
            if (rall[r].wrong && !o->why[0])
                snprintf(o->why, sizeof(o->why), "%.*s", (int)sizeof(rall[r].why) - 1, rall[r].why);
        }
        if (worst != WAIT_OK) {
            nc_abort_comms(st);
            pf_check_add_finding(c,
                                 worst == WAIT_TIMEOUT ? "timeout"
                                 : worst == WAIT_LOST  ? "peer-lost"
                                                       : "init-failed",
                                 PF_FAIL, NULL, "%s over %d ranks, rank %d: %.*s", o->op,
                                 st->nranks, who, (int)sizeof(rall[who].why) - 1, rall[who].why);
            return;
        }
        struct plan p;
        nc_make_plan(&p, o->op, (size_t)st->ctx->config->message_bytes, st->nranks);
        o->ran = true;
        o->bytes = p.bytes;
        o->seconds = n ? tsum / (double)n : 0;
        o->wrong = wrong;
    }
}

/* NCCL's log of this process: read, kept beside the verdict, the verdict entries written
 * from it and the results, the private folder removed. */
static void finish_with_log(struct stage *st)
{
    struct pf_nccllog log = {0};
    char found[PF_HOST_PATH_MAX], kept[PF_HOST_PATH_MAX] = "";
    nc_read_log(st, &log, found, sizeof(found));
    const struct pf_nccllog_proc *me = NULL;
    for (size_t i = 0; i < log.n; i++)
        if (log.v[i].pid == (long)getpid()) me = &log.v[i];
    if (!me && log.n) me = &log.v[0];
    if (found[0]) {
        nc_keep_log(st, found, kept, sizeof(kept));
        pf_node_set_str(st->c->evidence, "ncclLog", kept);
    }
    record_results(st, me);
    pf_nccllog_free(&log);
    if (kept[0] && strncmp(kept, st->logdir, strlen(st->logdir)) != 0)
        nc_remove_logdir(st);
    else if (!kept[0])
        nc_remove_logdir(st);
}

void pf_nccl_stage(struct pf_ctx *ctx, const struct pf_nccl_peers *peers)
{
    struct pf_check *c = pf_verdict_add_check(ctx->verdict, "collective.nccl");
    double t0 = pf_now();
    struct stage *st = pf_xcalloc(1, sizeof(*st));
    st->ctx = ctx;
    st->c = c;
    st->peers = peers;
    st->rank = peers ? peers->rank : 0;
    st->world = peers ? peers->world_size : 1;
    if (st->world < 1) st->world = 1;
    set_deadline(st);
    struct pf_ncclUniqueId id;
    if (st->world > 1 && (!peers->allgather)) {
        pf_check_add_finding(c, "init-failed", PF_FAIL, NULL,
                             "world size %d but no rendezvous session to share the NCCL id",
                             st->world);
    } else if (hello_all(st, &id)) {
        struct result *rall = pf_xcalloc((size_t)st->world, sizeof(*rall));
        if (comms_up(st, &id, rall)) {
            run_ops(st, rall);
            /* orderly teardown only when every comm is idle */
            char tmp[300];
            if (st->ncomms && nc_wait_comms(st, tmp, sizeof(tmp), "teardown") == WAIT_OK)
                nc_destroy_comms(st);
            else if (st->ncomms)
                nc_abort_comms(st);
        }
        free(rall);
        finish_with_log(st);
    }
    if (st->ncomms) nc_abort_comms(st);
    double t1 = pf_now();
    if (st->cu) nc_free_gpus(st);
    /* what ending the communicators (ncclCommAbort/Destroy) and freeing the GPUs took: on an
     * H100 with NCCL 2.28.9 a peer killed mid all-reduce left about 27 s between the loss and
     * the stage's end, and these say where */
    pf_node_set_dbl(c->evidence, "commEndSeconds", round(st->end_s * 1000) / 1000);
    pf_node_set_dbl(c->evidence, "gpuFreeSeconds", round((pf_now() - t1) * 1000) / 1000);
    c->seconds = pf_now() - t0;
    free(st);
}
