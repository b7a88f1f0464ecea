/* The poll loop of one run: output capture within the output limits, the
 * kernel's control channel or the process's stdin, CPU and wall sampling,
 * and the usage report. */
#include "engine/internal.h"

#include <poll.h>
#include <string.h>

/* How often CPU usage is sampled while a run is in progress. */
#define CPU_TICK_MS 20
/* After the process is gone, how long to wait for pipes to reach EOF. */
#define DRAIN_MS 1000

void run_init(struct run_state *s, struct proc *p, const struct exec_limits *lim, struct exec_outcome *o)
{
        *s = (struct run_state){ .p = p, .lim = lim, .o = o, .start_ns = now_ns() };
        s->deadline_ns = s->start_ns + lim->wall_ms * 1000000ULL;
        /* A terminal carries both streams on one fd. */
        s->err_eof = p->err_fd < 0;
        s->refused_base = notify_watch_count(p->watch);
        s->watch_workload = p->work_fd > 0 && !p->pty;
}

static bool output_over_limit(struct run_state *s)
{
        return s->bytes > s->lim->output_bytes || s->newlines > s->lim->output_entries;
}

void run_hit_limit(struct run_state *s, enum exec_limit l)
{
        if (s->o->limit == EXEC_LIMIT_NONE)
                s->o->limit = l;
        jail_kill(&s->p->jp);
}

/* Reads what a guest pipe has; returns false at EOF. Bytes past the output
 * limit are dropped (the run is being killed anyway). */
static bool read_guest(struct run_state *s, int which, struct buf *b)
{
        char tmp[16384];
        for (;;) {
                ssize_t n = proc_read(s->p, which, tmp, sizeof(tmp));
                if (n < 0)
                        return n == -EAGAIN || n == -EINTR;
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
                size_t keep = (size_t)n < room ? (size_t)n : room;
                buf_append(b, tmp, keep);
                if (s->sink && keep)
                        s->sink->output(s->sink->userdata, which, tmp, keep);
                if (output_over_limit(s))
                        run_hit_limit(s, EXEC_LIMIT_OUTPUT);
        }
}

static void read_outputs(struct run_state *s, bool out_ready, bool err_ready)
{
        if (out_ready && !s->out_eof)
                s->out_eof = !read_guest(s, 1, &s->o->out);
        if (err_ready && !s->err_eof)
                s->err_eof = !read_guest(s, 2, &s->o->err);
}

/* What the pipes already hold: one zero-timeout poll of both (a syscall
 * fewer than trying a read on each, which almost always finds nothing). */
static void read_held_outputs(struct run_state *s)
{
        struct pollfd p[2] = { { s->out_eof ? -1 : s->p->out_fd, POLLIN, 0 },
                               { s->err_eof ? -1 : s->p->err_fd, POLLIN, 0 } };
        if (p[0].fd < 0 && p[1].fd < 0)
                return;
        if (poll(p, 2, 0) < 0)
                p[0].revents = p[1].revents = POLLIN;   /* cannot tell: read both */
        read_outputs(s, p[0].revents, p[1].revents);
}

void run_write_pending(struct run_state *s, int fd)
{
        while (s->pending_off < s->pending_len) {
                ssize_t n = write(fd, s->pending + s->pending_off, s->pending_len - s->pending_off);
                if (n < 0) {
                        if (errno != EAGAIN && errno != EINTR)
                                s->pending_off = s->pending_len; /* reader gone; exit path reports it */
                        return;
                }
                s->pending_off += (size_t)n;
        }
}

/* A process's stdin: the data, then EOF (a terminal gets the bytes only). */
static void feed_stdin(struct run_state *s)
{
        run_write_pending(s, s->p->pty ? s->p->out_fd : s->p->in_fd);
        if (s->pending_off >= s->pending_len)
                proc_close_stdin(s->p);
}

static void check_cpu_and_wall(struct run_state *s)
{
        struct cgroup_usage u = { 0 };
        uint64_t now = now_ns();
        if (now >= s->deadline_ns) {
                run_hit_limit(s, EXEC_LIMIT_WALL);
                return;
        }
        /* The CPU time alone: this runs every tick of a long run. */
        if (s->p->jp.cg && cgroup_read_usage_of(s->p->jp.cg, 0, &u) == 0 &&
            u.cpu_ns - s->cpu_base + s->cpu_debt > s->lim->cpu_ms * 1000000ULL)
                run_hit_limit(s, EXEC_LIMIT_CPU);
}

/* After the process exited, its pipes reach EOF as soon as the pid
 * namespace is torn down; wait briefly for that so no output is lost. */
static void drain_after_exit(struct run_state *s)
{
        uint64_t until = now_ns() + DRAIN_MS * 1000000ULL;
        while ((!s->out_eof || !s->err_eof) && now_ns() < until) {
                struct pollfd p[2] = { { s->out_eof ? -1 : s->p->out_fd, POLLIN, 0 },
                                       { s->err_eof ? -1 : s->p->err_fd, POLLIN, 0 } };
                if (poll(p, 2, 50) < 0 && errno != EINTR)
                        break;
                read_outputs(s, p[0].revents, p[1].revents);
        }
}

/* The fd the loop writes to: the kernel's control socket, or stdin. */
static int input_fd(const struct run_state *s)
{
        if (s->kp)
                return s->kp->ctl_fd;
        if (s->pending_off >= s->pending_len)
                return -1;
        return s->p->pty ? s->p->out_fd : s->p->in_fd;
}

