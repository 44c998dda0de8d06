/* Writes the verdict on SIGTERM, SIGINT and at the deadline, from a snapshot rendered in
 * advance, so that nothing but open/write/fsync/rename/unlink runs inside the signal handler
 * (pf_file_replace_raw: a fresh temporary file, written completely or removed). */
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
    char *signal_yaml; /* the same buffer as deadline_yaml in a final snapshot */
    size_t signal_len;
    bool final;    /* the run's own verdict, being written: not an interrupted one */
    int exit_code; /* the handler's exit code (a final snapshot) */
    int deadline_exit, signal_exit;            /* the exit code of each (its failure class) */
    char deadline_line[512], signal_line[512]; /* the termination message of each */
    const char *status;                        /* "fail", or the final verdict's status */
};

static struct pf_file_target guard_target;
static uint64_t guard_seed;
static bool guard_stdout;
static pf_policy_fn guard_policy;
static void *guard_arg;
static double guard_deadline; /* monotonic seconds; 0 = none */
static double guard_timeout;
static double guard_started; /* monotonic seconds at install */
static _Atomic(struct snapshot *) current;
static volatile sig_atomic_t guard_armed;
/* set by the first handler to run, in whichever thread the signal reached */
static atomic_int guard_entered;
/* the exit code of a signal after the guard is disarmed: the final verdict's once it is
 * written, 1 before (and when its write failed) */
static volatile sig_atomic_t guard_done_code = 1;
static volatile sig_atomic_t guard_done; /* the final verdict is written */
static bool guard_write_failed;
/* the signals stay blocked from install until the first snapshot is there, so that a signal
 * in between is held, not answered with no verdict; the mask to restore then */
static bool guard_held;
static sigset_t guard_held_mask;
static char guard_term[4096]; /* termination message file; "" = none */

static void say(const char *s)
{
    (void)pf_file_write_all(STDERR_FILENO, s, strlen(s));
}

/* Async-signal-safe: writes the snapshot's bytes completely through a fresh temporary file
 * (pf_file_replace_raw), or leaves the file there as it was and says so. */
static void handler(int sig)
{
    /* one handler writes; a second signal, in another thread, waits for it to end the
     * process (a signal handler blocks all signals only in its own thread) */
    if (atomic_exchange(&guard_entered, 1))
        for (;;)
            pause();
    if (!guard_armed) {
        pf_file_inflight_unlink();
        _exit(guard_done_code);
    }
    guard_armed = 0;
    struct snapshot *s = atomic_load(&current);
    const char *why =
        sig == SIGALRM ? "preflight: deadline reached" : "preflight: stopped by a signal";
    if (!s) {
        /* none yet (--verdict -), or the guard was disarmed after the final write while this
         * handler began: that verdict stands */
        pf_file_inflight_unlink();
        if (!guard_done) {
            say(why);
            say("; no verdict written\n");
        }
        _exit(guard_done_code);
    }
    const char *y = sig == SIGALRM ? s->deadline_yaml : s->signal_yaml;
    size_t n = sig == SIGALRM ? s->deadline_len : s->signal_len;
    int e = 0;
    enum pf_file_step step = PF_FILE_STEP_WRITE;
    if (guard_stdout) {
        e = pf_file_write_all(STDOUT_FILENO, y, n);
    } else {
        /* the main flow's own temporary file (the final verdict, a metrics file) goes */
        pf_file_inflight_unlink();
        e = pf_file_replace_raw(&guard_target, y, n, 0644, guard_seed ^ (uint64_t)sig, false,
                                &step);
    }
    const char *line = sig == SIGALRM ? s->deadline_line : s->signal_line;
    int fd = guard_term[0] ? open(guard_term, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
    if (fd >= 0) {
        (void)pf_file_write_all(fd, line, strlen(line));
        close(fd);
    }
    say(why);
    if (s->final) say(" while writing the verdict");
    if (e == 0) {
        say("; verdict written (");
        say(s->status);
        say(")\n");
        _exit(s->final ? s->exit_code : sig == SIGALRM ? s->deadline_exit : s->signal_exit);
    }
    say("; verdict NOT written (");
    say(pf_file_step_name(step));
    say(": ");
    say(pf_file_errno_text(-e));
    say("): any verdict file there is left as it was\n");
    _exit(1);
}

/* Blocks the signals the guard handles (SIGTERM, SIGINT, SIGALRM) in this thread; the mask
 * before goes to old. */
static void block_guarded(sigset_t *old)
{
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &block, old);
}

