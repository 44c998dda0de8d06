/* Fuzz target: what `preflight watch` reads from the shared folder, which the trainer can
 * write: the gate's verdict (the first input byte chooses: odd, the rest is a verdict's YAML)
 * and NCCL's files, fed in pieces whose sizes the input chooses (lines split anywhere,
 * partial and overlong lines), into two files at once; then the stall on the clock, check
 * `watch` and its YAML, and the watch's metrics. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/watch/watch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    struct pf_watch w;
    memset(&w, 0, sizeof(w));
    w.inotify_fd = -1;
    w.gate.hcas = w.gate.gdr = -1;
    w.o.stall_s = 1e-9;
    w.t0 = 1;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    if (data[0] & 1) {
        struct pf_watch_gate g;
        (void)pf_watch_gate_parse(&g, "fuzz.yaml", text, len);
        if (g.found) w.gate = g;
    }
    (void)pf_watch_file_add(&w, "nccl.a.1");
    (void)pf_watch_file_add(&w, "nccl.b.2"); /* may move the first: files are taken by index */
    size_t i = 0, k = 0;
    while (i < len) {
        size_t piece = 1 + (size_t)(data[(i + k) % size] % 97);
        if (piece > len - i) piece = len - i;
        pf_watch_feed(&w, &w.files[k & 1], text + i, piece);
        for (size_t j = 0; j < 2; j++)
            if (w.files[j].have > PF_NCCLLOG_LINE_MAX) abort();
        i += piece;
        k++;
    }
    pf_watch_judge_clock(&w);
    (void)pf_watch_all_complete(&w);
    struct pf_verdict v;
    pf_verdict_init(&v);
    struct pf_check *c = pf_verdict_add_check(&v, "watch");
    pf_watch_check(c, &w);
    pf_verdict_finalize(&v, NULL, NULL);
    char *yaml = NULL;
    size_t ylen = 0;
    if (pf_verdict_to_yaml(&yaml, &ylen, &v) != 0) abort(); /* a lost verdict */
    free(yaml);
    pf_verdict_free(&v);
    struct pf_buf b;
    pf_buf_init(&b, (size_t)1 << 20);
    (void)pf_watch_metrics_text(&b, &w, "pod\"x\n");
    pf_buf_free(&b);
    pf_watch_close(&w);
    return 0;
}
