/* wire: the bytes every message between pods is made of. Versioned, length-prefixed frames
 * with a magic number and an optional HMAC-SHA256 bound to per-connection nonces; their
 * payload, a sequence of key/value fields (`pf_wire_put*` writes them, `pf_wire_fields_*`
 * reads them); the words a REJECT says; and the lost/failed marks and the refused JOINs that
 * the meeting keeps and pkg/fleet judges. Pure
 * functions (no I/O) except pf_wire_random; below both the rendezvous (which carries frames
 * over its connections) and the fleet (whose reports are field payloads). */
#ifndef PF_WIRE_H
#define PF_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/base.h"

/* 2: the MAC covers the payload's SHA-256, not the payload; 3: a rank's ROSTER holds every
 * position but its partners' records only, the others' addresses come with its tasks; 4: a
 * JOIN names its job (jobKind, jobNamespace, jobName, jobUid, under the MAC) and rank 0
 * refuses another job's pod ("job-mismatch"); a version-3 JOIN names none, so the versions
 * do not meet */
#define PF_WIRE_PROTO 4
#define PF_WIRE_MAGIC 0x50465256u /* "PFRV" */
#define PF_WIRE_HDR 16
#define PF_WIRE_MACLEN 32
#define PF_WIRE_NONCE 16
#define PF_WIRE_DIGEST 32 /* SHA-256 of a payload */
#define PF_WIRE_MAX_PAYLOAD (32u << 20)
#define PF_WIRE_F_MAC 0x01

enum pf_wire_type {
    PF_WIRE_HELLO = 1, /* rank 0 -> joiner on accept: nonce, versions */
    PF_WIRE_JOIN,      /* joiner -> rank 0: who I am, what I see */
    PF_WIRE_REJECT,    /* rank 0 -> joiner: why not (then closes) */
    PF_WIRE_ROSTER,    /* rank 0 -> all: who is in the run, where their data ports are */
    PF_WIRE_STEP,      /* rank -> rank 0: my part of a gather/barrier */
    PF_WIRE_RESULT,    /* rank 0 -> all: the gathered parts, or the decision to stop */
    PF_WIRE_SUMMARY,   /* rank 0 -> all: findings, culprits, fleet verdict */
    PF_WIRE_DHELLO,    /* data connection opener: run id, source, destination, purpose */
    PF_WIRE_TYPE_END,
};
const char *pf_wire_type_name(int type);

struct pf_wire_frame {
    uint8_t version;
    uint8_t type;
    uint8_t flags;
    uint32_t seq;
    uint32_t len;
    const uint8_t *header;  /* the PF_WIRE_HDR header bytes (covered by the MAC) */
    const uint8_t *payload; /* len bytes */
    const uint8_t *mac;     /* PF_WIRE_MACLEN bytes, or NULL */
};

/* Decodes one frame at the start of buf (len bytes available). Returns the frame's size
 * (> 0) when it is complete, 0 when more bytes are needed, PF_EINVAL when the bytes are not
 * a preflight frame (bad magic, unknown type or flags), PF_ETOOBIG when the announced payload
 * is over max_payload. A frame of another protocol version still decodes (version says
 * which) so the caller can name the mismatch. Pure; the fuzz target's entry point. */
int pf_wire_frame_decode(struct pf_wire_frame *out, const uint8_t *buf, size_t len,
                         size_t max_payload);
/* Writes a header for a frame of this type into hdr. */
void pf_wire_frame_header(uint8_t hdr[PF_WIRE_HDR], int type, int flags, uint32_t seq,
                          uint32_t len);

/* Payload: a sequence of fields [u8 key length][key][u32 BE value length][value]. Keys are
 * 1..64 printable ASCII bytes; a key may repeat (lists). */
struct pf_wire_field {
    const char *key;
    size_t klen;
    const uint8_t *val;
    size_t vlen;
};
struct pf_wire_fields {
    struct pf_wire_field *v;
    size_t n;
};
#define PF_WIRE_MAX_FIELDS 65536
/* Splits a payload into fields (pointing into p). PF_EINVAL on any malformed byte. */
int pf_wire_fields_decode(struct pf_wire_fields *out, const uint8_t *p, size_t len);
void pf_wire_fields_free(struct pf_wire_fields *f);
/* The first field with this key, or NULL. */
const struct pf_wire_field *pf_wire_fields_get(const struct pf_wire_fields *f, const char *key);
/* Copies a text value (no NUL bytes, fits n) into out; PF_ENOENT when absent. */
int pf_wire_fields_str(char *out, size_t n, const struct pf_wire_fields *f, const char *key);
/* A decimal integer value; PF_ENOENT when absent, PF_EINVAL when not a number. */
int pf_wire_fields_int(long long *out, const struct pf_wire_fields *f, const char *key);
/* A decimal number value, the whole field: digits with an optional minus, point and exponent,
 * finite; PF_ENOENT when absent, else PF_EINVAL (or PF_ETOOBIG) naming the field. */
int pf_wire_fields_num(double *out, const struct pf_wire_fields *f, const char *key);
/* Field i as a NUL-terminated copy (caller frees); NULL if it holds a NUL byte. */
char *pf_wire_field_dup(const struct pf_wire_field *fl);
bool pf_wire_field_is(const struct pf_wire_field *fl, const char *key);

