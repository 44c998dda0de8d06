/* pkg/report/absent.c: why a missing rank's pod is absent, read from a PodList and an
 * EventList with the fields the API server writes (kubernetes v1.37.2, k8s.io/api core/v1);
 * what each pod state gives, which of several pods of a rank is told, and what is no list. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "../../../pkg/report/report.h"

static const struct pf_absent_ask ask = {.ns = "ml",
                                         .selector = "job-name=trainer",
                                         .self_pod = "trainer-0-a",
                                         .coordinator = "trainer-0.trainer",
                                         .port = 29400};

/* rank 0 itself, its preflight initContainer running, then the pod under test */
#define SELF                                                                                       \
    "{\"metadata\":{\"name\":\"trainer-0-a\",\"uid\":\"u0\"},\"spec\":{\"hostname\":\"trainer-"    \
    "0\",\"nodeName\":\"n0\"},\"status\":{\"phase\":\"Pending\",\"initContainerStatuses\":[{"      \
    "\"name\":\"preflight\",\"state\":{\"running\":{\"startedAt\":\"2026-11-28T13:00:05Z\"}}}]}}"
#define LIST(pods) "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"items\":[" SELF pods "]}"

static void one(struct pf_absent *a, const char *json)
{
    memset(a, 0, sizeof(*a));
    strcpy(a->expect, "trainer-1");
    assert_int_equal(pf_absent_pods(a, 1, &ask, json, strlen(json)), 0);
}

