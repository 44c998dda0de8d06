/* A host name resolved before a deadline (pf_resolve_by, base.h).
 *
 * getaddrinfo has no deadline of its own: glibc waits for each name server as resolv.conf says
 * (`options timeout:N attempts:M`, resolv/res_send.c; up to 5 s x 2 by default, 30 s and more
 * where an operator set it), whatever the caller's budget. So the lookup runs on a thread of its
 * own that nobody joins: the caller waits for it only until the deadline, and whichever of the
 * two leaves last frees the job (the answer with it, when the caller had gone). Used by the
 * joining ranks' dial of rank 0 (pkg/rendezvous/conn.c) and by pkg/kapi for the API server's and
 * the Pushgateway's names (handed to libcurl as CURLOPT_RESOLVE). At most RESOLVE_MAX_PENDING
 * lookups are left running at once: a resolver that never answers cannot pile up threads. */
#define _GNU_SOURCE
#include "base.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define RESOLVE_MAX_PENDING 16

struct resolve_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs; /* the waiter and the thread: the last to leave frees the job */
    bool done;
    int rc, err;
    struct addrinfo hints;
    struct addrinfo *ai; /* the answer, until the waiter takes it */
    char host[256], port[16];
};

static pthread_mutex_t pending_mu = PTHREAD_MUTEX_INITIALIZER;
static int pending; /* lookups whose threads still run */

static void job_release(struct resolve_job *j)
{
    pthread_mutex_lock(&j->mu);
    bool last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (!last) return;
    if (j->ai) freeaddrinfo(j->ai);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

static void *resolve_thread(void *arg)
{
    struct resolve_job *j = arg;
    struct addrinfo *ai = NULL;
    int rc = getaddrinfo(j->host, j->port[0] ? j->port : NULL, &j->hints, &ai);
    int err = errno;
    pthread_mutex_lock(&j->mu);
    j->rc = rc;
    j->err = err;
    j->ai = ai;
    j->done = true;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    pthread_mutex_lock(&pending_mu);
    pending--;
    pthread_mutex_unlock(&pending_mu);
    job_release(j);
    return NULL;
}

static int resolve_error(const char *host, int rc, int err)
{
    return pf_err_set(PF_ENOENT, "cannot resolve %.200s: %s", host,
                      rc == EAI_SYSTEM ? strerror(err) : gai_strerror(rc));
}

int pf_resolve_by(struct addrinfo **out, const char *host, const char *port,
                  const struct addrinfo *hints, double deadline)
{
    *out = NULL;
    struct addrinfo h;
    memset(&h, 0, sizeof(h));
    if (hints) h = *hints;
    /* an address needs no resolver: answered at once */
    struct addrinfo numeric = h;
    numeric.ai_flags |= AI_NUMERICHOST;
    if (getaddrinfo(host, port, &numeric, out) == 0) return 0;
    *out = NULL;
    if (strlen(host) >= sizeof(((struct resolve_job *)0)->host) ||
        (port && strlen(port) >= sizeof(((struct resolve_job *)0)->port)))
        return pf_err_set(PF_ENOENT, "cannot resolve %.200s: name too long", host);
    if (deadline <= 0) { /* no deadline: the caller's own thread */
        int rc = getaddrinfo(host, port, &h, out);
        if (rc != 0) {
            *out = NULL;
            return resolve_error(host, rc, errno);
        }
        return 0;
    }
    if (deadline <= pf_now()) /* no time left: no lookup started */
        return pf_err_set(PF_ETIMEOUT, "resolving %.200s: no time left before the deadline", host);
    pthread_mutex_lock(&pending_mu);
    bool full = pending >= RESOLVE_MAX_PENDING;
    if (!full) pending++;
    pthread_mutex_unlock(&pending_mu);
    if (full)
        return pf_err_set(PF_ETIMEOUT,
                          "resolving %.200s: %d earlier lookups are still unanswered (the "
                          "resolver is slow or silent)",
                          host, RESOLVE_MAX_PENDING);
    struct resolve_job *j = pf_xcalloc(1, sizeof(*j));
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 2;
    j->hints = h;
    j->hints.ai_canonname = NULL, j->hints.ai_addr = NULL, j->hints.ai_next = NULL;
    snprintf(j->host, sizeof(j->host), "%s", host);
    snprintf(j->port, sizeof(j->port), "%s", port ? port : "");
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int c = pthread_create(&t, &at, resolve_thread, j);
    pthread_attr_destroy(&at);
    if (c != 0) {
        pthread_mutex_lock(&pending_mu);
        pending--;
        pthread_mutex_unlock(&pending_mu);
        j->refs = 1;
        job_release(j);
        return pf_err_set(PF_ERR, "resolving %.200s: no thread (%s)", host, strerror(c));
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double wait = deadline - pf_now();
    if (wait < 0) wait = 0;
    ts.tv_sec += (time_t)wait;
    ts.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&j->mu);
    while (!j->done)
        if (pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT) break;
    bool done = j->done;
    int rc = j->rc, err = j->err;
    if (done && rc == 0) {
        *out = j->ai;
        j->ai = NULL;
    }
    pthread_mutex_unlock(&j->mu);
    job_release(j);
    if (!done)
        return pf_err_set(PF_ETIMEOUT,
                          "resolving %.200s took longer than the deadline (the resolver is slow "
                          "or silent)",
                          host);
    if (rc != 0) return resolve_error(host, rc, err);
    return 0;
}