int pf_wire_put(struct pf_buf *b, const char *key, const void *val, size_t vlen);
int pf_wire_put_str(struct pf_buf *b, const char *key, const char *s);
int pf_wire_put_int(struct pf_buf *b, const char *key, long long v);

/* Authentication: HMAC-SHA256 keyed with the token over a direction byte, both nonces, the
 * header and the SHA-256 of the payload (docs/security.md, "The frame MAC"). The header's
 * sequence number and the per-connection nonces make a frame useless on any other
 * connection or at any other position; the digest lets one payload sent on many connections
 * be hashed once (pf_wire_mac_digest), each connection's MAC then costs a few blocks. */
enum { PF_WIRE_DIR_TO_ROOT = 0, PF_WIRE_DIR_FROM_ROOT = 1, PF_WIRE_DIR_DATA = 2 };
struct pf_wire_auth {
    bool on;
    const char *token;
    uint8_t nonce_s[PF_WIRE_NONCE]; /* rank 0's (HELLO), or the run id on data connections */
    uint8_t nonce_c[PF_WIRE_NONCE]; /* the joiner's (JOIN) */
};
/* The payload's SHA-256, the part of a frame its MAC covers in place of the payload. */
void pf_wire_digest(uint8_t out[PF_WIRE_DIGEST], const uint8_t *payload, size_t len);
/* The MAC of a frame with this header and payload digest. */
void pf_wire_mac_digest(uint8_t out[PF_WIRE_MACLEN], const struct pf_wire_auth *a, int dir,
                        const uint8_t hdr[PF_WIRE_HDR], const uint8_t digest[PF_WIRE_DIGEST]);
/* The same, hashing the payload first. */
void pf_wire_mac(uint8_t out[PF_WIRE_MACLEN], const struct pf_wire_auth *a, int dir,
                 const uint8_t hdr[PF_WIRE_HDR], const uint8_t *payload, size_t len);
/* Constant-time check of a frame's MAC; false when it has none. */
bool pf_wire_mac_ok(const struct pf_wire_auth *a, int dir, const struct pf_wire_frame *f);
/* Random bytes from the kernel. */
void pf_wire_random(void *out, size_t n);

/* Ranks one message names before "and N more" (the meeting's and the fleet's alike). */
#define PF_WIRE_LIST_MAX 12

/* ---- marks ------------------------------------------------------------------------- */

/* A rank lost, or a rank that reported a failure, with why (pkg/fleet judges them). */
struct pf_wire_mark {
    int rank;
    char *why;
};
struct pf_wire_marks {
    struct pf_wire_mark *v;
    size_t n;
};
/* Adds (rank, why) unless rank is already there. */
void pf_wire_mark(struct pf_wire_marks *l, int rank, const char *why);
bool pf_wire_marked(const struct pf_wire_marks *l, int rank);
void pf_wire_marks_free(struct pf_wire_marks *l);

/* ---- refusals: why rank 0 refused a JOIN ------------------------------------------- */

/* The REJECT's `code`: these words cross the wire, and a refused pod's verdict names its
 * finding by them (docs/checks/60-rendezvous.md). */
enum pf_wire_refusal {
    PF_WIRE_REFUSED_TOKEN = 0, /* "auth-failed": its MAC does not verify, or the tokens differ */
    PF_WIRE_REFUSED_RUN,       /* "version-mismatch": its JOIN names no run of this rank 0 */
    PF_WIRE_REFUSED_DUPLICATE, /* "duplicate-rank": another pod holds its rank (or rank 0) */
    PF_WIRE_REFUSED_WORLD,     /* "world-size-mismatch": its rank is outside rank 0's world */
    PF_WIRE_REFUSED_LATE,      /* "missing-ranks": the run started without it */
    PF_WIRE_REFUSED_JOB,       /* "job-mismatch": its JOIN names another job than rank 0's */
    PF_WIRE_REFUSED_END,
};
/* The word of r ("" for none). */
const char *pf_wire_refusal_code(enum pf_wire_refusal r);
/* The refusal a REJECT's code names: 0, or PF_EINVAL for a word this version does not know. */
int pf_wire_refusal_parse(const char *code, enum pf_wire_refusal *out);

/* A JOIN rank 0 refused after believing it (its MAC verified, or no token is set): what it
 * claimed. A JOIN that fails the token check is not believed, so it is no refusal of this
 * kind: it is counted, and kept by the rank it claimed (the meeting's member record). */
#define PF_WIRE_CLAIM_MAX 256
#define PF_WIRE_JOB_MAX 448
struct pf_wire_refused {
    enum pf_wire_refusal why;
    long long rank, world;         /* the rank and world size it claimed */
    char claim[PF_WIRE_CLAIM_MAX]; /* "a pod at ADDR claiming rank R (POD)" */
    char pod[PF_WIRE_CLAIM_MAX];   /* its pod ("" when it named none) */
    char addr[64];                 /* the address it came from */
    /* PF_WIRE_REFUSED_DUPLICATE of a rank that had joined: the pod holding it, and from where */
    char holder[PF_WIRE_CLAIM_MAX], holder_addr[64];
    /* PF_WIRE_REFUSED_JOB: the job its JOIN named, and rank 0's ("Job ml/trainer (uid ..)") */
    char job[PF_WIRE_JOB_MAX], root_job[PF_WIRE_JOB_MAX];
};

#endif
