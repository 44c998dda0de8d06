/* Fuzz target: `preflight report VERDICT --html FILE`'s reader and page writer (pkg/report/html.c)
 * over any bytes as the verdict: it either writes a page or refuses with an error naming the
 * input, never crashes, and a page never holds "</script" or "<script" of the input outside
 * its own two scripts (checked here: exactly two "<script" in the page). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../pkg/report/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t count(const char *s, size_t n, const char *w)
{
    size_t k = 0, wl = strlen(w);
    for (size_t i = 0; i + wl <= n; i++)
        if (strncasecmp(s + i, w, wl) == 0) k++;
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pf_buf out;
    pf_buf_init(&out, size * 8 + (4u << 20));
    int r = pf_report_html(&out, "fuzz.yaml", (const char *)data, size);
    if (r == 0 && count(out.data, out.len, "<script") != 2) abort();
    if (r < 0 && strstr(pf_err_msg(), "fuzz.yaml") == NULL) abort(); /* an error names the input */
    pf_buf_free(&out);
    return 0;
}