int pf_verdict_guard_install(const char *path, double timeout_s, pf_policy_fn policy, void *arg)
{
    guard_stdout = strcmp(path, "-") == 0;
    if (!guard_stdout) {
        int r = pf_file_split(&guard_target, path);
        if (r < 0) {
            char why[1024];
            pf_strcpy(why, sizeof(why), pf_err_msg());
            return pf_err_set(PF_EUSAGE, "--verdict %s", why);
        }
        /* the folder exists before anything can interrupt the run: the handler only writes */
        pf_file_mkdir_parents(path);
    }
    if (!guard_held) block_guarded(&guard_held_mask);
    guard_held = true;
    guard_seed = pf_file_random();
    guard_done_code = 1;
    guard_done = 0;
    guard_write_failed = false;
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

static char *render(const struct pf_verdict *v, const char *stage_id, const char *code,
                    const char *msg, double duration, size_t *len, int *exit_code, char *line,
                    size_t nline)
{
    /* the ranks list (rank 0: a record per rank, the largest part of a large fleet's verdict)
     * is lent to the copy, not cloned: nothing below changes it. A snapshot writes it without
     * each rank's checks: two snapshots are rendered at each stage and the last two kept
     * until they are replaced, so four copies of 16,384 ranks' checks (17 MB each) would be
     * most of rank 0's memory; each rank's own verdict has its checks */
    struct pf_verdict bare = *v, copy;
    memset(&bare.ranks, 0, sizeof(bare.ranks));
    pf_verdict_clone(&copy, &bare);
    copy.ranks = v->ranks;
    copy.ranks.brief = true;
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
    memset(&copy.ranks, 0, sizeof(copy.ranks));
    pf_verdict_free(&copy);
    return yaml;
}

static void snapshot_free(struct snapshot *s)
{
    if (!s) return;
    if (s->signal_yaml != s->deadline_yaml) free(s->signal_yaml);
    free(s->deadline_yaml);
    free(s);
}

/* Makes s the snapshot the handler writes (NULL: none), with the signals blocked so that
 * the handler never reads a freed one. */
static void publish(struct snapshot *s)
{
    sigset_t old;
    block_guarded(&old);
    struct snapshot *prev = atomic_exchange(&current, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    /* a handler in another thread may be reading it: the process ends soon then anyway */
    if (!atomic_load(&guard_entered)) snapshot_free(prev);
}

/* Delivers the signals held since install (the first snapshot is there now, or none will
 * be). */
static void release_held(void)
{
    if (!guard_held) return;
    guard_held = false;
    pthread_sigmask(SIG_SETMASK, &guard_held_mask, NULL);
}

/* When a handler runs in another thread, the main flow must not go on writing or exit
 * under it: the handler ends the process. */
static void wait_for_handler(void)
{
    if (atomic_load(&guard_entered))
        for (;;)
            pause();
}

void pf_verdict_guard_update(const struct pf_verdict *v, const char *stage_id, const char *doing)
{
    if (!guard_armed) return;
    char msg[768];
    struct snapshot *s = pf_xcalloc(1, sizeof(*s));
    s->exit_code = 1;
    s->status = "fail";
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
        snapshot_free(s);
        return;
    }
    publish(s);
    release_held();
}

void pf_verdict_guard_final(const struct pf_verdict *v, int exit_code)
{
    wait_for_handler();
    if (!guard_armed) return;
    if (guard_stdout) {
        /* the main flow writes stdout from here on: a second document would corrupt it */
        publish(NULL);
        release_held();
        return;
    }
    struct snapshot *s = pf_xcalloc(1, sizeof(*s));
    if (pf_verdict_to_yaml(&s->deadline_yaml, &s->deadline_len, v) < 0) {
        free(s);
        return; /* the interrupted snapshot stays */
    }
    s->signal_yaml = s->deadline_yaml;
    s->signal_len = s->deadline_len;
    s->final = true;
    s->exit_code = s->deadline_exit = s->signal_exit = exit_code;
    pf_verdict_reason_line(s->deadline_line, sizeof(s->deadline_line), v);
    memcpy(s->signal_line, s->deadline_line, sizeof(s->signal_line));
    s->status = pf_status_name(v->verdict);
    publish(s);
    release_held();
    wait_for_handler();
}

void pf_verdict_guard_write_failed(void)
{
    guard_write_failed = true;
}

void pf_verdict_guard_disarm(void)
{
    struct itimerval it = {0};
    setitimer(ITIMER_REAL, &it, NULL);
    sigset_t old;
    block_guarded(&old);
    guard_armed = 0;
    struct snapshot *prev = atomic_exchange(&current, NULL);
    if (prev && prev->final && !guard_write_failed) {
        guard_done_code = prev->exit_code;
        guard_done = 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!atomic_load(&guard_entered)) snapshot_free(prev);
    signal(SIGALRM, SIG_IGN);
    release_held();
    wait_for_handler();
}

void pf_verdict_guard_termination(const char *path)
{
    if (pf_strcpy(guard_term, sizeof(guard_term), path ? path : "") < 0) guard_term[0] = '\0';
}
