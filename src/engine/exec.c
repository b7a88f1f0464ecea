#include "engine/exec.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>


#include "base/log.h"
#include "jail/seccomp.h"
#include "shim/forkserver.h"

/* How often CPU usage is sampled while a request runs. */
#define CPU_TICK_MS 20
/* After the kernel is gone, how long to wait for pipes to reach EOF. */
#define DRAIN_MS 1000

struct kproc {
        struct engine *engine;
        const struct runtime *rt;
        struct jail_proc jp;
        int out_fd, err_fd, ctl_fd; /* daemon ends, non-blocking */
        int replay_fd;              /* daemon end of the replay socket, or -1 */
        bool once;
        bool alive;
        bool counters_fresh;        /* cgroup counters already reset after boot */
        uint64_t pool_bytes;        /* memory counted against pool.memory_budget */
        bool forked;                /* forked from a template: its random state is the template's */
        struct buf ctl_in;          /* partial control-channel input */
        struct kproc *prev, *next;  /* engine's live list */
        struct kproc *dead_next;    /* engine's reap queue */
};

#define POOL_MAX 64
/* A cold refill waits for the request that drained the pool to finish, at
 * most this long (back-to-back requests never leave the daemon idle). A
 * refill forked from a template is cheap and does not wait. */
#define REFILL_GRACE_MS 25

/* Warm interpreters of one language: already jailed, booted and waiting
 * for their single request. */
struct pool {
        const struct runtime *rt;
        struct kproc *ready[POOL_MAX];
        size_t n;
        uint64_t target;       /* pool.<lang> */
        uint64_t member_bytes; /* memory of the last member started (its cgroup's peak) */
        uint64_t hits, misses;
};

/* A fork-server template of one language (see python_kernel.py "zygote"). */
struct zygote {
        const struct runtime *rt;
        struct kproc *kp;
        pthread_mutex_t lock;
        uint64_t forks, failures, retry_at_ns;
};

struct engine {
        struct config cfg;
        struct zygote zygotes[8];
        size_t nzygotes;
        struct jail_ctx jail;
        pthread_mutex_t lock;
        uint64_t seq;
        struct kproc *live;
        size_t nlive;

        /* Pools and the background thread that fills them. */
        struct pool pools[8];
        size_t npools;
        pthread_t filler;
        pthread_cond_t fill_cond;
        bool filler_started, stopping;
        size_t inflight;      /* stateless executions being served right now */
        uint64_t refill_at_ns; /* refill even with executions in flight from then */
        uint64_t next_spawn_ns; /* pool.refill_per_s: earliest next pool start */
        uint64_t pool_bytes;    /* memory held by warm members (pool.memory_budget) */

        /* Used kernels waiting to be killed and reaped off the request path. */
        struct kproc *dead;
        pthread_t reaper;
        pthread_cond_t reap_cond;
        bool reaper_started;
};

static void *reaper_main(void *arg);
static void *filler_main(void *arg);
static void engine_bury(struct engine *e, struct kproc *k);
static struct kproc *pool_take(struct engine *e, const struct runtime *rt);
static struct kproc *zygote_fork(struct engine *e, const struct runtime *rt, const struct exec_limits *lim);
static void zygotes_start(struct engine *e);
static void engine_inflight(struct engine *e, int delta);
static struct zygote *zygote_for(struct engine *e, const struct runtime *rt);

int engine_new(const struct config *cfg, struct engine **ret, const char **ret_err)
{
        struct engine *e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->cfg = *cfg;
        pthread_mutex_init(&e->lock, NULL);
        char run_dir[4200];
        snprintf(run_dir, sizeof(run_dir), "%s/run", cfg->data_dir);
        int force = -1;
        if (strcmp(cfg->cgroup, "v1") == 0)
                force = CGROUP_V1;
        else if (strcmp(cfg->cgroup, "v2") == 0)
                force = CGROUP_V2;
        else if (strcmp(cfg->cgroup, "none") == 0)
                force = CGROUP_NONE;
        int r = jail_ctx_init(&e->jail, run_dir, cfg->kernels_dir, force, ret_err);
        if (r < 0) {
                jail_ctx_done(&e->jail);
                pthread_mutex_destroy(&e->lock);
                free(e);
                return r;
        }
        bool templates = cfg->zygote && !e->jail.userns;
        if (templates && (r = jail_ctx_set_forkserver_dir(&e->jail, cfg->forkserver_dir)) < 0) {
                log_warn("msg=\"no fork-server templates: %s/%s not usable\" err=\"%s\"", cfg->forkserver_dir,
                         JAIL_FORKSERVER_LIB, strerror(-r));
                templates = false;
        }
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* filler_main's timed waits */
        pthread_cond_init(&e->fill_cond, &ca);
        pthread_condattr_destroy(&ca);
        pthread_cond_init(&e->reap_cond, NULL);
        bool wants_pool = false;
        e->reaper_started = pthread_create(&e->reaper, NULL, reaper_main, e) == 0;
        for (size_t i = 0; i < runtime_count() && i < ARRAY_SIZE(e->pools); i++) {
                const struct runtime *rt = runtime_at(i);
                if (!rt->version[0])
                        continue;
                /* A template serves its language better than a pool; it
                 * needs a second mapped uid, i.e. a privileged daemon. */
                if (rt->zygote && templates) {
                        struct zygote *z = &e->zygotes[e->nzygotes++];
                        z->rt = rt;
                        pthread_mutex_init(&z->lock, NULL);
                }
                struct pool *p = &e->pools[e->npools++];
                p->rt = rt;
                p->target = config_pool_size(cfg, rt->id);
                wants_pool |= p->target > 0;
        }
        if (wants_pool || e->nzygotes > 0)
                e->filler_started = pthread_create(&e->filler, NULL, filler_main, e) == 0;
        *ret = e;
        return 0;
}

void engine_free(struct engine *e)
{
        if (!e)
                return;
        pthread_mutex_lock(&e->lock);
        e->stopping = true;
        pthread_cond_broadcast(&e->fill_cond);
        pthread_cond_broadcast(&e->reap_cond);
        pthread_mutex_unlock(&e->lock);
        if (e->filler_started)
                pthread_join(e->filler, NULL);
        for (size_t i = 0; i < e->nzygotes; i++) {
                engine_bury(e, e->zygotes[i].kp);
                e->zygotes[i].kp = NULL;
        }
        for (size_t i = 0; i < e->npools; i++)
                while (e->pools[i].n > 0)
                        engine_bury(e, e->pools[i].ready[--e->pools[i].n]);
        if (e->reaper_started)
                pthread_join(e->reaper, NULL);
        /* Whatever was buried after the reaper left. */
        while (e->dead) {
                struct kproc *k = e->dead;
                e->dead = k->dead_next;
                kproc_free(k);
        }
        engine_kill_all(e);
        jail_ctx_done(&e->jail);
        pthread_mutex_destroy(&e->lock);
        free(e);
}

