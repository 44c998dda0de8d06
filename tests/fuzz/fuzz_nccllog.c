/* Fuzz target: NCCL_DEBUG=INFO logs (`preflight log`): line splitting, host:pid:tid and
 * kubectl prefixes, version, transport, HCA and channel lines; then the findings and the
 * evidence built from what was read, rendered as YAML. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "../../pkg/nccl/nccl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pf_nccllog log = {0};
    pf_nccllog_text(&log, (const char *)data, size);
    if (log.nccl_lines > log.lines) abort();
    struct pf_verdict v;
    pf_verdict_init(&v);
    struct pf_check *c = pf_verdict_add_check(&v, "nccl.log");
    for (size_t i = 0; i < log.n; i++)
        (void)pf_nccllog_gdr(&log.v[i]);
    pf_nccllog_findings(c, &log, size & 1 ? "IB" : "");
    pf_nccllog_evidence(c->evidence, &log);
    pf_verdict_finalize(&v, NULL, NULL);
    char *yaml = NULL;
    size_t len = 0;
    if (pf_verdict_to_yaml(&yaml, &len, &v) == 0) free(yaml);
    pf_verdict_free(&v);
    pf_nccllog_free(&log);
    return 0;
}
