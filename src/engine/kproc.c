/* Kernels: a jailed process plus the JSON-line protocol on its control
 * socket (docs/kernel-protocol.md). */
#include "engine/internal.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>

static void kproc_destroy(struct proc *p)
{
        struct kproc *kp = (struct kproc *)p;
        proc_release(p); /* and its group reference, after its child group is gone */
        close(kp->ctl_fd);
        if (kp->replay_fd >= 0)
                close(kp->replay_fd);
        buf_free(&kp->ctl_in);
        free(kp);
}

struct kproc *kproc_new(const struct runtime *rt, int ctl_fd, int replay_fd, bool once,
                        const struct exec_limits *lim)
{
        struct kproc *k = calloc(1, sizeof(*k));
        if (!k)
                return NULL;
        *k = (struct kproc){ .rt = rt, .ctl_fd = ctl_fd, .replay_fd = replay_fd, .once = once };
        k->p.destroy = kproc_destroy;
        k->p.in_fd = k->p.out_fd = k->p.err_fd = -1;
        buf_init(&k->ctl_in, lim->result_bytes * 8 + 1 * MiB);
        set_nonblock(ctl_fd);
        return k;
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

/* The template's environment: the shim preloaded, bound once. */
static void add_template_env(const char **envp, size_t n)
{
        if (n + 4 >= JAIL_MAX_ENV)
                return;
        envp[n++] = "LD_PRELOAD=" JAIL_KERNELS_DIR "/" JAIL_FORKSERVER_LIB;
        envp[n++] = "SANDBOXD_FORKSERVER=1";
        /* Resolve every symbol in the template, once: lazy binding would
         * redo it (and copy the GOT pages) in every fork. */
        envp[n++] = "LD_BIND_NOW=1";
        /* Executors live for one request: returning freed heap to the
         * kernel only makes the next allocation fault again. */
        envp[n++] = "GLIBC_TUNABLES=glibc.malloc.trim_threshold=268435456";
        envp[n] = NULL;
}

static int build_spec(struct engine *e, const struct runtime *rt, const char *mode, const struct exec_limits *lim,
                      struct jail_spec *spec, char *scratch, size_t scratch_len)
{
        unsigned heap_mb = (unsigned)(lim->memory_bytes / MiB * 3 / 4);
        int r = runtime_build_argv(rt, mode, heap_mb ? heap_mb : 64, spec->argv, JAIL_MAX_ARGS, scratch,
                                   scratch_len);
        if (r < 0)
                return r;
        size_t nenv = exec_base_env(rt, spec->envp, JAIL_MAX_ENV);
        spec->limits = engine_jail_limits(e, lim);
        spec->template = strcmp(mode, "zygote") == 0;
        if (spec->template) {
                add_template_env(spec->envp, nenv);
                /* A template lives long and keeps one small pid 1 per
                 * execution it forked that is still running or waiting in
                 * the pool (the executors themselves move to their own
                 * cgroups): no CPU rlimit, room for those. */
                size_t i = (size_t)(rt - runtime_at(0));
                uint64_t pool = i < ENGINE_MAX_RUNTIMES ? e->opt.pool_size[i] : 0;
                spec->limits.cpu_seconds = 0;
                spec->limits.pids = lim->pids + 4 * e->opt.workers + pool + 16;
        }
        return 0;
}

int kproc_step_err(struct err *err, const char *step, int r)
{
        err_set(err, ERR_UNAVAILABLE, -r, "kernel start failed at %s: %s", step, strerror(-r));
        return r;
}

int workspace_tree(struct engine *e, const struct kproc_workspace *ws, int *ret, struct err *err)
{
        *ret = -1;
        if (!ws || e->jail.userns)
                return 0;
        int fd = ws->fd < 0 ? -EBADF : jail_workspace_tree(ws->fd);
        if (fd < 0)
                return jail_step_err(err, "workspace", fd);
        *ret = fd;
        return 0;
}

int kproc_spawn(struct engine *e, const struct runtime *rt, const char *mode,
                const struct kproc_workspace *ws, bool replay_overlay, const struct exec_limits *lim,
                struct kproc **ret, struct err *err)
{
        struct kproc_where where = { .ws = ws, .netns_fd = -1 };
        return kproc_spawn_in(e, rt, mode, &where, replay_overlay, lim, ret, err);
}

int where_binds(const struct kproc_where *where, struct jail_spec *spec, struct err *err)
{
        for (size_t i = 0; i < where->nbinds && spec->nbinds < JAIL_MAX_BINDS; i++) {
                const struct kproc_bind *b = &where->binds[i];
                int fd = jail_bind_tree(b->fd, b->readonly);
                if (fd == -EINVAL)
                        continue; /* unmounted since the sandbox lock was held */
                if (fd < 0)
                        return jail_step_err(err, "mounts", fd);
                spec->binds[spec->nbinds++] = (struct jail_bind){ .tree_fd = fd, .path = b->path };
        }
        return 0;
}

void spec_binds_close(struct jail_spec *spec)
{
        for (size_t i = 0; i < spec->nbinds; i++)
                close(spec->binds[i].tree_fd);
        spec->nbinds = 0;
}

void where_apply(const struct kproc_where *where, struct jail_spec *spec)
{
        spec->workspace_dir = where->ws ? where->ws->dir : NULL;
        spec->has_netns = where->netns_fd >= 0;
        spec->netns_fd = where->netns_fd;
        spec->allow_inet = where->allow_inet && where->netns_fd >= 0;
        spec->local_dns = where->local_dns && where->netns_fd >= 0;
        spec->host_id = where->host_id;
        spec->cgroup_parent = kproc_group_cgroup(where->group);
}

int kproc_spawn_in(struct engine *e, const struct runtime *rt, const char *mode, const struct kproc_where *where,
                   bool replay_overlay, const struct exec_limits *lim, struct kproc **ret, struct err *err)
{
        int ctl[2] = { -1, -1 }, rep[2] = { -1, -1 }, r;
        char scratch[512];
        const struct kproc_workspace *ws = where->ws;
        const char *workspace_dir = ws ? ws->dir : NULL;
        _cleanup_(spec_binds_close) struct jail_spec spec = { .replay_fd = -1 };
        where_apply(where, &spec);

        if ((r = build_spec(e, rt, mode, lim, &spec, scratch, sizeof(scratch))) < 0)
                return err_set(err, ERR_INVALID, -r, "kernel start failed at argv: %s", strerror(-r));
        _cleanup_close_ int tree = -1;
        if ((r = workspace_tree(e, ws, &tree, err)) < 0 || (!e->jail.userns && (r = where_binds(where, &spec, err)) < 0))
                return r;
        spec.workspace_tree_fd = tree;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) < 0 ||
            (replay_overlay && workspace_dir && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, rep) < 0)) {
                r = jail_step_err(err, "pipes", -errno);
                goto fail;
        }
        spec.ctl_fd = ctl[1];
        spec.replay_fd = rep[1];
        struct kproc *k = kproc_new(rt, ctl[0], rep[0], strcmp(mode, "once") == 0, lim);
        if (!k) {
                r = err_set(err, ERR_INTERNAL, ENOMEM, "kernel start failed: out of memory");
                goto fail;
        }
        ctl[0] = rep[0] = -1;
        k->p.group = kproc_group_ref(where->group);
        r = proc_spawn_jail(e, &spec, &k->p, err);
        /* A template has no filter: its executors send their listeners. */
        if (r == 0 && !spec.template && (r = proc_watch_refusals(&k->p, k->ctl_fd, 1000)) < 0)
                jail_step_err(err, "seccomp", r);
        if (r < 0) {
                kproc_free(k);
                goto fail;
        }
        close_pair(ctl);
        close_pair(rep);
        *ret = k;
        return 0;