const struct config *engine_config(const struct engine *e)
{
        return &e->cfg;
}

enum cgroup_backend engine_cgroup_backend(const struct engine *e)
{
        return cgroup_root_backend(e->jail.cgroot);
}

json_t *engine_pool_stats(struct engine *e)
{
        json_t *o = json_object();
        pthread_mutex_lock(&e->lock);
        for (size_t i = 0; i < e->npools; i++) {
                struct pool *p = &e->pools[i];
                json_object_set_new(o, p->rt->id,
                                    json_pack("{s:I, s:I, s:I, s:I, s:I}", "ready", (json_int_t)p->n, "target",
                                              (json_int_t)p->target, "hits", (json_int_t)p->hits, "misses",
                                              (json_int_t)p->misses, "memberBytes", (json_int_t)p->member_bytes));
        }
        pthread_mutex_unlock(&e->lock);
        for (size_t i = 0; i < e->nzygotes; i++) {
                struct zygote *z = &e->zygotes[i];
                pthread_mutex_lock(&z->lock);
                json_t *entry = json_object_get(o, z->rt->id);
                if (!entry)
                        json_object_set_new(o, z->rt->id, entry = json_object());
                json_object_set_new(entry, "template",
                                    json_pack("{s:b, s:I, s:I}", "alive", kproc_alive(z->kp), "forks",
                                              (json_int_t)z->forks, "failures", (json_int_t)z->failures));
                pthread_mutex_unlock(&z->lock);
        }
        return o;
}

void engine_kill_all(struct engine *e)
{
        pthread_mutex_lock(&e->lock);
        for (struct kproc *k = e->live; k; k = k->next)
                jail_kill(&k->jp);
        pthread_mutex_unlock(&e->lock);
}

size_t engine_live_count(struct engine *e)
{
        pthread_mutex_lock(&e->lock);
        size_t n = e->nlive;
        pthread_mutex_unlock(&e->lock);
        return n;
}

static void engine_track(struct engine *e, struct kproc *k)
{
        pthread_mutex_lock(&e->lock);
        k->next = e->live;
        if (e->live)
                e->live->prev = k;
        e->live = k;
        e->nlive++;
        pthread_mutex_unlock(&e->lock);
}

static void engine_untrack(struct engine *e, struct kproc *k)
{
        pthread_mutex_lock(&e->lock);
        if (k->prev)
                k->prev->next = k->next;
        else if (e->live == k)
                e->live = k->next;
        if (k->next)
                k->next->prev = k->prev;
        k->prev = k->next = NULL;
        e->nlive--;
        pthread_mutex_unlock(&e->lock);
}

void exec_limits_from_config(const struct config *cfg, struct exec_limits *ret)
{
        *ret = (struct exec_limits){
                .cpu_ms = cfg->cpu_ms,
                .wall_ms = cfg->wall_ms,
                .memory_bytes = cfg->memory_bytes,
                .pids = cfg->pids,
                .output_bytes = cfg->output_bytes,
                .output_entries = cfg->output_entries,
                .result_bytes = cfg->result_bytes,
        };
}

void exec_outcome_done(struct exec_outcome *o)
{
        json_decref(o->response);
        buf_free(&o->out);
        buf_free(&o->err);
        *o = (struct exec_outcome){ 0 };
}

size_t exec_base_env(const struct runtime *rt, const char **out, size_t max)
{
        static const char *const base[] = {
                "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8",
                "LC_ALL=C.UTF-8", "TMPDIR=/tmp", "USER=sandbox",
        };
        size_t n = 0;
        for (size_t i = 0; i < ARRAY_SIZE(base) && n + 1 < max; i++)
                out[n++] = base[i];
        for (size_t i = 0; i < ARRAY_SIZE(rt->extra_env) && rt->extra_env[i] && n + 1 < max; i++)
                out[n++] = rt->extra_env[i];
        out[n] = NULL;
        return n;
}

static int set_nonblock(int fd)
{
        int fl = fcntl(fd, F_GETFL);
        return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

static void close_pair(int p[2])
{
        for (int i = 0; i < 2; i++)
                if (p[i] >= 0)
                        close(p[i]);
}

static struct jail_limits jail_limits_for(const struct engine *e, const struct exec_limits *lim)
{
        const struct config *cfg = &e->cfg;
        return (struct jail_limits){
                /* Without a cgroup (rootless, no delegation) the per-process
                 * data limit is the only memory bound left. */
                .data_bytes = cgroup_root_backend(e->jail.cgroot) == CGROUP_NONE ? lim->memory_bytes : 0,
                .memory_bytes = lim->memory_bytes,
                .pids = lim->pids,
                /* Backstop only: the daemon samples cgroup CPU and kills first. */
                .cpu_seconds = lim->cpu_ms / 1000 + 2,
                .file_bytes = cfg->file_bytes,
                .nofile = cfg->nofile,
                .tmp_bytes = cfg->tmp_bytes,
                .tmp_inodes = cfg->tmp_inodes,
                .workspace_bytes = cfg->workspace_bytes,
                .workspace_inodes = cfg->workspace_inodes,
        };
}

static void next_cgroup_name(struct engine *e, char *buf, size_t len)
{
        pthread_mutex_lock(&e->lock);
        snprintf(buf, len, "x%llu", (unsigned long long)++e->seq);
        pthread_mutex_unlock(&e->lock);
}

int kproc_spawn(struct engine *e, const struct runtime *rt, const char *mode,
                const char *workspace_dir, bool replay_overlay, const struct exec_limits *lim,
                struct kproc **ret, const char **ret_err)
{
        int out[2] = { -1, -1 }, err[2] = { -1, -1 }, ctl[2] = { -1, -1 }, rep[2] = { -1, -1 }, r;
        char scratch[512], cgname[64];
        struct jail_spec spec = { .workspace_dir = workspace_dir, .replay_fd = -1 };
        const struct config *cfg = &e->cfg;

        *ret_err = "argv";
        unsigned heap_mb = (unsigned)(lim->memory_bytes / MiB * 3 / 4);
        r = runtime_build_argv(rt, mode, heap_mb ? heap_mb : 64, spec.argv, JAIL_MAX_ARGS, scratch,
                               sizeof(scratch));
        if (r < 0)
                return r;
        size_t nenv = exec_base_env(rt, spec.envp, JAIL_MAX_ENV);
        if (strcmp(mode, "zygote") == 0 && nenv + 4 < JAIL_MAX_ENV) {
                spec.envp[nenv++] = "LD_PRELOAD=" JAIL_KERNELS_DIR "/" JAIL_FORKSERVER_LIB;
                spec.envp[nenv++] = "SANDBOXD_FORKSERVER=1";
                /* Resolve every symbol in the template, once: lazy binding
                 * would redo it (and copy the GOT pages) in every fork. */
                spec.envp[nenv++] = "LD_BIND_NOW=1";
                /* Executors live for one request: returning freed heap to
                 * the kernel only makes the next allocation fault again. */
                spec.envp[nenv++] = "GLIBC_TUNABLES=glibc.malloc.trim_threshold=268435456";
                spec.envp[nenv] = NULL;
        }

        next_cgroup_name(e, cgname, sizeof(cgname));
        spec.cgroup_name = cgname;
        spec.limits = jail_limits_for(e, lim);
        spec.template = strcmp(mode, "zygote") == 0;
        if (spec.template) {
                /* A template lives long and keeps one small pid 1 per
                 * execution it forked that is still running or waiting in
                 * the pool (the executors themselves move to their own
                 * cgroups): no CPU rlimit, room for those. */
                spec.limits.cpu_seconds = 0;
                spec.limits.pids = lim->pids + 4 * cfg->exec_workers + config_pool_size(cfg, rt->id) + 16;
        }

        *ret_err = "pipes";
        if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
            socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) < 0) {
                r = -errno;
                goto fail;
        }
        spec.stdout_fd = out[1];
        spec.stderr_fd = err[1];
        spec.ctl_fd = ctl[1];
        if (replay_overlay && workspace_dir) {
                if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, rep) < 0) {
                        r = -errno;
                        goto fail;
                }
                spec.replay_fd = rep[1];
        }

        struct kproc *k = calloc(1, sizeof(*k));
        if (!k) {
                r = -ENOMEM;
                goto fail;
        }
        r = jail_spawn(&e->jail, &spec, &k->jp, ret_err);
        if (r < 0) {
                free(k);
                goto fail;
        }
        close(out[1]);
        close(err[1]);
        close(ctl[1]);
        if (rep[1] >= 0)
                close(rep[1]);
        struct jail_proc jp = k->jp;
        *k = (struct kproc){
                .engine = e, .rt = rt, .jp = jp, .out_fd = out[0], .err_fd = err[0],
                .ctl_fd = ctl[0], .replay_fd = rep[0], .once = strcmp(mode, "once") == 0, .alive = true,
        };
        buf_init(&k->ctl_in, lim->result_bytes * 8 + 1 * MiB);
        set_nonblock(k->out_fd);
        set_nonblock(k->err_fd);
        set_nonblock(k->ctl_fd);
        engine_track(e, k);
        *ret = k;
        return 0;
