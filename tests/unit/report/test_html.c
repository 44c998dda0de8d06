/* pkg/report/html.c: `preflight report --html`'s page of a verdict: every string escaped (HTML in
 * the page, JSON with < > & as \u escapes in the data block), the links and ranks as the data
 * block's arrays, the policy's script hash; and the refusals, each naming the file and line.
 * (The page in a real browser: tests/e2e/test_report_html.sh.) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "../../../pkg/report/report.h"

static int render(struct pf_buf *b, const char *text)
{
    pf_buf_init(b, 1 << 20);
    return pf_report_html(b, "v.yaml", text, strlen(text));
}

static const char verdict[] =
    "apiVersion: preflight/v1\n"
    "kind: Verdict\n"
    "verdict: warn\n"
    "summary: \"a <b>summary</b> & more\"\n"
    "pod: {name: \"trainer-0\", namespace: ml, node: n0, rank: 0, worldSize: 3}\n"
    "checks:\n"
    "  - id: collective.tcp\n"
    "    status: warn\n"
    "    message: \"it's slow\"\n"
    "    findings: [{code: slow-link, status: warn, message: \"1 -> 2\", remedy: x}]\n"
    "    evidence:\n"
    "      medianLinkGbps: 9.5\n"
    "      links:\n"
    "        - {from: 1, to: 2, gbps: 0.04}\n"
    "        - {from: 2, to: 1, gbps: 9.5}\n"
    "culprits: []\n"
    "ranks:\n"
    "  - rank: 0\n"
    "    pod: \"p</script><script>alert(1)</script>\"\n"
    "    state: joined\n"
    "    verdict: pass\n"
    "    checksPassed: 1\n"
    "    checks:\n"
    "      - {id: gpu.devices, status: pass, findings: []}\n"
    "      - {id: rdma.ports, status: fail, findings: [port-down, \"a&b\"]}\n"
    "  - {rank: 2, pod: trainer-2, state: missing, verdict: fail}\n";

static void test_page(void **state)
{
    (void)state;
    struct pf_buf b;
    assert_int_equal(render(&b, verdict), 0);
    const char *s = b.data;
    assert_non_null(strstr(s, "<!DOCTYPE html>"));
    assert_non_null(strstr(s, "default-src 'none'"));
    assert_non_null(strstr(s, "script-src 'sha256-"));
    assert_non_null(strstr(s, "a &lt;b&gt;summary&lt;/b&gt; &amp; more"));
    assert_non_null(strstr(s, "it&#39;s slow"));
    assert_non_null(strstr(s, "\"links\":[1,2,0.04,2,1,9.5]"));
    assert_non_null(strstr(s, "\"median\":9.5"));
    assert_non_null(strstr(s, "\"world\":3"));
    /* the pod's markup only as \u escapes in the data block */
    assert_null(strstr(s, "alert(1)</script>"));
    assert_non_null(strstr(s, "\"p\\u003c/script\\u003e\\u003cscript\\u003ealert(1)"));
    assert_non_null(strstr(s, "\"ids\":[\"gpu.devices\",\"rdma.ports\"]"));
    assert_non_null(strstr(s, "\"pf\",{\"1\":\"port-down, a\\u0026b\"}]"));
    assert_non_null(strstr(s, "[2,\"trainer-2\",\"\",\"\",\"missing\",\"fail\",-1,-1,\"\",{}]"));
    /* exactly the page's own two scripts */
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, "<script")); p++)
        n++;
    assert_int_equal(n, 2);
    pf_buf_free(&b);
}

/* a large job's verdict lists its 48 slowest links (pkg/run/summary.c): the page says so, and
 * a link probed twice keeps both samples for the script (which shows the best) */
static void test_slowest_links(void **state)
{
    (void)state;
    struct pf_buf b;
    assert_int_equal(render(&b, "apiVersion: preflight/v1\nkind: Verdict\nverdict: pass\n"
                                "checks:\n  - id: collective.tcp\n    status: pass\n"
                                "    evidence:\n      linksMeasured: 6000\n"
                                "      medianLinkGbps: .nan\n"
                                "      slowestLinks:\n        - {from: 7, to: 9, gbps: 0.5}\n"
                                "        - {from: 7, to: 9, gbps: 0.7}\n"),
                     0);
    assert_non_null(strstr(b.data, "6000 links were measured; the verdict lists the 2 slowest"));
    assert_non_null(strstr(b.data, "\"links\":[7,9,0.5,7,9,0.7]"));
    assert_non_null(strstr(b.data, "\"median\":0,")); /* .nan: no median, no slow colour */
    assert_non_null(strstr(b.data, "\"world\":10"));
    assert_non_null(strstr(b.data, "This verdict has no ranks list"));
    pf_buf_free(&b);
}