static void test_pod_states(void **state)
{
    (void)state;
    static const struct {
        const char *name, *pods, *pod, *reason, *message;
    } cases[] = {
        {"no pod of the rank", "", "", "NoPod",
         "no pod named or with hostname trainer-1 among the 1 pods of the job"},
        {"by name (StatefulSet)",
         ",{\"metadata\":{\"name\":\"trainer-1\",\"uid\":\"u1\"},\"status\":{\"phase\":\"Pending\","
         "\"conditions\":[{\"type\":\"PodScheduled\",\"status\":\"False\",\"reason\":"
         "\"Unschedulable\",\"message\":\"0/2 nodes are available: 2 Insufficient cpu.\"}]}}",
         "trainer-1", "Unschedulable", "0/2 nodes are available: 2 Insufficient cpu."},
        {"not scheduled yet: no condition",
         ",{\"metadata\":{\"name\":\"t-1-x\",\"uid\":\"u1\"},\"spec\":{\"hostname\":\"trainer-1\"},"
         "\"status\":{\"phase\":\"Pending\"}}",
         "t-1-x", "NotScheduled", NULL},
        {"being deleted",
         ",{\"metadata\":{\"name\":\"t-1-x\",\"uid\":\"u1\",\"deletionTimestamp\":\"2026-11-28T13:"
         "05:00Z\"},\"spec\":{\"hostname\":\"trainer-1\",\"nodeName\":\"n1\"},\"status\":{"
         "\"phase\":\"Running\"}}",
         "t-1-x", "Terminating", "deleted at 2026-11-28T13:05:00Z, being terminated"},
        {"failed: the container's exit code and message",
         ",{\"metadata\":{\"name\":\"t-1-x\",\"uid\":\"u1\"},\"spec\":{\"hostname\":\"trainer-1\","
         "\"nodeName\":\"n1\"},\"status\":{\"phase\":\"Failed\",\"initContainerStatuses\":[{"
         "\"name\":\"preflight\",\"state\":{\"terminated\":{\"exitCode\":4,\"reason\":\"Error\","
         "\"message\":\"fail (node) n1: rdma.verbs: no device\"}}}]}}",
         "t-1-x", "Failed",
         "container preflight exited 4 (Error): fail (node) n1: rdma.verbs: no device"},
        {"NodeLost",
         ",{\"metadata\":{\"name\":\"t-1-x\",\"uid\":\"u1\"},\"spec\":{\"hostname\":\"trainer-1\","
         "\"nodeName\":\"n1\"},\"status\":{\"phase\":\"Running\",\"reason\":\"NodeLost\","
         "\"message\":\"Node n1 which was running pod t-1-x is unresponsive\"}}",
         "t-1-x", "NodeLost", "Node n1 which was running pod t-1-x is unresponsive"},
        {"bound, nothing started",
         ",{\"metadata\":{\"name\":\"t-1-x\",\"uid\":\"u1\"},\"spec\":{\"hostname\":\"trainer-1\","
         "\"nodeName\":\"n1\"},\"status\":{\"phase\":\"Pending\",\"conditions\":[{\"type\":"
         "\"PodScheduled\",\"status\":\"True\"}],\"initContainerStatuses\":[{\"name\":"
         "\"preflight\",\"state\":{\"waiting\":{\"reason\":\"PodInitializing\"}}}]}}",
         "t-1-x", "ContainerCreating", "bound to node n1; no container of it has started yet"},
        {"running main container, no preflight of its own",
         ",{\"metadata\":{\"name\":\"t-1-x\",\"uid\":\"u1\"},\"spec\":{\"hostname\":\"trainer-1\","
         "\"nodeName\":\"n1\"},\"status\":{\"phase\":\"Running\",\"podIP\":\"10.1.2.3\"}}",
         "t-1-x", "Unreachable",
         "Running on node n1 at 10.1.2.3, but it never reached rank 0 at trainer-0.trainer:29400"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        char json[4096];
        snprintf(json, sizeof(json), "{\"kind\":\"PodList\",\"items\":[%s%s]}", SELF,
                 cases[k].pods);
        struct pf_absent a;
        one(&a, json);
        print_message("%s: %s / %s\n", cases[k].name, a.reason, a.message);
        assert_string_equal(a.pod, cases[k].pod);
        assert_string_equal(a.reason, cases[k].reason);
        if (cases[k].message) assert_string_equal(a.message, cases[k].message);
    }
}

/* a failed try and its replacement: the live one; two live ones: the newer */
static void test_which_pod(void **state)
{
    (void)state;
    struct pf_absent a;
    one(&a, LIST(",{\"metadata\":{\"name\":\"new\",\"uid\":\"u2\",\"creationTimestamp\":\"2026-11-"
                 "28T13:00:00Z\"},\"spec\":{\"hostname\":\"trainer-1\"},\"status\":{\"phase\":"
                 "\"Pending\"}},{\"metadata\":{\"name\":\"old\",\"uid\":\"u1\","
                 "\"creationTimestamp\":\"2026-11-28T14:00:00Z\"},\"spec\":{\"hostname\":"
                 "\"trainer-1\"},\"status\":{\"phase\":\"Failed\"}}"));
    assert_string_equal(a.pod, "new");
    one(&a, LIST(",{\"metadata\":{\"name\":\"a\",\"uid\":\"u2\",\"creationTimestamp\":\"2026-11-"
                 "28T13:00:00Z\"},\"spec\":{\"hostname\":\"trainer-1\"},\"status\":{\"phase\":"
                 "\"Pending\"}},{\"metadata\":{\"name\":\"b\",\"uid\":\"u1\","
                 "\"creationTimestamp\":\"2026-11-28T13:00:01Z\"},\"spec\":{\"hostname\":"
                 "\"trainer-1\"},\"status\":{\"phase\":\"Pending\"}}"));
    assert_string_equal(a.pod, "b");
}

/* an Indexed Job whose pod spec sets its own hostname: found by its completion-index label */
static void test_by_index(void **state)
{
    (void)state;
    const char *json = LIST(",{\"metadata\":{\"name\":\"x-1-abc\",\"uid\":\"u1\",\"labels\":{"
                            "\"batch.kubernetes.io/job-completion-index\":\"1\"}},\"spec\":{"
                            "\"hostname\":\"worker\"},\"status\":{\"phase\":\"Pending\"}}");
    struct pf_absent a;
    memset(&a, 0, sizeof(a));
    a.rank = 1;
    strcpy(a.expect, "trainer-1");
    assert_int_equal(pf_absent_pods(&a, 1, &ask, json, strlen(json)), 0);
    assert_string_equal(a.reason, "NoPod"); /* not asked to look at the index */
    struct pf_absent_ask by = ask;
    by.by_index = true;
    memset(&a, 0, sizeof(a));
    a.rank = 1;
    strcpy(a.expect, "trainer-1");
    assert_int_equal(pf_absent_pods(&a, 1, &by, json, strlen(json)), 0);
    assert_string_equal(a.pod, "x-1-abc");
    assert_string_equal(a.reason, "NotScheduled");
}

/* an Event gives the reason only where the pod's status said nothing decisive; NodeNotReady
 * always; another pod's Event and a Normal one count for nothing */
static void test_events(void **state)
{
    (void)state;
    struct pf_absent a;
    memset(&a, 0, sizeof(a));
    strcpy(a.uid, "u1");
    strcpy(a.reason, "Unschedulable");
    strcpy(a.message, "0/2 nodes are available");
    const char *ev =
        "{\"kind\":\"EventList\",\"items\":["
        "{\"involvedObject\":{\"uid\":\"u1\"},\"type\":\"Warning\",\"reason\":\"FailedScheduling\","
        "\"message\":\"0/2 nodes are available\",\"eventTime\":\"2026-11-28T13:00:03.000001Z\","
        "\"lastTimestamp\":null},"
        "{\"involvedObject\":{\"uid\":\"u9\"},\"type\":\"Warning\",\"reason\":\"Other\","
        "\"message\":\"another pod's\",\"lastTimestamp\":\"2026-11-28T14:00:00Z\"},"
        "{\"involvedObject\":{\"uid\":\"u1\"},\"type\":\"Normal\",\"reason\":\"Scheduled\","
        "\"message\":\"later, normal\",\"lastTimestamp\":\"2026-11-28T14:00:00Z\"}]}";
    assert_int_equal(pf_absent_events(&a, ev, strlen(ev)), 0);
    assert_string_equal(a.event, "FailedScheduling: 0/2 nodes are available");
    assert_string_equal(a.reason, "Unschedulable");

    memset(&a, 0, sizeof(a));
    strcpy(a.uid, "u1");
    strcpy(a.reason, "ContainerCreating");
    strcpy(a.message, "bound to node n1");
    strcpy(a.node, "n1");
    ev = "{\"items\":[{\"involvedObject\":{\"uid\":\"u1\"},\"type\":\"Warning\",\"reason\":"
         "\"FailedMount\",\"message\":\"MountVolume.SetUp failed\",\"lastTimestamp\":\"2026-11-28T"
         "13:00:01Z\",\"series\":{\"lastObservedTime\":\"2026-11-28T13:09:00.000000Z\"}},"
         "{\"involvedObject\":{\"uid\":\"u1\"},\"type\":\"Warning\",\"reason\":\"BackOff\","
         "\"message\":\"earlier\",\"lastTimestamp\":\"2026-11-28T13:05:00Z\"}]}";
    assert_int_equal(pf_absent_events(&a, ev, strlen(ev)), 0);
    assert_string_equal(a.reason, "FailedMount"); /* series.lastObservedTime is the latest */
    assert_string_equal(a.message, "MountVolume.SetUp failed");

    strcpy(a.phase, "Running");
    ev = "{\"items\":[{\"involvedObject\":{\"uid\":\"u1\"},\"type\":\"Warning\",\"reason\":"
         "\"NodeNotReady\",\"message\":\"Node is not ready\",\"lastTimestamp\":\"2026-11-28T13:00:"
         "01Z\"}]}";
    assert_int_equal(pf_absent_events(&a, ev, strlen(ev)), 0);
    assert_string_equal(a.reason, "NodeNotReady");
    assert_non_null(strstr(a.message, "node n1 is not ready"));
}

/* what is no list: an error, nothing filled */
static void test_not_a_list(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "{",
        "[]",
        "{\"kind\":\"Status\",\"code\":403}",
        "{\"items\":{}}",
        "{\"items\":[],\"items\":[]}",
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        struct pf_absent a;
        memset(&a, 0, sizeof(a));
        strcpy(a.expect, "trainer-1");
        assert_int_equal(pf_absent_pods(&a, 1, &ask, bad[k], strlen(bad[k])), PF_EINVAL);
        assert_int_equal(pf_absent_events(&a, bad[k], strlen(bad[k])), PF_EINVAL);
        assert_string_equal(a.reason, "");
    }
    /* items that are not objects, fields of the wrong type: read as absent */
    struct pf_absent a;
    one(&a, "{\"items\":[1,\"x\",null,{\"metadata\":{\"name\":7},\"spec\":{\"hostname\":"
            "\"trainer-1\"},\"status\":{\"phase\":[],\"conditions\":{}}}]}");
    assert_string_equal(a.reason, "NotScheduled");
    /* a rank the naming cannot name is left alone */
    memset(&a, 0, sizeof(a));
    assert_int_equal(pf_absent_pods(&a, 1, &ask, LIST(""), strlen(LIST(""))), 0);
    assert_string_equal(a.reason, "");
}

static void test_text(void **state)
{
    (void)state;
    struct pf_absent a = {0};
    char t[1024];
    strcpy(a.reason, "unknown");
    strcpy(a.message, "HTTP 403");
    pf_absent_text(t, sizeof(t), &a);
    assert_string_equal(t, "unknown: HTTP 403");
    strcpy(a.pod, "p");
    strcpy(a.phase, "Pending");
    strcpy(a.reason, "Unschedulable");
    strcpy(a.message, "0/1 nodes are available");
    pf_absent_text(t, sizeof(t), &a);
    assert_string_equal(t, "pod p Pending, Unschedulable: 0/1 nodes are available");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pod_states), cmocka_unit_test(test_which_pod),
        cmocka_unit_test(test_by_index),   cmocka_unit_test(test_events),
        cmocka_unit_test(test_not_a_list), cmocka_unit_test(test_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