fail:
        close_pair(out);
        close_pair(err);
        close_pair(ctl);
        close_pair(rep);
        return r;
}

int kproc_end_replay(struct kproc *kp)
{
        if (kp->replay_fd < 0)
                return 0;
        char c = 'g';
        int r = write_all(kp->replay_fd, &c, 1);
        if (r == 0) {
                struct pollfd p = { kp->replay_fd, POLLIN, 0 };
                int n = poll(&p, 1, 5000);
                r = n == 1 && read(kp->replay_fd, &c, 1) == 1 && c == 'g' ? 0 : -EIO;
        }
        close(kp->replay_fd);
        kp->replay_fd = -1;
        return r;
}

void kproc_kill(struct kproc *kp)
{
        /* Only the signal: the cgroup belongs to the thread running the
         * kernel, which reaps and frees it. */
        if (kp && kp->alive && kp->jp.pidfd >= 0)
                syscall(SYS_pidfd_send_signal, kp->jp.pidfd, SIGKILL, NULL, 0);
}

bool kproc_alive(const struct kproc *kp)
{
        return kp && kp->alive;
}

static void kproc_reap(struct kproc *kp, int *ret_status)
{
        if (!kp->alive)
                return;
        jail_kill(&kp->jp);
        jail_reap(&kp->jp, ret_status);
        kp->alive = false;
}

void kproc_free(struct kproc *kp)
{
        if (!kp)
                return;
        kproc_reap(kp, NULL);
        engine_untrack(kp->engine, kp);
        jail_proc_release(&kp->jp);
        close(kp->out_fd);
        close(kp->err_fd);
        close(kp->ctl_fd);
        if (kp->replay_fd >= 0)
                close(kp->replay_fd);
        buf_free(&kp->ctl_in);
        free(kp);
}

json_t *exec_build_request(const char *code, json_t *env, const char *cwd, bool typescript,
                           uint64_t result_limit, bool replay)
{
        json_t *req = json_object();
        json_object_set_new(req, "code", json_string(code));
        json_object_set_new(req, "env", env ? json_incref(env) : json_object());
        json_object_set_new(req, "cwd", json_string(cwd ? cwd : JAIL_WORKSPACE));
        json_object_set_new(req, "resultLimit", json_integer((json_int_t)result_limit));
        json_object_set_new(req, "typescript", json_boolean(typescript));
        json_object_set_new(req, "replay", json_boolean(replay));
        return req;
}

/* State of one kproc_run() loop. */
struct run_state {
        struct kproc *kp;
        const struct exec_limits *lim;
        struct exec_outcome *o;
        char *pending;        /* request bytes not yet written */
        size_t pending_len, pending_off;
        uint64_t start_ns, deadline_ns, cpu_base;
        uint64_t newlines;
        uint64_t bytes;       /* stdout+stderr bytes seen, kept or not */
        bool out_eof, err_eof;
};

static bool output_over_limit(struct run_state *s)
{
        return s->bytes > s->lim->output_bytes || s->newlines > s->lim->output_entries;
}

static void hit_limit(struct run_state *s, enum exec_limit l)
{
        if (s->o->limit == EXEC_LIMIT_NONE)
                s->o->limit = l;
        jail_kill(&s->kp->jp);
}

/* Reads what a guest pipe has; returns false at EOF. Bytes past the output
 * limit are dropped (the run is being killed anyway). */
static bool read_guest_pipe(struct run_state *s, int fd, struct buf *b)
{
        char tmp[16384];
        for (;;) {
                ssize_t n = read(fd, tmp, sizeof(tmp));
                if (n < 0)
                        return errno == EAGAIN || errno == EINTR;
                if (n == 0)
                        return false;
                for (ssize_t i = 0; i < n; i++)
                        s->newlines += tmp[i] == '\n';
                s->bytes += (uint64_t)n;
                /* Keep at most output_bytes in all: what the caller gets back
                 * after an output limit is exactly the allowance. */
                size_t kept = s->o->out.len + s->o->err.len;
                size_t left = s->lim->output_bytes > kept ? s->lim->output_bytes - kept : 0;
                size_t room = b->max > b->len ? b->max - b->len : 0;
                if (room > left)
                        room = left;
                buf_append(b, tmp, (size_t)n < room ? (size_t)n : room);
                if (output_over_limit(s))
                        hit_limit(s, EXEC_LIMIT_OUTPUT);
        }
}

