/* Terminals (terminal.h): a jailed shell on a PTY per (sandbox, session),
 * a reader thread per terminal, a replay ring and a list of listeners.
 *
 * Locks, in the order they may nest:
 *   t->lock    (ring, listeners, state; held while a shell starts; listener
 *               callbacks run under it and take their own locks, e.g. a
 *               WebSocket's)
 *   ts->lock   (the manager's table of terminals, the thread count; under
 *               it only a terminal's in_lock is taken, or the lock of a
 *               terminal nobody else can see yet)
 *   t->in_lock (input queue and the proc pointer; taken by writers that
 *               hold their socket's lock, so nothing is taken under it)
 *
 * Lifetime: t is reference-counted: the reader thread holds one, and so
 * does each attachment. The table links t (without a reference of its own)
 * from its creation until its shell has ended or failed to start; a lookup
 * takes its reference under the table lock, while the thread's (or the
 * creator's) keeps t alive. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/log.h"
#include "base/ring.h"
#include "base/time.h"
#include "engine/proc.h"
#include "sandbox/internal.h"
#include "sandbox/terminal.h"

#define SESSION_MAX 128

struct terminal {
        struct sandbox_mgr *m;
        char id[STORE_ID_MAX];
        char session[SESSION_MAX + 1];
        int refs;                         /* atomic */
        bool linked;                      /* in ts->list (ts->lock) */
        struct terminal *next;            /* ts->list */

        pthread_mutex_t lock;
        struct ring ring;
        struct sbx_terminal_conn *listeners;
        bool ended;                       /* exited or never started: attach elsewhere */

        pthread_mutex_t in_lock;
        struct proc *proc;                /* NULL before the start and after the end */
        bool killed;                      /* close asked before the proc existed */
        struct buf in;                    /* input for the shell: in.data[in_off..in.len) */
        size_t in_off;
        int wake_fd;                      /* eventfd: input queued */
        uint64_t touched_ms;              /* atomic: input last counted as sandbox activity */
};

struct sbx_terminal_conn {
        struct terminal *t;
        struct sbx_terminal_listener l;
        bool registered;                  /* in t->listeners (t->lock) */
        struct sbx_terminal_conn *next;
};

struct terminals {
        pthread_mutex_t lock;
        pthread_cond_t cond;              /* threads reached 0 */
        struct terminal *list;
        unsigned threads;                 /* reader threads running */
};

/* ---- the table ---- */

int terminals_new(struct terminals **ret)
{
        struct terminals *ts = calloc(1, sizeof(*ts));
        if (!ts)
                return -ENOMEM;
        pthread_mutex_init(&ts->lock, NULL);
        pthread_cond_init(&ts->cond, NULL);
        *ret = ts;
        return 0;
}

static bool key_matches(const struct terminal *t, const char *id, const char *session)
{
        return (!id || strcmp(t->id, id) == 0) && (!session || strcmp(t->session, session) == 0);
}

/* Kills the shells of the matching terminals (id NULL: every sandbox;
 * session NULL: every session). Their threads then tell the listeners
 * and end them. */
static void kill_matching(struct terminals *ts, const char *id, const char *session)
{
        pthread_mutex_lock(&ts->lock);
        for (struct terminal *t = ts->list; t; t = t->next) {
                if (!key_matches(t, id, session))
                        continue;
                pthread_mutex_lock(&t->in_lock);
                t->killed = true;
                if (t->proc)
                        proc_signal(t->proc, SIGKILL);
                pthread_mutex_unlock(&t->in_lock);
        }
        pthread_mutex_unlock(&ts->lock);
}

void terminals_kill(struct sandbox_mgr *m, const char *id)
{
        if (m->terminals)
                kill_matching(m->terminals, id, NULL);
}

