/* Writes the verdict on SIGTERM, SIGINT and at the deadline, from a snapshot rendered in
 * advance, so that nothing but write/rename runs inside the signal handler. */
#define _GNU_SOURCE
#include "verdict.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

struct snapshot {
    char *deadline_yaml;
    size_t deadline_len;
    char *signal_yaml;
    size_t signal_len;
    int deadline_exit, signal_exit;            /* the exit code of each (its failure class) */
    char deadline_line[512], signal_line[512]; /* the termination message of each */
};

static char guard_path[4096];
static char guard_tmp[4200];
static bool guard_stdout;
static pf_policy_fn guard_policy;
static void *guard_arg;
static double guard_deadline; /* monotonic seconds; 0 = none */
static double guard_timeout;
static double guard_started; /* monotonic seconds at install */
static _Atomic(struct snapshot *) current;
static volatile sig_atomic_t guard_armed;
static char guard_term[4096]; /* termination message file; "" = none */

static void write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}

static void say(const char *s)
{
    write_all(STDERR_FILENO, s, strlen(s));
}

static void handler(int sig)
{
    if (!guard_armed) _exit(1);
    guard_armed = 0;
    struct snapshot *s = atomic_load(&current);
    if (s) {
        const char *y = sig == SIGALRM ? s->deadline_yaml : s->signal_yaml;
        size_t n = sig == SIGALRM ? s->deadline_len : s->signal_len;
        if (guard_stdout) {
            write_all(STDOUT_FILENO, y, n);
        } else {
            int fd = open(guard_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (fd >= 0) {
                write_all(fd, y, n);
                fsync(fd);
                close(fd);
                rename(guard_tmp, guard_path);
            }
        }
    }
    int code = 1;
    if (s) {
        const char *line = sig == SIGALRM ? s->deadline_line : s->signal_line;
        code = sig == SIGALRM ? s->deadline_exit : s->signal_exit;
        int fd =
            guard_term[0] ? open(guard_term, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
        if (fd >= 0) {
            write_all(fd, line, strlen(line));
            close(fd);
        }
    }
    if (sig == SIGALRM)
        say("preflight: deadline reached; verdict written (fail)\n");
    else
        say("preflight: stopped by a signal; verdict written (fail)\n");
    _exit(code);
}

int pf_verdict_guard_install(const char *path, double timeout_s, pf_policy_fn policy, void *arg)
{
    guard_stdout = strcmp(path, "-") == 0;
    if (pf_strcpy(guard_path, sizeof(guard_path), path) < 0 ||
        pf_snprintf(guard_tmp, sizeof(guard_tmp), "%s.tmp.%d", path, (int)getpid()) < 0)
        return pf_err_set(PF_EUSAGE, "--verdict %s: path too long", path);
    guard_policy = policy;
    guard_arg = arg;
    guard_timeout = timeout_s;
    guard_started = pf_now();
    guard_deadline = timeout_s > 0 ? pf_now() + timeout_s : 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sigfillset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGALRM, &sa, NULL);
    if (timeout_s > 0) {
        struct itimerval it = {0};
        it.it_value.tv_sec = (time_t)timeout_s;
        it.it_value.tv_usec = (suseconds_t)((timeout_s - (double)(time_t)timeout_s) * 1e6);
        if (it.it_value.tv_sec == 0 && it.it_value.tv_usec == 0) it.it_value.tv_usec = 1;
        setitimer(ITIMER_REAL, &it, NULL);
    }
    guard_armed = 1;
    return 0;
}

double pf_verdict_guard_remaining(void)
{
    if (guard_deadline <= 0) return 1e9;
    double left = guard_deadline - pf_now();
    return left > 0 ? left : 0;
}

void pf_verdict_guard_termination(const char *path)
{
    if (pf_strcpy(guard_term, sizeof(guard_term), path ? path : "") < 0) guard_term[0] = '\0';
}

static char *render(const struct pf_verdict *v, const char *stage_id, const char *code,
                    const char *msg, double duration, size_t *len, int *exit_code, char *line,
                    size_t nline)
{
    struct pf_verdict copy;
    pf_verdict_clone(&copy, v);
    struct pf_check *c = pf_verdict_add_check(&copy, stage_id);
    pf_check_add_finding(c, code, PF_FAIL, NULL, "%s", msg);
    copy.duration_seconds = duration;
    pf_verdict_finalize(&copy, guard_policy, guard_arg);
    /* the gate must not open on an interrupted run, whatever the policy says */
    copy.verdict = PF_FAIL;
    pf_verdict_classify(&copy);
    *exit_code = pf_verdict_exit_code(&copy);
    pf_verdict_reason_line(line, nline, &copy);
    char *yaml = NULL;
    if (pf_verdict_to_yaml(&yaml, len, &copy) < 0) yaml = NULL;
    pf_verdict_free(&copy);
    return yaml;
}

void pf_verdict_guard_update(const struct pf_verdict *v, const char *stage_id, const char *doing)
{
    char msg[768];
    struct snapshot *s = pf_xcalloc(1, sizeof(*s));
    snprintf(msg, sizeof(msg), "deadline of %.0f s (--timeout) reached while %s", guard_timeout,
             doing);
    /* rendered in advance: at the deadline the run has lasted --timeout; a signal's verdict
     * says how long it had run when this stage began (at least that long) */
    s->deadline_yaml = render(v, stage_id, "timeout", msg, guard_timeout, &s->deadline_len,
                              &s->deadline_exit, s->deadline_line, sizeof(s->deadline_line));
    snprintf(msg, sizeof(msg), "stopped by SIGTERM or SIGINT while %s", doing);
    s->signal_yaml =
        render(v, stage_id, "interrupted", msg, pf_now() - guard_started, &s->signal_len,
               &s->signal_exit, s->signal_line, sizeof(s->signal_line));
    if (!s->deadline_yaml || !s->signal_yaml) {
        free(s->deadline_yaml);
        free(s->signal_yaml);
        free(s);
        return;
    }
    /* swap with the signals blocked so that the handler never reads a freed snapshot */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    struct snapshot *prev = atomic_exchange(&current, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (prev) {
        free(prev->deadline_yaml);
        free(prev->signal_yaml);
        free(prev);
    }
}

void pf_verdict_guard_disarm(void)
{
    struct itimerval it = {0};
    setitimer(ITIMER_REAL, &it, NULL);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    guard_armed = 0;
    struct snapshot *prev = atomic_exchange(&current, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (prev) {
        free(prev->deadline_yaml);
        free(prev->signal_yaml);
        free(prev);
    }
    signal(SIGALRM, SIG_IGN);
}