/* Parses one control line. Guest data inside it may hold NUL (escaped as
 * \u0000) or, from kernels that pass bytes through (Perl), invalid UTF-8:
 * both must come back as a result, not be taken for a broken kernel, so
 * NUL is allowed and invalid sequences become U+FFFD before parsing (they
 * can only sit inside strings: the JSON structure itself is ASCII). */
static json_t *parse_kernel_line(const char *line, size_t len)
{
        if (utf8_valid(line, len))
                return json_loadb(line, len, JSON_ALLOW_NUL, NULL);
        char *clean = malloc(len * 3 + 1);
        if (!clean)
                return NULL;
        size_t n = utf8_sanitize(line, len, clean);
        json_t *msg = json_loadb(clean, n, JSON_ALLOW_NUL, NULL);
        free(clean);
        return msg;
}

/* Parses complete control lines; sets o->response on the first answer. */
static int parse_ctl_lines(struct run_state *s)
{
        struct buf *in = &s->kp->ctl_in;
        char *nl;
        while (!s->o->response && in->len && (nl = memchr(in->data, '\n', in->len))) {
                size_t linelen = (size_t)(nl - in->data);
                json_t *msg = parse_kernel_line(in->data, linelen);
                memmove(in->data, nl + 1, in->len - linelen - 1);
                in->len -= linelen + 1;
                if (!msg || !json_is_object(msg)) {
                        json_decref(msg);
                        return -EPROTO;
                }
                if (json_object_get(msg, "ready")) {
                        json_decref(msg);
                        continue;
                }
                s->o->response = msg;
        }
        return 0;
}

static int read_ctl(struct run_state *s)
{
        char tmp[16384];
        for (;;) {
                ssize_t n = read(s->kp->ctl_fd, tmp, sizeof(tmp));
                if (n < 0)
                        return errno == EAGAIN || errno == EINTR ? 0 : -errno;
                if (n == 0)
                        return -EPIPE;
                if (buf_append(&s->kp->ctl_in, tmp, (size_t)n) < 0)
                        return -EMSGSIZE;
                int r = parse_ctl_lines(s);
                if (r < 0 || s->o->response)
                        return r;
        }
}

static void write_pending(struct run_state *s)
{
        while (s->pending_off < s->pending_len) {
                ssize_t n = write(s->kp->ctl_fd, s->pending + s->pending_off, s->pending_len - s->pending_off);
                if (n < 0) {
                        if (errno != EAGAIN && errno != EINTR)
                                s->pending_off = s->pending_len; /* kernel gone; exit path reports it */
                        return;
                }
                s->pending_off += (size_t)n;
        }
}

static void check_cpu_and_wall(struct run_state *s)
{
        struct cgroup_usage u = { 0 };
        uint64_t now = now_ns();
        if (now >= s->deadline_ns) {
                hit_limit(s, EXEC_LIMIT_WALL);
                return;
        }
        if (s->kp->jp.cg && cgroup_read_usage(s->kp->jp.cg, &u) == 0 &&
            u.cpu_ns - s->cpu_base > s->lim->cpu_ms * 1000000ULL)
                hit_limit(s, EXEC_LIMIT_CPU);
}

/* After the kernel exited, its pipes reach EOF as soon as the pid namespace
 * is torn down; wait briefly for that so no output is lost. */
static void drain_after_exit(struct run_state *s)
{
        uint64_t until = now_ns() + DRAIN_MS * 1000000ULL;
        while ((!s->out_eof || !s->err_eof) && now_ns() < until) {
                struct pollfd p[2] = { { s->kp->out_fd, POLLIN, 0 }, { s->kp->err_fd, POLLIN, 0 } };
                if (s->out_eof)
                        p[0].fd = -1;
                if (s->err_eof)
                        p[1].fd = -1;
                if (poll(p, 2, 50) < 0 && errno != EINTR)
                        break;
                if (!s->out_eof && p[0].revents)
                        s->out_eof = !read_guest_pipe(s, s->kp->out_fd, &s->o->out);
                if (!s->err_eof && p[1].revents)
                        s->err_eof = !read_guest_pipe(s, s->kp->err_fd, &s->o->err);
        }
}

static int run_loop(struct run_state *s)
{
        struct kproc *kp = s->kp;
        uint64_t next_tick = now_ns() + CPU_TICK_MS * 1000000ULL;
        for (;;) {
                bool answered = s->o->response != NULL;
                /* Output written before the answer is already in the pipes;
                 * a once-mode kernel's exit is left to the reaper thread. */
                if (answered)
                        return 0;
                struct pollfd p[4] = {
                        { s->out_eof ? -1 : kp->out_fd, POLLIN, 0 },
                        { s->err_eof ? -1 : kp->err_fd, POLLIN, 0 },
                        { answered ? -1 : kp->ctl_fd, POLLIN | (s->pending_off < s->pending_len ? POLLOUT : 0), 0 },
                        { kp->jp.pidfd, POLLIN, 0 },
                };
                uint64_t now = now_ns();
                int timeout = next_tick > now ? (int)((next_tick - now) / 1000000ULL) + 1 : 0;
                int n = poll(p, 4, timeout);
                if (n < 0 && errno != EINTR)
                        return -errno;
                if (now_ns() >= next_tick) {
                        check_cpu_and_wall(s);
                        next_tick = now_ns() + CPU_TICK_MS * 1000000ULL;
                }
                if (n <= 0)
                        continue;
                if (p[0].revents)
                        s->out_eof = !read_guest_pipe(s, kp->out_fd, &s->o->out);
                if (p[1].revents)
                        s->err_eof = !read_guest_pipe(s, kp->err_fd, &s->o->err);
                if (p[2].revents & POLLOUT)
                        write_pending(s);
                if (p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
                        int r = read_ctl(s);
                        if (r == -EPROTO || r == -EMSGSIZE)
                                hit_limit(s, EXEC_LIMIT_NONE); /* kernel misbehaved */
                }
                if (p[3].revents) {
                        s->o->died = true;
                        return 0;
                }
        }
}

/* V8 stops at --max-old-space-size (set below the cgroup limit so that it
 * fails cleanly) with SIGABRT and this message: that is the memory limit. */
static bool v8_heap_exhausted(const struct exec_outcome *o)
{
        static const char marker[] = "JavaScript heap out of memory";
        return o->err.len && memmem(o->err.data, o->err.len, marker, sizeof(marker) - 1);
}

static void finish_usage(struct run_state *s)
{
        struct cgroup_usage u = { 0 };
        if (s->kp->jp.cg && cgroup_read_usage(s->kp->jp.cg, &u) == 0) {
                s->o->cpu_ns = u.cpu_ns - s->cpu_base;
                s->o->memory_peak = u.memory_peak;
                if (u.oom_kills > 0 && s->o->limit == EXEC_LIMIT_NONE && (s->o->died || !s->o->response))
                        s->o->limit = EXEC_LIMIT_MEMORY;
                if (u.pids_max_hits > 0 && s->o->limit == EXEC_LIMIT_NONE)
                        s->o->limit = EXEC_LIMIT_PIDS;
        }
        if (s->o->limit == EXEC_LIMIT_NONE && !s->o->response && v8_heap_exhausted(s->o))
                s->o->limit = EXEC_LIMIT_MEMORY;
}

