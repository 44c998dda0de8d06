/* explain over the docs built into the binary: look-ups by check id, finding code and pair,
 * and which section's remedy a finding gets. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "../../pkg/explain/explain.h"

struct lookup_case {
    const char *what;
    int rc;
    const char *has[4]; /* parts of the text, NULL-terminated */
};

static const struct lookup_case lookups[] = {
    /* a check id without a dot */
    {"rendezvous", 0, {"## `rendezvous`", "### `missing-ranks`", "publishNotReadyAddresses"}},
    {"collective.tcp", 0, {"## `collective.tcp`", "### `slow-node`"}},
    /* a code under two checks: both sections, each named */
    {"nccl-version-mismatch",
     0,
     {"rendezvous / nccl-version-mismatch", "nccl.log / nccl-version-mismatch"}},
    {"below-threshold",
     0,
     {"collective.tcp / below-threshold", "collective.nccl / below-threshold"}},
    {"rendezvous/timeout", 0, {"rendezvous / timeout", "**Default:** fail"}},
    {"collective.tcp/below-threshold", 0, {"**Default:** warn", "tcp.minBusbwGBps"}},
    {"missing-rank", PF_ENOENT, {"did you mean 'missing-ranks'?"}},
};

static void test_lookup(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(lookups) / sizeof(lookups[0]); i++) {
        const struct lookup_case *t = &lookups[i];
        struct pf_buf b;
        pf_buf_init(&b, 1 << 20);
        int rc = pf_explain(&b, t->what);
        const char *text = rc == 0 ? (b.data ? b.data : "") : pf_err_msg();
        if (rc != t->rc) fail_msg("%s: rc %d, expected %d (%s)", t->what, rc, t->rc, text);
        for (int k = 0; k < 4 && t->has[k]; k++)
            if (!strstr(text, t->has[k]))
                fail_msg("%s: no \"%s\" in: %.300s", t->what, t->has[k], text);
        pf_buf_free(&b);
    }
}

struct remedy_case {
    const char *check, *code;
    const char *has; /* a part of the remedy */
};

static const struct remedy_case remedies[] = {
    /* its own section */
    {"rendezvous", "missing-ranks", "podManagementPolicy: Parallel"},
    {"rendezvous", "timeout", "rendezvous.timeoutSeconds"},
    {"collective.tcp", "timeout", "tcp.messageBytes"},
    {"collective.nccl", "timeout", "nccl.timeoutSeconds"},
    /* the run's deadline under a stage that does not document it: the run's own remedy */
    {"rdma.counters", "timeout", "raise `--timeout` if the job is simply large"},
    {"collective.tcp", "interrupted", "run it again"},
    /* no check named: the first section that has the code */
    {NULL, "slow-link", "the path between the two nodes"},
};

static void test_remedy(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(remedies) / sizeof(remedies[0]); i++) {
        const struct remedy_case *t = &remedies[i];
        char out[2048];
        int rc = pf_explain_remedy(out, sizeof(out), t->check, t->code);
        if (rc != 0 || !strstr(out, t->has))
            fail_msg("%s/%s: rc %d, remedy \"%s\"; expected \"%s\"", t->check ? t->check : "*",
                     t->code, rc, out, t->has);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_remedy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