/* evidence.linkRates (docs/verdict.md): every link, read instead of slowestLinks; a value
 * folded over lines by YAML reads as one */
static void test_link_rates(void **state)
{
    (void)state;
    struct pf_buf b;
    assert_int_equal(render(&b, "apiVersion: preflight/v1\nkind: Verdict\nverdict: pass\n"
                                "checks:\n  - id: collective.tcp\n    status: pass\n"
                                "    evidence:\n      linksMeasured: 5\n"
                                "      slowestLinks:\n        - {from: 7, to: 9, gbps: 0.5}\n"
                                "      linkRates:\n        \"7\": 9=0.5 8=9.25\n"
                                "        \"12\": 0=9\n          3=9.5   1=9.125\n"),
                     0);
    assert_non_null(strstr(b.data, "5 links measured."));
    assert_non_null(strstr(b.data, "\"links\":[7,9,0.5,7,8,9.25,12,0,9,12,3,9.5,12,1,9.125]"));
    assert_non_null(strstr(b.data, "\"median\":9.125,")); /* of every link */
    assert_non_null(strstr(b.data, "\"world\":13"));
    pf_buf_free(&b);
}

static void refused(const char *text, const char *want)
{
    struct pf_buf b;
    assert_int_equal(render(&b, text), PF_EUSAGE);
    if (!strstr(pf_err_msg(), want)) fail_msg("\"%s\" lacks \"%s\"", pf_err_msg(), want);
    pf_buf_free(&b);
}

static void test_refusals(void **state)
{
    (void)state;
    refused("", "v.yaml: empty");
    refused("a: [b\n", "v.yaml: line 2: not YAML");
    refused("apiVersion: preflight/v2\nkind: Verdict\n", "v.yaml: line 1: not a preflight verdict");
    refused("apiVersion: preflight/v1\nkind: Other\n", "v.yaml: line 2: not a preflight verdict");
    refused("- 1\n", "line 1: not a preflight verdict (a sequence");
    refused("apiVersion: preflight/v1\nkind: Verdict\nchecks: {a: 1}\n",
            "v.yaml: line 3: checks is a mapping, expected a sequence");
    refused("apiVersion: preflight/v1\nkind: Verdict\nranks:\n  - {rank: x}\n",
            "v.yaml: line 4: rank is \"x\", expected a number");
    refused("apiVersion: preflight/v1\nkind: Verdict\nranks:\n  - {pod: a}\n",
            "line 4: a rank without its rank number");
    refused("apiVersion: preflight/v1\nkind: Verdict\na: &x [1]\nb: *x\n", "line 4: a YAML alias");
    refused("apiVersion: preflight/v1\nkind: Verdict\n---\na: 1\n", "a second YAML document");
    const char *lr = "apiVersion: preflight/v1\nkind: Verdict\nchecks:\n  - id: collective.tcp\n"
                     "    evidence:\n      linkRates:\n";
    const char *bad[][2] = {
        {"        \"7\": 9=fast\n", "line 7: linkRates of rank 7: \"9=fast\" is not DST=GBPS"},
        {"        \"7\": 9=1 =2\n", "linkRates of rank 7: \"=2\" is not DST=GBPS"},
        {"        \"7\": 9=-1\n", "\"9=-1\" is not DST=GBPS"},
        {"        \"7\": 9=.nan\n", "is not DST=GBPS"},
        {"        \"7\": 9=1,8=2\n", "is not DST=GBPS"},
        {"        \"7\": 9999999=1\n", "is not DST=GBPS"},
        {"        x: 9=1\n", "linkRates: key \"x\" is not a rank"},
        {"        \"7\": [1]\n", "linkRates has a scalar: a sequence"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char t[400];
        snprintf(t, sizeof(t), "%s%s", lr, bad[i][0]);
        refused(t, bad[i][1]);
    }
    char deep[400] = "apiVersion: preflight/v1\nkind: Verdict\nx: ";
    for (int i = 0; i < 70; i++)
        strcat(deep, "[");
    refused(deep, "nested deeper than a verdict");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_page),
        cmocka_unit_test(test_slowest_links),
        cmocka_unit_test(test_link_rates),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
