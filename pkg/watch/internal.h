/* watch: declarations shared by the module's files (not a public header). */
#ifndef PF_WATCH_INTERNAL_H
#define PF_WATCH_INTERNAL_H

#include "watch.h"

/* judge.c: judges process i of the reader after a line of it was read. */
void pf_watch_judge_proc(struct pf_watch *w, size_t i);
/* gate.c: reads the gate's verdict when it is not yet known (and re-judges every process when it
 * appears). */
void pf_watch_gate_refresh(struct pf_watch *w);

#endif
