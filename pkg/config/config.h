/* config: the YAML config file (docs/configuration.md), parsed with libyaml. Every key is
 * optional; an unknown key, a wrong type or a bad value is a usage error naming file, line
 * and key. */
#ifndef PF_CONFIG_H
#define PF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "../base/base.h"

enum pf_rdma_expect { PF_RDMA_AUTO = 0, PF_RDMA_REQUIRED, PF_RDMA_NONE };
enum pf_policy_action { PF_POLICY_KEEP = -2, PF_POLICY_IGNORE = -1 };

#define PF_CONFIG_MAX_POLICY 128
#define PF_CONFIG_MAX_CURVE 16

struct pf_policy_entry {
    char code[48];
    int status; /* a pf_status value, or PF_POLICY_IGNORE */
};

struct pf_curve_point {
    double nodes;
    double percent;
};

struct pf_config {
    char path[1024]; /* "" when no file was given */
    /* expect */
    enum pf_rdma_expect expect_rdma;
    int expect_hcas;                  /* -1 unset */
    double expect_min_port_rate_gbps; /* <0 unset */
    int expect_gpus_per_pod;          /* -1 unset */
    struct pf_strlist expect_networks;
    int expect_mtu;                                        /* -1 unset */
    char expect_transport[16];                             /* "" unset; IB | Socket | OFI | any */
    double expect_busbw_gbps;                              /* <0 unset */
    double expect_line_rate_gbps;                          /* <0 unset */
    struct pf_curve_point efficiency[PF_CONFIG_MAX_CURVE]; /* expect.efficiency */
    size_t nefficiency;
    /* what to run */
    char workload[16];             /* dense | moe | fsdp */
    struct pf_strlist collectives; /* explicit list; empty = from workload */
    long long message_bytes;       /* NCCL message size */
    /* rendezvous */
    int rendezvous_port;
    int rendezvous_timeout_s;
    char rendezvous_interface[64]; /* "" = NCCL_SOCKET_IFNAME rules */
    /* rendezvous.explainMissing: rank 0 asks the API server why each missing rank's pod is
     * absent (list pods and events in the namespace; pkg/report/absent.c) */
    bool rendezvous_explain_missing;
    /* TCP all-reduce */
    long long tcp_message_bytes;
    int tcp_iterations;
    double tcp_min_busbw_gbps; /* <0 unset: no floor for the TCP all-reduce's busbw */
    /* NCCL collectives */
    int nccl_iterations;
    int nccl_warmup;
    int nccl_timeout_s;
    /* downward API */
    double podinfo_wait_s; /* how long to re-read a missing network-status */
    /* gang: how rank 0 groups the ranks it compares (pkg/fleet/gang.c) */
    char gang_group_by[320]; /* a pod label key ("" = one group) */
    int gang_rank0;          /* 0 same (judged with the others), 1 apart */
    /* policy */
    int fail_on; /* PF_FAIL or PF_WARN */
    struct pf_policy_entry policy[PF_CONFIG_MAX_POLICY];
    size_t npolicy;
    /* report */
    bool report_events;
    bool report_annotate;
    char report_metrics_file[1024];
    int report_mark_node;          /* enum pf_mark_node */
    char report_pushgateway[1024]; /* report.pushgateway: http(s)://host:port, or "" */
    /* report.pushgatewayAuth: files as secrets are mounted ("" when unset) */
    char report_push_bearer_file[1024];
    char report_push_username_file[1024];
    char report_push_password_file[1024];
    char report_push_ca_file[1024];
    char report_results_file[1024]; /* report.resultsFile: nccl-tests JSON, or "" */
    /* watch (`preflight watch`, docs/kubernetes.md) */
    double watch_window_s; /* watch.windowSeconds: how long it follows the trainer (600) */
    int watch_on_mismatch; /* watch.onMismatch: enum pf_watch_action */
    double watch_stall_s;  /* watch.stallSeconds: init stall bound (120) */
    int watch_processes;   /* watch.processes: NCCL processes expected in the pod; 0: unknown */
    double watch_grace_s;  /* watch.stopGraceSeconds: SIGTERM to SIGKILL (10) */
};

/* watch.onMismatch: what `preflight watch` does after a failing finding. */
enum pf_watch_action { PF_WATCH_WARN = 0, PF_WATCH_STOP = 1 };

/* report.markNode: what preflight does to its own node after a node-class failure. */
enum pf_mark_node { PF_MARK_NODE_NONE, PF_MARK_NODE_LABEL, PF_MARK_NODE_TAINT };

/* Fills the defaults. */
void pf_config_defaults(struct pf_config *c);
/* Parses a YAML file, read before deadline (pf_file_read_named: 0 for its default wait);
 * PF_EUSAGE with "FILE:LINE: key: problem" on any error, or the read's. */
int pf_config_load(struct pf_config *c, const char *path, double deadline);
/* Parses YAML text; name is used in messages. */
int pf_config_parse(struct pf_config *c, const char *name, const char *text, size_t len);
void pf_config_free(struct pf_config *c);
/* The status the policy gives a finding (a pf_status, or PF_POLICY_IGNORE); status when the
 * policy says nothing about code. */
int pf_config_policy(const struct pf_config *c, const char *code, int status);
/* A short digest of the effective config (for the rendezvous' agreement check). */
void pf_config_digest(char *out, size_t n, const struct pf_config *c);

#endif