/* A pool member's workload hung up its pidfd (init reaped it). With both
 * pipes at EOF nothing else of the guest writes: the run is over, and the
 * answer need not wait for init's own exit (its namespaces' teardown,
 * ~0.2-0.5 ms). Else (a background child holds a pipe, or the kernel keeps
 * the status to itself) the run ends with init, as for any jail. */
static bool workload_gone(struct run_state *s)
{
        read_outputs(s, true, true);
        if (s->out_eof && s->err_eof && s->o->limit == EXEC_LIMIT_NONE && proc_take_workload_exit(s->p) == 0)
                return true;
        s->watch_workload = false;
        return false;
}

static int run_tick(struct run_state *s, struct pollfd p[5])
{
        read_outputs(s, p[0].revents, p[1].revents);
        if (p[2].revents & POLLOUT) {
                if (s->kp)
                        run_write_pending(s, s->kp->ctl_fd);
                else
                        feed_stdin(s);
        }
        if (s->kp && (p[2].revents & (POLLIN | POLLHUP | POLLERR))) {
                int r = kproc_read_ctl(s);
                if (r == -EPROTO || r == -EMSGSIZE)
                        run_hit_limit(s, EXEC_LIMIT_NONE); /* kernel misbehaved */
        } else if (!s->kp && (p[2].revents & (POLLHUP | POLLERR))) {
                proc_close_stdin(s->p); /* nobody reads stdin any more */
                s->pending_off = s->pending_len;
        }
        /* The workload first: init may have exited too by the time we look. */
        if (((p[4].revents & POLLHUP) && workload_gone(s)) || p[3].revents) {
                s->o->died = true;
                return 1;
        }
        return 0;
}

int run_loop(struct run_state *s)
{
        uint64_t next_tick = now_ns() + CPU_TICK_MS * 1000000ULL;
        if (!s->kp && s->pending_len == 0)
                proc_close_stdin(s->p);
        for (;;) {
                /* Output written before the answer is already in the pipes;
                 * a once-mode kernel's exit is left to the reaper thread. */
                if (s->o->response)
                        return 0;
                bool writing = s->pending_off < s->pending_len;
                /* A terminal's master is both the output and the input: ask
                 * for POLLOUT on the output slot then. */
                bool pty_in = !s->kp && s->p->pty && writing;
                struct pollfd p[5] = {
                        { s->out_eof ? -1 : s->p->out_fd, POLLIN | (pty_in ? POLLOUT : 0), 0 },
                        { s->err_eof ? -1 : s->p->err_fd, POLLIN, 0 },
                        { pty_in ? -1 : input_fd(s), (s->kp ? POLLIN : 0) | (writing ? POLLOUT : 0), 0 },
                        { s->p->jp.pidfd, POLLIN, 0 },
                        /* POLLHUP only: POLLIN comes at its exit, before init reaped it */
                        { s->watch_workload ? s->p->work_fd : -1, 0, 0 },
                };
                uint64_t now = now_ns();
                int timeout = next_tick > now ? (int)((next_tick - now) / 1000000ULL) + 1 : 0;
                int n = poll(p, 5, timeout);
                if (n < 0 && errno != EINTR)
                        return -errno;
                if (now_ns() >= next_tick) {
                        check_cpu_and_wall(s);
                        next_tick = now_ns() + CPU_TICK_MS * 1000000ULL;
                }
                if (n <= 0)
                        continue;
                if (pty_in && (p[0].revents & POLLOUT))
                        p[2].revents |= POLLOUT;
                if (run_tick(s, p))
                        return 0;
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
        struct exec_outcome *o = s->o;
        /* Counted before each answer: complete once the guest moved on. */
        o->refused_syscalls = notify_watch_count(s->p->watch) - s->refused_base;
        /* An OOM kill explains only a run that died or never answered: a
         * run that answered skips that file (one read fewer per answer). */
        unsigned what = CGROUP_USAGE_PEAK | CGROUP_USAGE_PIDS | (o->died || !o->response ? CGROUP_USAGE_OOM : 0);
        if (s->p->jp.cg && cgroup_read_usage_of(s->p->jp.cg, what, &u) == 0) {
                s->cpu_end = u.cpu_ns;
                s->cpu_end_read = true;
                o->cpu_ns = u.cpu_ns - s->cpu_base + s->cpu_debt;
                o->memory_peak = u.memory_peak;
                if (u.oom_kills > 0 && o->limit == EXEC_LIMIT_NONE && (o->died || !o->response))
                        o->limit = EXEC_LIMIT_MEMORY;
                if (u.pids_max_hits > 0 && o->limit == EXEC_LIMIT_NONE)
                        o->limit = EXEC_LIMIT_PIDS;
        }
        if (o->limit == EXEC_LIMIT_NONE && !o->response && v8_heap_exhausted(o))
                o->limit = EXEC_LIMIT_MEMORY;
}

void run_finish(struct run_state *s, int r)
{
        struct exec_outcome *o = s->o;
        o->duration_ns = now_ns() - s->start_ns;
        if (o->died || o->limit != EXEC_LIMIT_NONE || r < 0) {
                /* exit_early: init got its SIGKILL and is reaped at teardown. */
                if (!s->p->exit_early)
                        jail_kill(&s->p->jp);
                drain_after_exit(s);
                finish_usage(s);
                if (!s->p->exit_early)
                        proc_reap(s->p);
                o->exit_status = s->p->wait_status;
                o->died = true;
        } else {
                /* Output written before the answer is already in the pipes. */
                read_held_outputs(s);
                finish_usage(s);
        }
}
