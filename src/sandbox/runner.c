/* The command runner (runner.h). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>

#include "base/time.h"
#include "engine/proc.h"
#include "sandbox/runner.h"

/* The timeout's steps: SIGTERM at the deadline, SIGKILL after the grace. */
struct timer {
        uint64_t term_at, kill_at;   /* monotonic ms; 0: none */
        bool fired;
};

static int timer_poll_ms(const struct timer *t, uint64_t now)
{
        uint64_t at = !t->fired ? t->term_at : t->kill_at;
        if (!at)
                return SBX_RUN_HEARTBEAT_MS;
        return at <= now ? 0 : at - now < SBX_RUN_HEARTBEAT_MS ? (int)(at - now) : SBX_RUN_HEARTBEAT_MS;
}

static void timer_check(struct timer *t, struct proc *p, uint64_t now)
{
        if (t->term_at && !t->fired && now >= t->term_at) {
                t->fired = true;
                proc_signal_group(p, SIGTERM); /* the whole process group */
        }
        if (t->fired && t->kill_at && now >= t->kill_at) {
                proc_signal(p, SIGKILL);
                t->kill_at = 0;
        }
}

static int heartbeat(const struct sbx_run *run)
{
        return run->ops->heartbeat ? run->ops->heartbeat(run->ctx) : 0;
}

/* Reads what fd `which` has now and hands it over; 0 at EOF, < 0 from the
 * op (stop) or the read (-EAGAIN, …). */
static ssize_t pump(const struct sbx_run *run, int which, bool *stop)
{
        unsigned char chunk[16384];
        ssize_t n = proc_read(run->proc, which, chunk, sizeof(chunk));
        if (n > 0) {
                int r = run->ops->output(run->ctx, which, chunk, (size_t)n);
                if (r < 0) {
                        *stop = true;
                        return r;
                }
        }
        return n;
}

/* Hands stdout and stderr over until both end. 0, or an op's stop value. */
static int run_output(const struct sbx_run *run, struct timer *t)
{
        struct proc_fds fds;
        proc_fds(run->proc, &fds);
        bool open[2] = { fds.stdout_fd >= 0, fds.stderr_fd >= 0 };
        int side_fd = run->ops->side ? fds.side_fd : -1;
        uint64_t last_write = now_ms();
        while (open[0] || open[1]) {
                uint64_t now = now_ms();
                timer_check(t, run->proc, now);
                struct pollfd pf[3] = { { open[0] ? fds.stdout_fd : -1, POLLIN, 0 },
                                        { open[1] ? fds.stderr_fd : -1, POLLIN, 0 },
                                        { side_fd, POLLIN, 0 } };
                if (poll(pf, 3, timer_poll_ms(t, now)) < 0)
                        continue;
                if (pf[2].revents && !run->ops->side(run->ctx))
                        side_fd = -1; /* ended: it would poll readable forever */
                for (int i = 0; i < 2; i++) {
                        if (!pf[i].revents)
                                continue;
                        bool stop = false;
                        ssize_t r = pump(run, i + 1, &stop);
                        if (stop)
                                return (int)r;
                        if (r > 0)
                                last_write = now_ms();
                        if (r == 0 || (r < 0 && r != -EAGAIN && r != -EINTR))
                                open[i] = false;
                }
                if (now_ms() - last_write >= SBX_RUN_HEARTBEAT_MS) {
                        int r = heartbeat(run);
                        if (r < 0)
                                return r;
                        last_write = now_ms();
                }
        }
        return 0;
}

/* Output usually ends with the jail, but a command may close its stdout
 * and stderr and go on: the timer and the heartbeat still run. */
static int run_exit(const struct sbx_run *run, struct timer *t, struct proc_status *st)
{
        int r;
        while ((r = proc_wait(run->proc, timer_poll_ms(t, now_ms()), st)) == -ETIMEDOUT || r == -EINTR) {
                timer_check(t, run->proc, now_ms());
                int h = heartbeat(run);
                if (h < 0)
                        return h;
        }
        if (r < 0)
                *st = (struct proc_status){ .exited = true, .code = 255 };
        return 0;
}

int sbx_run_wait(const struct sbx_run *run, struct sbx_run_result *ret)
{
        struct timer t = { 0 };
        if (run->timeout_ms) {
                t.term_at = now_ms() + run->timeout_ms;
                t.kill_at = t.term_at + run->grace_ms;
        }
        struct proc_status st;
        int r = run_output(run, &t);
        if (r == 0)
                r = run_exit(run, &t, &st);
        if (r < 0)
                return r;
        *ret = (struct sbx_run_result){
                .exit_code = t.fired ? SBX_RUN_TIMEOUT_CODE : st.signal ? 128 + st.signal : st.code,
                .signal = st.signal,
                .timed_out = t.fired,
        };
        return 0;
}

size_t sbx_run_timeout_message(uint64_t timeout_ms, char *buf, size_t len)
{
        int n = snprintf(buf, len, "Command timed out after %llums\n", (unsigned long long)timeout_ms);
        return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}
