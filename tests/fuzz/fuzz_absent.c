/* Fuzz target: why a pod is absent (pkg/report/absent.c), from the API server's JSON. The first
 * byte picks the parser: 'e' an EventList (onto an entry a PodList already filled), 'i' a
 * PodList whose ranks are also found by their completion-index label, anything else a PodList
 * against three missing ranks' expected names. Every entry must stay
 * NUL-terminated within its fields, and the text of each must be made. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/report/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct pf_absent *a)
{
    if (strnlen(a->pod, sizeof(a->pod)) == sizeof(a->pod) ||
        strnlen(a->reason, sizeof(a->reason)) == sizeof(a->reason) ||
        strnlen(a->message, sizeof(a->message)) == sizeof(a->message) ||
        strnlen(a->event, sizeof(a->event)) == sizeof(a->event) ||
        strnlen(a->phase, sizeof(a->phase)) == sizeof(a->phase) ||
        strnlen(a->node, sizeof(a->node)) == sizeof(a->node) ||
        strnlen(a->ip, sizeof(a->ip)) == sizeof(a->ip) ||
        strnlen(a->uid, sizeof(a->uid)) == sizeof(a->uid))
        abort();
    char text[1024];
    pf_absent_text(text, sizeof(text), a);
    if (strnlen(text, sizeof(text)) == sizeof(text)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const char *p = (const char *)data + 1;
    size_t n = size - 1;
    struct pf_absent a[3];
    memset(a, 0, sizeof(a));
    a[0].rank = 1, a[1].rank = 2, a[2].rank = 3;
    strcpy(a[0].expect, "trainer-1");
    strcpy(a[1].expect, "trainer-2");
    a[2].expect[0] = '\0'; /* a rank the naming cannot name */
    if (data[0] == 'e') {
        strcpy(a[0].uid, "uid-1");
        strcpy(a[0].phase, "Pending");
        (void)pf_absent_events(&a[0], p, n);
    } else {
        struct pf_absent_ask q = {.ns = "ml",
                                  .selector = "job-name=trainer",
                                  .self_pod = "trainer-0-abcde",
                                  .coordinator = "trainer-0.trainer",
                                  .port = 29400,
                                  .by_index = data[0] == 'i'};
        (void)pf_absent_pods(a, 3, &q, p, n);
    }
    for (size_t i = 0; i < 3; i++)
        check(&a[i]);
    return 0;
}