void terminals_free(struct terminals *ts)
{
        if (!ts)
                return;
        kill_matching(ts, NULL, NULL);
        pthread_mutex_lock(&ts->lock);
        while (ts->threads)
                pthread_cond_wait(&ts->cond, &ts->lock);
        pthread_mutex_unlock(&ts->lock);
        pthread_cond_destroy(&ts->cond);
        pthread_mutex_destroy(&ts->lock);
        free(ts);
}

void sbx_terminal_close(struct sandbox_mgr *m, const char *id, const char *session)
{
        kill_matching(m->terminals, id, session ? session : "");
}

static void terminal_unlink(struct terminals *ts, struct terminal *t)
{
        pthread_mutex_lock(&ts->lock);
        for (struct terminal **p = &ts->list; *p; p = &(*p)->next)
                if (*p == t) {
                        *p = t->next;
                        break;
                }
        t->linked = false;
        pthread_mutex_unlock(&ts->lock);
}

/* ---- one terminal ---- */

static void terminal_unref(struct terminal *t)
{
        if (!t || __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) > 0)
                return;
        ring_free(&t->ring);
        buf_free(&t->in);
        if (t->wake_fd >= 0)
                close(t->wake_fd);
        pthread_mutex_destroy(&t->lock);
        pthread_mutex_destroy(&t->in_lock);
        free(t);
}

static struct terminal *terminal_alloc(struct sandbox_mgr *m, const char *id, const char *session)
{
        struct terminal *t = calloc(1, sizeof(*t));
        if (!t)
                return NULL;
        t->m = m;
        snprintf(t->id, sizeof(t->id), "%s", id);
        snprintf(t->session, sizeof(t->session), "%s", session);
        t->refs = 1;
        buf_init(&t->in, SBX_TERMINAL_INPUT_MAX);
        t->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        pthread_mutex_init(&t->lock, NULL);
        pthread_mutex_init(&t->in_lock, NULL);
        if (t->wake_fd < 0 || ring_init(&t->ring, SBX_TERMINAL_RING) < 0) {
                terminal_unref(t);
                return NULL;
        }
        return t;
}

/* The terminal of (id, session) with a reference taken, or a new one,
 * linked, returned with its lock held and *ret_fresh set: the caller
 * starts it. NULL on ENOMEM. */
static struct terminal *terminal_get(struct sandbox_mgr *m, const char *id, const char *session, bool *ret_fresh)
{
        struct terminals *ts = m->terminals;
        pthread_mutex_lock(&ts->lock);
        struct terminal *t = ts->list;
        while (t && !key_matches(t, id, session))
                t = t->next;
        *ret_fresh = !t;
        if (t)
                __atomic_add_fetch(&t->refs, 1, __ATOMIC_ACQ_REL);
        else if ((t = terminal_alloc(m, id, session))) {
                pthread_mutex_lock(&t->lock); /* uncontended: nobody else sees t yet */
                t->linked = true;
                t->next = ts->list;
                ts->list = t;
        }
        pthread_mutex_unlock(&ts->lock);
        return t;
}

/* ---- output: ring and listeners ---- */

/* Caller holds t->lock. */
static void fan_out(struct terminal *t, const void *data, size_t len)
{
        ring_append(&t->ring, data, len);
        for (struct sbx_terminal_conn **p = &t->listeners; *p;) {
                struct sbx_terminal_conn *c = *p;
                if (c->l.output(c->l.ctx, data, len) < 0) {
                        /* It cannot keep up: dropped, told nothing more. */
                        c->registered = false;
                        *p = c->next;
                } else {
                        p = &c->next;
                }
        }
}

/* Reads what the terminal has now. >0 bytes passed on, 0 at EOF (a
 * terminal whose last slave closed reads EIO: the same), -EAGAIN. */
static ssize_t pump(struct terminal *t)
{
        unsigned char chunk[65536];
        ssize_t n = proc_read(t->proc, 1, chunk, sizeof(chunk));
        if (n == -EAGAIN || n == -EINTR)
                return -EAGAIN;
        if (n <= 0)
                return 0;
        pthread_mutex_lock(&t->lock);
        fan_out(t, chunk, (size_t)n);
        pthread_mutex_unlock(&t->lock);
        return n;
}

