/* Fuzz target: NCCL_DEBUG=INFO logs (`preflight log`): line splitting, launcher prefixes and
 * timestamps, host:pid:tid, version, transport, HCA and channel lines; then the hosts, the
 * findings and the evidence built from what was read, rendered as YAML, as JSON and as the
 * human summary (80 and 200 columns); the input split in two files, as logs of several jobs
 * are told apart. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "../../pkg/nccllog/nccllog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pf_nccllog log = {0};
    pf_nccllog_file_begin(&log, "fuzz.log");
    pf_nccllog_text(&log, (const char *)data, size / 2);
    pf_nccllog_file_begin(&log, "fuzz2.log");
    pf_nccllog_text(&log, (const char *)data + size / 2, size - size / 2);
    char why[1024];
    (void)pf_nccllog_several_runs(&log, why, sizeof(why));
    if (log.nccl_lines > log.lines) abort();
    struct pf_verdict v;
    pf_verdict_init(&v);
    struct pf_check *c = pf_verdict_add_check(&v, "nccl.log");
    for (size_t i = 0; i < log.n; i++)
        (void)pf_nccllog_gdr(&log.v[i]);
    pf_nccllog_check(&v, c, &log, size & 1 ? "IB" : "");
    struct pf_buf b;
    pf_buf_init(&b, (size_t)1 << 20);
    pf_nccllog_render(&b, &log, c);
    pf_buf_free(&b);
    pf_buf_init(&b, (size_t)1 << 20);
    pf_nccllog_render_width(&b, &log, c, 200);
    pf_buf_free(&b);
    pf_verdict_finalize(&v, NULL, NULL);
    char *yaml = NULL;
    size_t len = 0;
    if (pf_verdict_to_yaml(&yaml, &len, &v) != 0) abort(); /* a lost verdict */
    free(yaml);
    if (pf_verdict_to_json(&yaml, &len, &v) != 0) abort();
    json_t *j = json_loadb(yaml, len, JSON_REJECT_DUPLICATES, NULL);
    if (!j) abort(); /* --format json must be JSON whatever the log held */
    json_decref(j);
    free(yaml);
    pf_verdict_free(&v);
    pf_nccllog_free(&log);
    return 0;
}