int kproc_run(struct kproc *kp, json_t *request, const struct exec_limits *lim,
              struct exec_outcome *ret)
{
        struct exec_outcome *o = ret;
        *o = (struct exec_outcome){ 0 };
        buf_init(&o->out, lim->output_bytes);
        buf_init(&o->err, lim->output_bytes);
        if (!kp->alive)
                return -ESRCH;

        char *line = json_dumps(request, JSON_COMPACT);
        if (!line)
                return -ENOMEM;
        size_t len = strlen(line);
        char *pending = malloc(len + 2);
        if (!pending) {
                free(line);
                return -ENOMEM;
        }
        memcpy(pending, line, len);
        pending[len] = '\n';
        free(line);

        struct cgroup_usage u0 = { 0 };
        if (kp->jp.cg && !kp->counters_fresh) {
                /* A resident kernel's group counts from its last request:
                 * restart the counters. Warm pool members were reset off
                 * the request path, after boot, and have used nothing since
                 * (they wait for this request), so their baseline is 0. */
                cgroup_reset(kp->jp.cg);
                cgroup_read_usage(kp->jp.cg, &u0);
        }
        kp->counters_fresh = false;
        struct run_state s = {
                .kp = kp, .lim = lim, .o = o, .pending = pending, .pending_len = len + 1,
                .start_ns = now_ns(), .cpu_base = u0.cpu_ns,
        };
        s.deadline_ns = s.start_ns + lim->wall_ms * 1000000ULL;
        write_pending(&s);
        int r = run_loop(&s);
        free(pending);
        o->duration_ns = now_ns() - s.start_ns;
        if (o->died || o->limit != EXEC_LIMIT_NONE || r < 0) {
                jail_kill(&kp->jp);
                drain_after_exit(&s);
                finish_usage(&s);
                kproc_reap(kp, &o->exit_status);
                o->died = true;
        } else {
                /* Output written before the answer is already in the pipes. */
                read_guest_pipe(&s, kp->out_fd, &o->out);
                read_guest_pipe(&s, kp->err_fd, &o->err);
                finish_usage(&s);
        }
        return r;
}

static json_t *split_lines(const struct buf *b)
{
        json_t *arr = json_array();
        size_t start = 0;
        char *tmp = malloc(b->len * 3 + 1);
        if (!tmp)
                return arr;
        for (size_t i = 0; i <= b->len; i++) {
                bool end = i == b->len;
                if (!end && b->data[i] != '\n')
                        continue;
                if (end && i == start)
                        break; /* trailing empty piece */
                size_t n = utf8_sanitize(b->data + start, i - start, tmp);
                json_array_append_new(arr, json_stringn(tmp, n));
                start = i + 1;
        }
        free(tmp);
        return arr;
}

static json_t *limit_error(enum exec_limit l, const struct exec_limits *lim)
{
        char msg[256];
        switch (l) {
        case EXEC_LIMIT_CPU:
                snprintf(msg, sizeof(msg), "Execution fuel exhausted: CPU time limit of %llu ms exceeded",
                         (unsigned long long)lim->cpu_ms);
                break;
        case EXEC_LIMIT_WALL:
                snprintf(msg, sizeof(msg), "Wall-clock time limit of %llu ms exceeded",
                         (unsigned long long)lim->wall_ms);
                break;
        case EXEC_LIMIT_MEMORY:
                snprintf(msg, sizeof(msg), "Memory limit of %llu MiB exceeded",
                         (unsigned long long)(lim->memory_bytes / MiB));
                break;
        case EXEC_LIMIT_OUTPUT:
                snprintf(msg, sizeof(msg), "Output limit exceeded (%llu bytes or %llu lines of stdout+stderr)",
                         (unsigned long long)lim->output_bytes, (unsigned long long)lim->output_entries);
                break;
        case EXEC_LIMIT_PIDS:
                snprintf(msg, sizeof(msg), "Process limit of %llu processes/threads exceeded",
                         (unsigned long long)lim->pids);
                break;
        case EXEC_LIMIT_NONE:
        case _EXEC_LIMIT_MAX:
        default:
                snprintf(msg, sizeof(msg), "Execution limit exceeded");
                break;
        }
        return json_pack("{s:s, s:s, s:[]}", "name", "ExecutionLimitError", "message", msg, "traceback");
}

static json_t *died_error(int status)
{
        char msg[128];
        if (WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) > 128))
                snprintf(msg, sizeof(msg), "The interpreter was killed by signal %d",
                         WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status) - 128);
        else
                snprintf(msg, sizeof(msg), "The interpreter exited with status %d before answering",
                         WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return json_pack("{s:s, s:s, s:[]}", "name", "EngineError", "message", msg, "traceback");
}

/* The error to report: a limit wins over whatever the guest saw, because a
 * pids limit typically surfaces in the guest as a confusing EAGAIN error. */
static json_t *outcome_error(const struct exec_outcome *o, const struct exec_limits *lim)
{
        json_t *guest = o->response ? json_object_get(o->response, "error") : NULL;
        bool guest_failed = guest && !json_is_null(guest);
        if (o->limit == EXEC_LIMIT_PIDS && !guest_failed && !o->died)
                return NULL;
        if (o->limit != EXEC_LIMIT_NONE)
                return limit_error(o->limit, lim);
        if (guest_failed)
                return json_incref(guest);
        if (!o->response) {
                /* Exiting on purpose with status 0 (sys.exit(0), process.exit())
                 * is a run without a result, not an engine failure. */
                if (WIFEXITED(o->exit_status) && WEXITSTATUS(o->exit_status) == 0)
                        return NULL;
                return died_error(o->exit_status);
        }
        return NULL;
}

json_t *exec_result_json(const struct runtime *rt, const char *code, const struct exec_outcome *o,
                         const struct exec_limits *lim)
{
        json_t *error = outcome_error(o, lim);
        json_t *results = NULL;
        if (!error && o->response)
                results = json_incref(json_object_get(o->response, "results"));
        if (!json_is_array(results)) {
                json_decref(results);
                results = json_array();
        }
        json_t *res = json_pack("{s:s, s:s, s:s, s:f, s:{s:o, s:o}, s:o}", "code", code, "language", rt->id,
                                "engine", rt->engine, "durationMs", (double)o->duration_ns / 1e6, "logs",
                                "stdout", split_lines(&o->out), "stderr", split_lines(&o->err), "results",
                                results);
        if (!res) {
                json_decref(error);
                return NULL;
        }
        if (error)
                json_object_set_new(res, "error", error);
        json_object_set_new(res, "usage",
                            json_pack("{s:I, s:I, s:I}", "fuelConsumed", (json_int_t)(o->cpu_ns / 1000),
                                      "fuelLimit", (json_int_t)(lim->cpu_ms * 1000), "memoryBytes",
                                      (json_int_t)o->memory_peak));
        return res;
}