/* ---- input ---- */

static bool input_pending(struct terminal *t)
{
        pthread_mutex_lock(&t->in_lock);
        bool r = t->in_off < t->in.len;
        pthread_mutex_unlock(&t->in_lock);
        return r;
}

/* Writes what the terminal takes now (the master is non-blocking). */
static void flush_input(struct terminal *t)
{
        pthread_mutex_lock(&t->in_lock);
        while (t->in_off < t->in.len) {
                ssize_t n = proc_write(t->proc, t->in.data + t->in_off, t->in.len - t->in_off);
                if (n <= 0) {
                        if (n != -EAGAIN && n != -EINTR)
                                t->in_off = t->in.len; /* the shell is going: drop it */
                        break;
                }
                t->in_off += (size_t)n;
        }
        if (t->in_off == t->in.len)
                t->in_off = t->in.len = 0;
        pthread_mutex_unlock(&t->in_lock);
}

/* Caller holds t->in_lock. Appends to the queue, whose cap counts only
 * what still waits: the part written already goes first. */
static int input_append(struct terminal *t, const void *data, size_t len)
{
        if (t->in_off) {
                memmove(t->in.data, t->in.data + t->in_off, t->in.len - t->in_off);
                t->in.len -= t->in_off;
                t->in_off = 0;
        }
        return buf_append(&t->in, data, len);
}

/* Typing in a terminal is using the sandbox: without this an idle
 * sandbox's expiry would kill a terminal in use. At most every tenth of
 * the TTL (and every minute), so keystrokes cost no store write. */
