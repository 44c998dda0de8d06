/* explain over the docs built into the binary: look-ups by check id, finding code and pair,
 * and which section's remedy a finding gets. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "../../../pkg/explain/explain.h"

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
    /* case does not matter */
    {"P2P-DISABLED", 0, {"nccl.env / p2p-disabled", "**Default:** fail"}},
    {"RDMA.Ports", 0, {"## `rdma.ports`"}},
    {"P2P-DISABLD", PF_ENOENT, {"did you mean 'p2p-disabled'?"}},
};

static void test_lookup(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(lookups) / sizeof(lookups[0]); i++) {
        const struct lookup_case *t = &lookups[i];
        struct pf_buf b;
        pf_buf_init(&b, 1 << 20);
        int rc = pf_explain(&b, t->what);
        const char *text = rc == 0 ? (b.data) : pf_err_msg();
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

/* Rendered plain: no markup characters, headings underlined, every line within the width,
 * list items with a hanging indent. ANSI: bold and code as escape sequences. */
static void test_render(void **state)
{
    (void)state;
    static const char md[] =
        "## `rdma.ports`\n\n"
        "### `port-down`\n\n"
        "**Default:** fail\n\n"
        "The port's logical state is not ACTIVE (DOWN, INIT, ARMED), or it cannot be told that\n"
        "the port is usable: run `ibstat` on the node and look at the port's state there.\n\n"
        "* first item of a list that is long enough to need a second line when it is wrapped\n"
        "  at forty columns\n"
        "* second\n\n"
        "```\nverbatim   text\n```\n";
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    pf_explain_render(&b, md, false, 40);
    const char *t = b.data;
    assert_null(strstr(t, "**"));
    assert_null(strchr(t, '`'));
    assert_null(strchr(t, '#'));
    assert_non_null(strstr(t, "rdma.ports\n==========\n"));
    assert_non_null(strstr(t, "port-down\n---------\n"));
    assert_non_null(strstr(t, "\nDefault: fail\n"));
    assert_non_null(strstr(t, "  * first item"));
    assert_non_null(strstr(t, "\n    verbatim   text\n"));
    for (const char *l = t; *l;) {
        size_t n = strcspn(l, "\n");
        if (n > 40) fail_msg("line longer than 40: %.*s", (int)n, l);
        if (strncmp(l, "  * first", 9) == 0) assert_memory_equal(l + n + 1, "    ", 4);
        l += n + (l[n] == '\n');
    }
    pf_buf_free(&b);
    pf_buf_init(&b, 1 << 16);
    pf_explain_render(&b, md, true, 80);
    assert_non_null(strstr(b.data, "\033[1mDefault:\033[22m fail"));
    assert_non_null(strstr(b.data, "\033[36mibstat\033[39m"));
    pf_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render),
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_remedy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