json_t *exec_stateless(struct engine *e, const struct runtime *rt, const char *code, json_t *env,
                       bool typescript, const char **ret_err)
{
        struct exec_limits lim;
        exec_limits_from_config(&e->cfg, &lim);
        engine_inflight(e, +1);
        uint64_t t0 = now_ns();
        /* Cheapest first: a booted pool member answers fastest; when the
         * pool is drained (sustained load) a template fork costs far less
         * CPU than a cold interpreter start. */
        struct kproc *kp = pool_take(e, rt);
        if (!kp)
                kp = zygote_fork(e, rt, &lim);
        bool pooled = kp != NULL;
        int r = 0;
        if (!kp && (r = kproc_spawn(e, rt, "once", NULL, false, &lim, &kp, ret_err)) < 0) {
                log_error_errno(r, "msg=\"spawn failed\" lang=%s step=%s", rt->id, *ret_err);
                engine_inflight(e, -1);
                return NULL;
        }
        json_t *req = exec_build_request(code, env, JAIL_WORKSPACE, typescript, lim.result_bytes, false);
        /* A fork below the interpreter (the shim) shares the template's
         * random state with every sibling until the kernel reseeds. */
        if (kp->forked)
                json_object_set_new(req, "reseed", json_true());
        struct exec_outcome o;
        uint64_t t1 = now_ns();
        r = kproc_run(kp, req, &lim, &o);
        uint64_t t2 = now_ns();
        log_debug("msg=\"stateless\" lang=%s pooled=%d take_ms=%.2f run_ms=%.2f", rt->id, pooled,
                  (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6);
        json_decref(req);
        json_t *res = NULL;
        if (r < 0) {
                *ret_err = "run";
                log_error_errno(r, "msg=\"execution failed\" lang=%s", rt->id);
        } else {
                res = exec_result_json(rt, code, &o, &lim);
        }
        exec_outcome_done(&o);
        engine_bury(e, kp);
        engine_inflight(e, -1);
        return res;
}

/* Counts the stateless executions in progress. A refill waits until none
 * is, or REFILL_GRACE_MS (see filler_main): started next to a request (a
 * cold node start is ~100 ms of CPU) it competes with it for the cores and
 * delays its answer; after the answer it competes with nothing. */
static void engine_inflight(struct engine *e, int delta)
{
        pthread_mutex_lock(&e->lock);
        e->inflight += (size_t)delta;
        if (e->inflight == 0)
                pthread_cond_signal(&e->fill_cond);
        pthread_mutex_unlock(&e->lock);
}

/* ---- off-request-path teardown ---- */

/* Hands a used kernel to the reaper thread, which kills it, reaps it,
 * recycles its cgroup and closes its fds — all off the request path (a
 * once-mode kernel is already exiting by itself). */
static void engine_bury(struct engine *e, struct kproc *k)
{
        if (!k)
                return;
        pthread_mutex_lock(&e->lock);
        k->dead_next = e->dead;
        e->dead = k;
        pthread_cond_signal(&e->reap_cond);
        pthread_mutex_unlock(&e->lock);
}

static void *reaper_main(void *arg)
{
        struct engine *e = arg;
        pthread_mutex_lock(&e->lock);
        for (;;) {
                while (!e->dead && !e->stopping)
                        pthread_cond_wait(&e->reap_cond, &e->lock);
                struct kproc *list = e->dead;
                e->dead = NULL;
                if (!list && e->stopping)
                        break;
                pthread_mutex_unlock(&e->lock);
                while (list) {
                        struct kproc *k = list;
                        list = k->dead_next;
                        kproc_free(k);
                }
                pthread_mutex_lock(&e->lock);
        }
        pthread_mutex_unlock(&e->lock);
        return NULL;
}

/* ---- warm pools ---- */

/* Waits for the kernel's {"ready":true} line (start-up done). */
/* Waits for the next control line: a JSON object, with `flag` true unless
 * flag is NULL. */
static int kproc_wait_line(struct kproc *kp, int timeout_ms, const char *flag)
{
        uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ULL;
        for (;;) {
                char *nl = kp->ctl_in.len ? memchr(kp->ctl_in.data, '\n', kp->ctl_in.len) : NULL;
                if (nl) {
                        size_t len = (size_t)(nl - kp->ctl_in.data);
                        json_t *msg = json_loadb(kp->ctl_in.data, len, 0, NULL);
                        bool ready = flag ? json_is_true(json_object_get(msg, flag)) : json_is_object(msg);
                        json_decref(msg);
                        memmove(kp->ctl_in.data, nl + 1, kp->ctl_in.len - len - 1);
                        kp->ctl_in.len -= len + 1;
                        return ready ? 0 : -EPROTO;
                }
                uint64_t now = now_ns();
                if (now >= deadline)
                        return -ETIMEDOUT;
                struct pollfd p = { kp->ctl_fd, POLLIN, 0 };
                if (poll(&p, 1, (int)((deadline - now) / 1000000ULL) + 1) < 0 && errno != EINTR)
                        return -errno;
                char tmp[4096];
                ssize_t n = read(kp->ctl_fd, tmp, sizeof(tmp));
                if (n == 0)
                        return -EPIPE;
                if (n > 0 && buf_append(&kp->ctl_in, tmp, (size_t)n) < 0)
                        return -EMSGSIZE;
        }
}

static int kproc_wait_ready(struct kproc *kp, int timeout_ms)
{
        return kproc_wait_line(kp, timeout_ms, "ready");
}

static bool pidfd_exited(int pidfd)
{
        struct pollfd p = { pidfd, POLLIN, 0 };
        return poll(&p, 1, 0) == 1;
}

static struct kproc *pool_take(struct engine *e, const struct runtime *rt)
{
        struct kproc *k = NULL;
        pthread_mutex_lock(&e->lock);
        for (size_t i = 0; i < e->npools; i++) {
                struct pool *p = &e->pools[i];
                if (p->rt != rt)
                        continue;
                while (p->n > 0 && !k) {
                        k = p->ready[--p->n];
                        e->pool_bytes -= k->pool_bytes;
                        if (pidfd_exited(k->jp.pidfd)) {
                                /* Died while waiting (e.g. killed at shutdown). */
                                k->dead_next = e->dead;
                                e->dead = k;
                                k = NULL;
                                pthread_cond_signal(&e->reap_cond);
                        }
                }
                if (k)
                        p->hits++;
                else
                        p->misses++;
                e->refill_at_ns = now_ns() + REFILL_GRACE_MS * 1000000ULL;
                pthread_cond_signal(&e->fill_cond);
        }
        pthread_mutex_unlock(&e->lock);
        return k;
}

/* The emptiest pool below its target, or NULL (engine lock held). */
static struct pool *pool_to_fill(struct engine *e)
{
        struct pool *best = NULL;
        for (size_t i = 0; i < e->npools; i++) {
                struct pool *p = &e->pools[i];
                bool over_budget = e->cfg.pool_memory_budget &&
                                   e->pool_bytes + p->member_bytes > e->cfg.pool_memory_budget;
                if (p->n < p->target && p->n < POOL_MAX && !over_budget && (!best || p->n < best->n))
                        best = p;
        }
        return best;
}

/* A pool member forked from the language's template, or NULL when there
 * is none. Its first request is a warm-up (docs/kernel-protocol.md): the
 * copy-on-write faults of the request path land here, off that path. */
static struct kproc *pool_fork(struct engine *e, const struct runtime *rt, const struct exec_limits *lim)
{
        if (!zygote_for(e, rt))
                return NULL;
        struct kproc *k = zygote_fork(e, rt, lim);
        if (!k)
                return NULL;
        /* A request like any other (same fields, same answer), so the
         * warm-up walks the real request path. */
        json_t *req = exec_build_request("1+1", NULL, JAIL_WORKSPACE, false, lim->result_bytes, false);
        json_object_set_new(req, "warmup", json_true());
        char *line = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        int r = line ? write_all(k->ctl_fd, line, strlen(line)) : -ENOMEM;
        free(line);
        if (r < 0 || write_all(k->ctl_fd, "\n", 1) < 0 || kproc_wait_line(k, 10000, NULL) < 0) {
                engine_bury(e, k);
                return NULL;
        }
        return k;
}

/* Sleeps on fill_cond until the monotonic time `until` (engine lock held). */
static void filler_wait_until(struct engine *e, uint64_t until_ns)
{
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        uint64_t now = now_ns(), ns = (uint64_t)until.tv_nsec + (until_ns > now ? until_ns - now : 0);
        until.tv_sec += (time_t)(ns / 1000000000ULL);
        until.tv_nsec = (long)(ns % 1000000000ULL);
        pthread_cond_timedwait(&e->fill_cond, &e->lock, &until);
}

/* Keeps every language's pool at its pool.<lang> target, within
 * pool.refill_per_s and pool.memory_budget: forks from the language's
 * template where there is one, else spawns one kernel at a time, waits until
 * it has booted (imports done), then publishes it. */
static void *filler_main(void *arg)
{
        struct engine *e = arg;
        struct exec_limits lim;
        exec_limits_from_config(&e->cfg, &lim);
        unsigned failures = 0;
        zygotes_start(e);
        pthread_mutex_lock(&e->lock);
        while (!e->stopping) {
                struct pool *p = pool_to_fill(e);
                uint64_t now = now_ns();
                if (p && now < e->next_spawn_ns) { /* pool.refill_per_s */
                        filler_wait_until(e, e->next_spawn_ns);
                        continue;
                }
                if (p && e->inflight && now < e->refill_at_ns && !zygote_for(e, p->rt)) {
                        /* Wait for the request to finish, or for the grace
                         * period to end under back-to-back requests. */
                        filler_wait_until(e, e->refill_at_ns);
                        continue;
                }
                if (!p) {
                        pthread_cond_wait(&e->fill_cond, &e->lock);
                        continue;
                }
                if (e->cfg.pool_refill_per_s)
                        e->next_spawn_ns = now + 1000000000ULL / e->cfg.pool_refill_per_s;
                const struct runtime *rt = p->rt;
                pthread_mutex_unlock(&e->lock);
                const char *why = NULL;
                int r = 0;
                struct kproc *k = pool_fork(e, rt, &lim);
                if (!k) {
                        r = kproc_spawn(e, rt, "once", NULL, false, &lim, &k, &why);
                        if (r == 0 && (r = kproc_wait_ready(k, 10000)) < 0)
                                why = "boot";
                }
                struct cgroup_usage u = { 0 };
                if (r == 0 && k->jp.cg && cgroup_read_usage(k->jp.cg, &u) == 0)
                        k->pool_bytes = u.memory_peak; /* what it costs to keep it */
                if (r == 0 && k->jp.cg && cgroup_reset(k->jp.cg) == 0)
                        k->counters_fresh = true; /* boot is not the request's usage */
                if (r < 0) {
                        log_warn("msg=\"pool spawn failed\" lang=%s step=%s err=\"%s\"", rt->id, why ? why : "?",
                                 strerror(-r));
                        engine_bury(e, k);
                        /* Back off so a broken runtime cannot spin a core. */
                        usleep(100000U << (failures < 5 ? failures++ : 5));
                } else {
                        failures = 0;
                }
                pthread_mutex_lock(&e->lock);
                if (r == 0)
                        p->member_bytes = k->pool_bytes;
                if (r == 0 && !e->stopping && p->n < POOL_MAX) {
                        p->ready[p->n++] = k;
                        e->pool_bytes += k->pool_bytes;
                } else if (r == 0) {
                        k->dead_next = e->dead;
                        e->dead = k;
                        pthread_cond_signal(&e->reap_cond);
                }
        }
        pthread_mutex_unlock(&e->lock);
        return NULL;
}

/* ---- fork-server templates ---- */

/* The template's configuration (runtimes/forkserver.h): what every forked
 * executor applies to itself before running guest code, the same policy as
 * any jail. Written once, right after the template has booted. */
static int zygote_send_config(struct engine *e, struct kproc *k, const struct exec_limits *lim)
{
        const struct config *cfg = &e->cfg;
        const struct seccomp_prog *sp = e->jail.seccomp;
        uint32_t bpf_len = (uint32_t)(sp->fprog.len * sizeof(struct sock_filter));
        struct forkserver_config c = {
                .magic = FORKSERVER_MAGIC, .version = FORKSERVER_VERSION, .uid = JAIL_UID, .gid = JAIL_GID,
                .bpf_len = bpf_len, .landlock = e->jail.landlock,
        };
        snprintf(c.tmp_opts, sizeof(c.tmp_opts), "size=%llu,nr_inodes=%llu,mode=1777",
                 (unsigned long long)cfg->tmp_bytes, (unsigned long long)cfg->tmp_inodes);
        snprintf(c.ws_opts, sizeof(c.ws_opts), "size=%llu,nr_inodes=%llu,mode=0777",
                 (unsigned long long)cfg->workspace_bytes, (unsigned long long)cfg->workspace_inodes);
        uint64_t cpu = lim->cpu_ms / 1000 + 2;
        const struct forkserver_rlimit rl[] = {
                { RLIMIT_CPU, 0, cpu, cpu + 1 },
                { RLIMIT_FSIZE, 0, cfg->file_bytes, cfg->file_bytes },
                { RLIMIT_NOFILE, 0, cfg->nofile, cfg->nofile },
                { RLIMIT_CORE, 0, 0, 0 },
                { RLIMIT_MSGQUEUE, 0, 0, 0 },
        };
        memcpy(c.rlimits, rl, sizeof(rl));
        c.nrlimits = ARRAY_SIZE(rl);
        int r = write_all(k->ctl_fd, &c, sizeof(c));
        return r < 0 ? r : write_all(k->ctl_fd, sp->fprog.filter, bpf_len);
}

/* Starts (or restarts) a template; caller holds z->lock. */
static int zygote_start(struct engine *e, struct zygote *z)
{
        struct exec_limits lim;
        exec_limits_from_config(&e->cfg, &lim);
        const char *why = "spawn";
        engine_bury(e, z->kp);
        z->kp = NULL;
        struct kproc *k = NULL;
        int r = kproc_spawn(e, z->rt, "zygote", NULL, false, &lim, &k, &why);
        /* Two "ready" lines: the kernel's once booted, then the shim's once
         * it has the configuration and serves forks. */
        if (r == 0 && (r = kproc_wait_ready(k, 10000)) < 0)
                why = "boot";
        if (r == 0 && (r = zygote_send_config(e, k, &lim)) < 0)
                why = "config";
        if (r == 0 && (r = kproc_wait_ready(k, 10000)) < 0)
                why = "forkserver";
        if (r < 0) {
                log_warn("msg=\"template start failed\" lang=%s step=%s err=\"%s\"", z->rt->id, why, strerror(-r));
                engine_bury(e, k);
                z->failures++;
                z->retry_at_ns = now_ns() + 1000000000ULL; /* fall back to pools/spawns meanwhile */
                return r;
        }
        z->kp = k;
        return 0;
}

/* Starts the templates not running yet. A request may have started one
 * already (it got there before this thread): restarting that one would kill
 * the executions forked from it, which live in its pid namespace. */
static void zygotes_start(struct engine *e)
{
        for (size_t i = 0; i < e->nzygotes; i++) {
                struct zygote *z = &e->zygotes[i];
                pthread_mutex_lock(&z->lock);
                if (!kproc_alive(z->kp))
                        zygote_start(e, z);
                pthread_mutex_unlock(&z->lock);
        }
}

static struct zygote *zygote_for(struct engine *e, const struct runtime *rt)
{
        for (size_t i = 0; i < e->nzygotes; i++)
                if (e->zygotes[i].rt == rt)
                        return &e->zygotes[i];
        return NULL;
}

/* Hands three fds to the template: the child's stdout, stderr and control
 * socket. One byte of data carries them (SCM_RIGHTS). */
static int send_fds(int sock, const int fds[3])
{
        for (int tries = 0; tries < 100; tries++) {
                if (forkserver_send_byte(sock, 'F', SCM_RIGHTS, fds, 3 * sizeof(int)) == 1)
                        return 0;
                if (errno != EAGAIN && errno != EINTR)
                        return -errno;
                struct pollfd p = { sock, POLLOUT, 0 };
                poll(&p, 1, 10);
        }
        return -EAGAIN;
}

/* Receives the executor's "P" with SCM_CREDENTIALS: the kernel translates
 * its pid into ours, which is how we find (and cgroup) a grandchild of a
 * process in another pid namespace. */
static int recv_pid(int sock, pid_t *ret)
{
        struct pollfd p = { sock, POLLIN, 0 };
        if (poll(&p, 1, 3000) != 1)
                return -ETIMEDOUT;
        char byte;
        struct iovec iov = { &byte, 1 };
        union {
                char buf[CMSG_SPACE(sizeof(struct ucred))];
                struct cmsghdr align;
        } u;
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
        ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        if (n != 1 || byte != 'P')
                return n < 0 ? -errno : -EPROTO;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_CREDENTIALS) {
                        struct ucred uc;
                        memcpy(&uc, CMSG_DATA(cm), sizeof(uc));
                        if (uc.pid <= 0)
                                return -EPROTO;
                        *ret = uc.pid;
                        return 0;
                }
        }
        return -EPROTO;
}