static void note_activity(struct terminal *t)
{
        uint64_t period = t->m->opt.idle_ttl_ms / 10, now = now_ms();
        if (!t->m->opt.idle_ttl_ms)
                return;
        if (period > 60000)
                period = 60000;
        uint64_t last = __atomic_load_n(&t->touched_ms, __ATOMIC_RELAXED);
        if (now - last < period ||
            !__atomic_compare_exchange_n(&t->touched_ms, &last, now, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                return;
        sandbox_touch_loaded(t->m, t->id);
}

int sbx_terminal_write(struct sbx_terminal_conn *c, const void *data, size_t len)
{
        struct terminal *t = c->t;
        pthread_mutex_lock(&t->in_lock);
        int r = t->proc ? input_append(t, data, len) : -EPIPE;
        pthread_mutex_unlock(&t->in_lock);
        uint64_t one = 1;
        if (r == 0 && write(t->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
                log_debug("msg=\"terminal wake failed\"");
        if (r == 0)
                note_activity(t);
        return r;
}

static unsigned short clamp_dim(unsigned short v)
{
        return v > SBX_TERMINAL_MAX_DIM ? SBX_TERMINAL_MAX_DIM : v;
}

int sbx_terminal_resize(struct sbx_terminal_conn *c, unsigned short rows, unsigned short cols)
{
        if (!rows || !cols)
                return -EINVAL;
        struct terminal *t = c->t;
        pthread_mutex_lock(&t->in_lock);
        int r = t->proc ? proc_resize(t->proc, clamp_dim(rows), clamp_dim(cols)) : -EPIPE;
        pthread_mutex_unlock(&t->in_lock);
        return r;
}

/* ---- the reader thread ---- */

/* Until the shell has exited: output out, input in. */
static void terminal_loop(struct terminal *t)
{
        struct proc_fds fds;
        proc_fds(t->proc, &fds);
        int master = fds.stdout_fd;
        for (;;) {
                struct pollfd p[3] = { { master, (short)(POLLIN | (input_pending(t) ? POLLOUT : 0)), 0 },
                                       { t->wake_fd, POLLIN, 0 },
                                       { fds.exit_fd, POLLIN, 0 } };
                if (poll(p, 3, -1) < 0)
                        continue;
                uint64_t v;
                if ((p[1].revents & POLLIN) && read(t->wake_fd, &v, sizeof(v)) < 0)
                        log_debug("msg=\"terminal wake read failed\"");
                if (p[0].revents & POLLOUT)
                        flush_input(t);
                if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && pump(t) == 0)
                        master = -1; /* every slave closed: wait for the exit */
                if (p[2].revents & POLLIN)
                        break;
        }
        /* What the shell printed before it went may still be on its way
         * through the terminal: read until the master says EIO (the slave
         * is closed and nothing is left), or it stays silent a while. */
        for (int quiet = 0; master >= 0 && quiet < 4;) {
                struct pollfd p = { master, POLLIN, 0 };
                if (poll(&p, 1, 50) <= 0) {
                        quiet++;
                        continue;
                }
                ssize_t n = pump(t);
                if (n == 0)
                        break;
                quiet = n > 0 ? 0 : quiet + 1;
        }
}

/* The end: no new attach finds t, the listeners hear the status, the
 * jail's resources go. */
static void terminal_end(struct terminal *t)
{
        struct sandbox_mgr *m = t->m;
        struct proc_status st = { 0 };
        proc_wait(t->proc, -1, &st);
        terminal_unlink(m->terminals, t);
        pthread_mutex_lock(&t->in_lock);
        struct proc *p = t->proc;
        t->proc = NULL;
        pthread_mutex_unlock(&t->in_lock);
        proc_free(p);
        struct sbx_terminal_exit ex = { .code = st.signal ? 128 + st.signal : st.code, .signal = st.signal };
        pthread_mutex_lock(&t->lock);
        t->ended = true;
        for (struct sbx_terminal_conn *c = t->listeners; c; c = c->next) {
                c->registered = false;
                c->l.exit(c->l.ctx, &ex);
        }
        t->listeners = NULL;
        pthread_mutex_unlock(&t->lock);
        log_debug("msg=\"terminal ended\" sandbox=%s session='%s' code=%d signal=%d", t->id, t->session, ex.code,
                  ex.signal);
}

static void *terminal_thread(void *arg)
{
        struct terminal *t = arg;
        struct terminals *ts = t->m->terminals;
        terminal_loop(t);
        terminal_end(t);
        terminal_unref(t);
        pthread_mutex_lock(&ts->lock);
        if (--ts->threads == 0)
                pthread_cond_broadcast(&ts->cond);
        pthread_mutex_unlock(&ts->lock);
        return NULL;
}

static int thread_start(struct terminal *t)
{
        struct terminals *ts = t->m->terminals;
        pthread_mutex_lock(&ts->lock);
        ts->threads++;
        pthread_mutex_unlock(&ts->lock);
        __atomic_add_fetch(&t->refs, 1, __ATOMIC_ACQ_REL);
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_t tid;
        int r = pthread_create(&tid, &attr, terminal_thread, t);
        pthread_attr_destroy(&attr);
        if (r == 0)
                return 0;
        __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL); /* the caller still holds one */
        pthread_mutex_lock(&ts->lock);
        ts->threads--;
        pthread_cond_broadcast(&ts->cond);
        pthread_mutex_unlock(&ts->lock);
        return -r;
}

/* ---- the shell ---- */

/* The jail's PATH (the base environment of engine/kproc.c); /usr in the
 * jail is the host's, bound read-only, and /bin is a link to usr/bin. */
static const char *const jail_path[] = { "/usr/local/bin", "/usr/bin", "/bin" };

static bool bare_name_ok(const char *s)
{
        size_t n = strlen(s);
        return n >= 1 && n <= 64 && strcmp(s, ".") != 0 && strcmp(s, "..") != 0 &&
               strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._+-") == n;
}

static bool has_dotdot(const char *path)
{
        for (const char *p = path; (p = strstr(p, "..")); p += 2)
                if ((p == path || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
                        return true;
        return false;
}

static bool executable_file(const struct stat *st)
{
        return S_ISREG(st->st_mode) && (st->st_mode & 0111);
}

static bool host_executable(const char *path)
{
        struct stat st;
        return stat(path, &st) == 0 && executable_file(&st);
}

/* rel in the sandbox's workspace, looked up beneath it: a symlink that
 * leaves the workspace is not followed onto the host. */
static int workspace_executable(struct sandbox_mgr *m, const char *id, const char *rel, bool *ret, struct err *err)
{
        struct sbx_workspace ws;
        int r = sbx_workspace_acquire(m, id, &ws, err);
        if (r < 0)
                return r;
        struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS };
        _cleanup_close_ int fd = (int)syscall(SYS_openat2, ws.root_fd, rel, &how, sizeof(how));
        struct stat st;
        *ret = fd >= 0 && fstat(fd, &st) == 0 && executable_file(&st);
        sbx_workspace_release(m, &ws);
        return 0;
}

static bool under(const char *path, const char *dir)
{
        size_t n = strlen(dir);
        return strncmp(path, dir, n) == 0 && path[n] == '/';
}

/* The shell's path inside the jail, into out. */
static int shell_resolve(struct sandbox_mgr *m, const char *id, const char *shell, char *out, size_t len,
                         struct err *err)
{
        if (!shell || !*shell)
                shell = "bash";
        if (shell[0] != '/') {
                if (!bare_name_ok(shell))
                        return err_set(err, ERR_INVALID, EINVAL,
                                       "Invalid shell '%s': give a command name or an absolute path", shell);
                for (size_t i = 0; i < ARRAY_SIZE(jail_path); i++)
                        if ((size_t)snprintf(out, len, "%s/%s", jail_path[i], shell) < len && host_executable(out))
                                return 0;
                return err_set(err, ERR_INVALID, ENOENT, "Shell '%s' not found in the sandbox", shell);
        }
        if (strlen(shell) >= len || has_dotdot(shell))
                return err_set(err, ERR_INVALID, EINVAL, "Invalid shell path '%s'", shell);
        snprintf(out, len, "%s", shell);
        bool ok = false;
        if (under(shell, "/workspace")) {
                int r = workspace_executable(m, id, shell + strlen("/workspace/"), &ok, err);
                if (r < 0)
                        return r;
        } else if (under(shell, "/usr") || under(shell, "/bin") || under(shell, "/sbin")) {
                ok = host_executable(shell);
        }
        if (!ok)
                return err_set(err, ERR_INVALID, ENOENT, "Shell '%s' not found in the sandbox", shell);
        return 0;
}

int sbx_terminal_shell_check(struct sandbox_mgr *m, const char *id, const char *shell, struct err *err)
{
        char path[4096];
        return shell_resolve(m, id, shell, path, sizeof(path), err);
}

/* ---- starting ---- */

/* The working directory and environment a new terminal starts with: a
 * named session's current ones (the session is made if it does not
 * exist, as a first /exec in it would), or /workspace and the sandbox's
 * env for the default terminal. *ret_env: a new reference or NULL. */
static int session_state(struct sandbox_mgr *m, const char *id, const char *session, char *cwd, size_t len,
                         json_t **ret_env, struct err *err)
{
        *ret_env = NULL;
        if (*session)
                return sbx_session_state(m, id, session, true, cwd, len, ret_env, err);
        snprintf(cwd, len, "/workspace");
        return 0;
}

/* Spawns the shell and its reader thread. Caller holds t->lock. */
static int terminal_start(struct sandbox_mgr *m, struct terminal *t, const struct sbx_terminal_spec *spec,
                          struct err *err)
{
        char shell[4096], cwd[4096];
        json_t *session_env = NULL, *env = json_object();
        int r = env ? shell_resolve(m, t->id, spec->shell, shell, sizeof(shell), err)
                    : err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        if (r == 0)
                r = session_state(m, t->id, t->session, cwd, sizeof(cwd), &session_env, err);
        /* A copy: the session's object is not ours to change. */
        if (r == 0 && session_env)
                json_object_update(env, session_env);
        json_decref(session_env);
        if (r < 0) {
                json_decref(env);
                return r;
        }
        json_object_set_new(env, "TERM", json_string("xterm-256color"));
        const char *argv[] = { shell, NULL };
        struct sbx_command cmd = { .argv = argv, .env = env, .cwd = cwd, .pty = true,
                                   .rows = clamp_dim(spec->rows), .cols = clamp_dim(spec->cols) };
        struct proc *p = NULL;
        r = sbx_spawn(m, t->id, &cmd, &p, err);
        json_decref(env);
        if (r < 0)
                return r;
        pthread_mutex_lock(&t->in_lock);
        t->proc = p;
        if (t->killed) /* closed while it was starting */
                proc_signal(p, SIGKILL);
        pthread_mutex_unlock(&t->in_lock);
        r = thread_start(t);
        if (r < 0) {
                pthread_mutex_lock(&t->in_lock);
                t->proc = NULL;
                pthread_mutex_unlock(&t->in_lock);
                proc_free(p);
                return err_set(err, ERR_INTERNAL, -r, "Cannot start the terminal: %s", strerror(-r));
        }
        log_debug("msg=\"terminal started\" sandbox=%s session='%s' shell='%s'", t->id, t->session, shell);
        return 0;
}

/* ---- attaching ---- */

/* Caller holds t->lock: the replay and the registration are one step. */
static int attach_locked(struct terminal *t, struct sbx_terminal_conn *c)
{
        _cleanup_free_ unsigned char *replay = NULL;
        if (t->ring.len) {
                if (!(replay = malloc(t->ring.len)))
                        return -ENOMEM;
                ring_copy(&t->ring, replay);
        }
        c->l.attached(c->l.ctx, replay, t->ring.len);
        c->t = t;
        c->registered = true;
        c->next = t->listeners;
        t->listeners = c;
        return 0;
}

int sbx_terminal_attach(struct sandbox_mgr *m, const char *id, const struct sbx_terminal_spec *spec,
                        const struct sbx_terminal_listener *l, struct sbx_terminal_conn **ret, struct err *err)
{
        *ret = NULL;
        const char *session = spec->session ? spec->session : "";
        if (strlen(id) >= STORE_ID_MAX || strlen(session) > SESSION_MAX)
                return err_set(err, ERR_INVALID, EINVAL, "Invalid sandbox or session id");
        _cleanup_free_ struct sbx_terminal_conn *c = calloc(1, sizeof(*c));
        if (!c)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        c->l = *l;
        /* A terminal found may end before it is locked: look again (the
         * next one is a new shell). Bounded, for shells that die at once. */
        for (int tries = 0; tries < 3; tries++) {
                bool fresh;
                struct terminal *t = terminal_get(m, id, session, &fresh);
                if (!t)
                        return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
                int r = 0;
                if (fresh) {
                        r = terminal_start(m, t, spec, err);
                        if (r < 0) {
                                t->ended = true;
                                terminal_unlink(m->terminals, t);
                        }
                } else {
                        pthread_mutex_lock(&t->lock);
                }
                bool ended = t->ended;
                if (r == 0 && !ended && (r = attach_locked(t, c)) < 0)
                        err_set(err, ERR_INTERNAL, -r, "out of memory");
                pthread_mutex_unlock(&t->lock);
                if (r == 0 && !ended) {
                        *ret = TAKE_PTR(c);
                        return 0;
                }
                terminal_unref(t);
                if (r < 0)
                        return r;
        }
        return err_set(err, ERR_UNAVAILABLE, EAGAIN, "The terminal kept ending while attaching; try again");
}

void sbx_terminal_detach(struct sbx_terminal_conn *c)
{
        if (!c)
                return;
        struct terminal *t = c->t;
        pthread_mutex_lock(&t->lock);
        for (struct sbx_terminal_conn **p = &t->listeners; c->registered && *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        break;
                }
        pthread_mutex_unlock(&t->lock);
        free(c);
        terminal_unref(t);
}
