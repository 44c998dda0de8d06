/* What the files of pkg/fleet share among themselves only. */
#ifndef PF_FLEET_INTERNAL_H
#define PF_FLEET_INTERNAL_H

#include "fleet.h"

/* Writes item i of items as the nested fields of one record into rec (empty on each call). */
typedef void (*fleet_record_fn)(struct pf_buf *rec, const void *items, size_t i);
/* Appends n records to out, each a field key whose value is what put wrote. A record over its
 * own limit is left out whole, never cut; returns pf_buf_check(out, what): PF_ETOOBIG naming
 * what when a record or out went over. */
int fleet_records_put(struct pf_buf *out, const char *key, const void *items, size_t n,
                      fleet_record_fn put, const char *what);

#endif
