/* inject: `preflight inject`, the preflight gate added to a job's Kubernetes YAML.
 *
 * The input is read with libyaml's parser into a tree of nodes that keep where they are in the
 * input (byte offsets from the events' marks, yaml.h `yaml_mark_t`); the gate is then added by
 * inserting text at computed places (a key at the end of a mapping, an item at the start or the
 * end of a sequence) with the indentation of its neighbours, block or flow as they are. Every
 * byte of the input is kept: the user's fields, their order, comments, quoting and blank lines.
 * Nothing is re-emitted, so nothing the user wrote can change. The one removal: from an object
 * read back from the API server (metadata.uid or resourceVersion set) that gets the gate, what
 * the server wrote (uid, resourceVersion, status, a Job's generated selector), so that it can
 * be created again. What is there already is
 * recognised by name (the initContainer `preflight`, each volume, each variable, a failure
 * policy), so a second run adds nothing. The result is parsed again and planned again before it
 * is returned: it must be YAML and need no further edit, else the input is refused.
 *
 * Pure: no file, no print. The command (cmd/preflight/cmd_inject.c) reads and writes. */
#ifndef PF_INJECT_H
#define PF_INJECT_H

#include <stdbool.h>
#include <stddef.h>

#include "../base/base.h"

/* The largest input inject reads (a List of many jobs is still far below it). */
#define PF_INJECT_MAX (16u << 20)

struct pf_inject_opts {
    const char *image; /* the preflight image; NULL: PF_INJECT_IMAGE */
    bool watch;        /* add the `preflight watch` native sidecar and the trainer's NCCL_DEBUG_* */
    const char *name;  /* the input's name for messages ("-" for stdin) */
};

#define PF_INJECT_IMAGE "registry.example.com/preflight:" PF_VERSION

/* What one run did: counts and one line per note (a hint the user must act on, such as the
 * headless Service a launcher does not create, or what was found already there). */
struct pf_inject_result {
    int documents; /* YAML documents read (the items of a List count one each) */
    int gated;     /* pod templates that got the gate now */
    int already;   /* pod templates that had it */
    int passed;    /* objects passed through untouched (Service, ConfigMap, ...) */
    int removed;   /* fields the API server wrote, removed from an object read from it */
    struct pf_strlist notes;
};

/* Adds the gate to in[0..len): *out (malloc'ed, NUL-terminated, *out_len bytes) and res. -1
 * with pf_err_msg() naming the input, the document and the object when any object cannot be
 * gated (a Deployment, an unknown kind, no pod template, an alias where a field is needed,
 * input that is not YAML): then nothing is returned, so that a pipe into `kubectl apply` never
 * applies half a stream. */
int pf_inject(const struct pf_inject_opts *o, const char *in, size_t len, char **out,
              size_t *out_len, struct pf_inject_result *res);
void pf_inject_result_free(struct pf_inject_result *res);

#endif