fail:
        close_pair(ctl);
        close_pair(rep);
        return r;
}

int kproc_end_replay(struct kproc *kp)
{
        if (kp->replay_fd < 0)
                return 0;
        int r = jail_swap_workspace(&kp->p.jp);
        close(kp->replay_fd);
        kp->replay_fd = -1;
        return r;
}

void kproc_kill(struct kproc *kp)
{
        /* Only the signal: the cgroup belongs to the thread running the
         * kernel, which reaps and frees it. */
        if (kp && kp->p.alive && kp->p.jp.pidfd >= 0)
                jail_kill_init(&kp->p.jp);
}

int kproc_signal(struct kproc *kp, int sig)
{
        return kp ? proc_signal(&kp->p, sig) : -ESRCH;
}

bool kproc_alive(const struct kproc *kp)
{
        return kp && kp->p.alive;
}

int kproc_pidfd(const struct kproc *kp)
{
        return kp && kp->p.alive ? kp->p.jp.pidfd : -1;
}

void kproc_free(struct kproc *kp)
{
        if (!kp)
                return;
        if (kp->p.engine)
                kproc_destroy(&kp->p);
        else { /* never spawned */
                kproc_group_unref(kp->p.group);
                close(kp->ctl_fd);
                if (kp->replay_fd >= 0)
                        close(kp->replay_fd);
                buf_free(&kp->ctl_in);
                free(kp);
        }
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

/* Takes the first complete line out of ctl_in: its length, or -1. */
static ssize_t take_line(struct buf *in, char **ret)
{
        char *nl = in->len ? memchr(in->data, '\n', in->len) : NULL;
        if (!nl)
                return -1;
        *ret = in->data;
        return nl - in->data;
}

static void drop_line(struct buf *in, size_t len)
{
        memmove(in->data, in->data + len + 1, in->len - len - 1);
        in->len -= len + 1;
}

/* Parses complete control lines; sets o->response on the first answer. */
static int parse_ctl_lines(struct run_state *s)
{
        struct buf *in = &s->kp->ctl_in;
        char *line;
        ssize_t len;
        while (!s->o->response && (len = take_line(in, &line)) >= 0) {
                json_t *msg = parse_kernel_line(line, (size_t)len);
                drop_line(in, (size_t)len);
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

int kproc_read_ctl(struct run_state *s)
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

/* Waits for the next control line: a JSON object, with `flag` true unless
 * flag is NULL. */
int kproc_wait_line(struct kproc *kp, int timeout_ms, const char *flag)
{
        uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ULL;
        for (;;) {
                char *line;
                ssize_t len = take_line(&kp->ctl_in, &line);
                if (len >= 0) {
                        json_t *msg = json_loadb(line, (size_t)len, 0, NULL);
                        bool ready = flag ? json_is_true(json_object_get(msg, flag)) : json_is_object(msg);
                        json_decref(msg);
                        drop_line(&kp->ctl_in, (size_t)len);
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

int kproc_wait_ready(struct kproc *kp, int timeout_ms)
{
        return kproc_wait_line(kp, timeout_ms, "ready");
}

static char *request_line(json_t *request, size_t *ret_len)
{
        _cleanup_free_ char *line = json_dumps(request, JSON_COMPACT);
        if (!line)
                return NULL;
        size_t len = strlen(line);
        char *out = malloc(len + 2);
        if (!out)
                return NULL;
        memcpy(out, line, len);
        out[len] = '\n';
        *ret_len = len + 1;
        return out;
}

/* A resident kernel's group counts from its last request: restart the
 * counters, but charge what it burned while idle (processes it left
 * running, under the cgroup's CPU quota) to this run's fuel, so idling
 * never launders CPU. Warm pool members were reset off the request path,
 * after boot, and have used nothing since (they wait for this request), so
 * their baseline is 0. */
static void start_counters(struct kproc *kp, struct run_state *s)
{
        struct cgroup_usage u = { 0 };
        /* One read serves the debt and the reset's baseline; the counters
         * restart from that read, so this run's own CPU starts at 0. */
        if (kp->p.jp.cg && !kp->counters_fresh && cgroup_reset_read(kp->p.jp.cg, &u) == 0 && kp->cpu_marked &&
            u.cpu_ns > kp->cpu_mark)
                s->cpu_debt = u.cpu_ns - kp->cpu_mark;
        kp->counters_fresh = false;
        s->cpu_base = 0;
}

int kproc_run(struct kproc *kp, json_t *request, const struct exec_limits *lim,
              struct exec_outcome *ret)
{
        return kproc_run_sink(kp, request, lim, NULL, ret);
}

int kproc_run_sink(struct kproc *kp, json_t *request, const struct exec_limits *lim, const struct exec_sink *sink,
                   struct exec_outcome *ret)
{
        struct exec_outcome *o = ret;
        *o = (struct exec_outcome){ 0 };
        buf_init(&o->out, lim->output_bytes);
        buf_init(&o->err, lim->output_bytes);
        if (!kp->p.alive)
                return -ESRCH;
        size_t len = 0;
        _cleanup_free_ char *pending = request_line(request, &len);
        if (!pending)
                return -ENOMEM;

        struct run_state s;
        run_init(&s, &kp->p, lim, o);
        s.kp = kp;
        s.sink = sink;
        start_counters(kp, &s);
        s.pending = pending;
        s.pending_len = len;
        if (s.cpu_debt > lim->cpu_ms * 1000000ULL)
                run_hit_limit(&s, EXEC_LIMIT_CPU); /* spent while idle: the cell never runs */
        else
                run_write_pending(&s, kp->ctl_fd);
        int r = run_loop(&s);
        run_finish(&s, r);
        /* run_finish's reading marks where idling starts (no second read). */
        kp->cpu_marked = kp->p.alive && s.cpu_end_read;
        kp->cpu_mark = kp->cpu_marked ? s.cpu_end : 0;
        return r;
}