/* Asks the template for a fresh executor; NULL when there is no template
 * for this language or it failed (callers fall back to pools/spawns). */
static struct kproc *zygote_fork(struct engine *e, const struct runtime *rt, const struct exec_limits *lim)
{
        struct zygote *z = zygote_for(e, rt);
        if (!z)
                return NULL;
        int out[2] = { -1, -1 }, err[2] = { -1, -1 }, ctl[2] = { -1, -1 }, one = 1, r;
        if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
            socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) < 0 ||
            setsockopt(ctl[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0) {
                r = -errno;
                goto fail;
        }
        pthread_mutex_lock(&z->lock);
        if (!kproc_alive(z->kp) || pidfd_exited(z->kp->jp.pidfd)) {
                r = now_ns() < z->retry_at_ns ? -EAGAIN : zygote_start(e, z);
                if (r < 0) {
                        pthread_mutex_unlock(&z->lock);
                        goto fail;
                }
        }
        int fds[3] = { out[1], err[1], ctl[1] };
        r = send_fds(z->kp->ctl_fd, fds);
        if (r < 0)
                kproc_kill(z->kp); /* restarted on the next request */
        z->forks++;
        pthread_mutex_unlock(&z->lock);
        close(out[1]);
        close(err[1]);
        close(ctl[1]);
        out[1] = err[1] = ctl[1] = -1;
        pid_t pid = 0;
        if (r < 0 || (r = recv_pid(ctl[0], &pid)) < 0)
                goto fail;
        char cgname[64];
        next_cgroup_name(e, cgname, sizeof(cgname));
        struct jail_limits jl = jail_limits_for(e, lim);
        struct kproc *k = calloc(1, sizeof(*k));
        if (!k || (r = jail_adopt(&e->jail, pid, &jl, cgname, &k->jp)) < 0) {
                free(k);
                r = r < 0 ? r : -ENOMEM;
                goto fail;
        }
        if ((r = write_all(ctl[0], "G", 1)) < 0) {
                jail_proc_release(&k->jp);
                free(k);
                goto fail;
        }
        struct jail_proc jp = k->jp;
        /* A new or recycled (reset) cgroup: nothing to reset again. */
        *k = (struct kproc){ .engine = e, .rt = rt, .jp = jp, .out_fd = out[0], .err_fd = err[0],
                             .ctl_fd = ctl[0], .replay_fd = -1, .once = true, .alive = true,
                             .counters_fresh = true, .forked = true };
        buf_init(&k->ctl_in, lim->result_bytes * 8 + 1 * MiB);
        set_nonblock(k->out_fd);
        set_nonblock(k->err_fd);
        set_nonblock(k->ctl_fd);
        engine_track(e, k);
        return k;
fail:
        log_debug("msg=\"template fork failed\" lang=%s err=\"%s\"", rt->id, strerror(-r));
        close_pair(out);
        close_pair(err);
        close_pair(ctl);
        return NULL;
}
