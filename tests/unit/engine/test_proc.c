/* End-to-end tests of the process model (src/engine/proc.c, run.c): each
 * TEST (its own forked process) builds an engine on a temp run dir and runs
 * real jailed processes: pipes, exit codes, signals, limits, a terminal,
 * and teardown. Needs root (skips otherwise). */
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "engine/internal.h"
#include "tap.h"

static struct engine *g_engine;
static char g_run[64];

static void cleanup(void)
{
        engine_free(g_engine);
        g_engine = NULL;
        if (g_run[0])
                rm_rf(g_run);
}

static void kernels_dir(char *out, size_t len)
{
        const char *me = __FILE__;
        const char *tail = strstr(me, "tests/unit/engine/test_proc.c");
        char cwd[PATH_MAX] = ".";
        if (tail && tail > me)
                snprintf(out, len, "%.*ssrc/runtimes/kernels", (int)(tail - me), me);
        else if (getcwd(cwd, sizeof(cwd)))
                snprintf(out, len, "%s/src/runtimes/kernels", cwd);
}

static const struct exec_limits LIM = {
        .cpu_ms = 5000, .wall_ms = 10000, .memory_bytes = 256 * MiB, .pids = 64,
        .output_bytes = 32 * KiB, .output_entries = 200, .result_bytes = 64 * KiB,
};

static struct engine *engine(void)
{
        if (g_engine)
                return g_engine;
        if (geteuid() != 0)
                SKIP("needs root");
        atexit(cleanup);
        snprintf(g_run, sizeof(g_run), "/tmp/sbx-proc-XXXXXX");
        ASSERT_TRUE(mkdtemp(g_run) != NULL);
        struct engine_options o = {
                .cgroup_force = -1, .limits = LIM, .file_bytes = 1 * MiB, .nofile = 256,
                .tmp_bytes = 16 * MiB, .tmp_inodes = 1024, .workspace_bytes = 16 * MiB,
                .workspace_inodes = 1024, .workers = 2,
        };
        snprintf(o.run_dir, sizeof(o.run_dir), "%s", g_run);
        kernels_dir(o.kernels_dir, sizeof(o.kernels_dir));
        struct err why = { 0 };
        int r = engine_new(&o, &g_engine, &why);
        if (r == -EPERM || r == -EACCES || r == -ENOSYS || r == -EOPNOTSUPP)
                SKIP("namespaces or cgroups not available here");
        if (r < 0)
                TAP_FAIL("engine_new: %d (%s)", r, why.msg);
        return g_engine;
}

static const char *const ENV[] = { "PATH=/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8", NULL };

static struct proc *spawn(const char *const *argv, enum proc_io io, bool stdin_pipe)
{
        struct proc_spec spec = { .argv = argv, .envp = ENV, .io = io, .stdin_pipe = stdin_pipe,
                                  .rows = 33, .cols = 101 };
        struct proc *p = NULL;
        struct err why = { 0 };
        int r = proc_spawn(engine(), &spec, &p, &why);
        if (r < 0)
                TAP_FAIL("proc_spawn %s: %d (%s)", argv[0], r, why.msg);
        return p;
}

static struct proc *bash(const char *script, enum proc_io io)
{
        const char *argv[] = { "/bin/bash", "-c", script, NULL };
        return spawn(argv, io, false);
}

/* Spawns, runs to completion and frees: the outcome is the caller's. */
static void run_argv(const char *const *argv, enum proc_io io, const char *in, const struct exec_limits *lim,
                     struct exec_outcome *o)
{
        struct proc *p = spawn(argv, io, in != NULL && io == PROC_IO_PIPES);
        int r = proc_run(p, in, in ? strlen(in) : 0, lim, o);
        proc_free(p);
        ASSERT_OK(r);
}

static void run_bash(const char *script, enum proc_io io, const char *in, struct exec_outcome *o)
{
        const char *argv[] = { "/bin/bash", "-c", script, NULL };
        run_argv(argv, io, in, NULL, o);
}

/* out as a NUL-terminated string (tests print text only). */
static const char *text(struct buf *b)
{
        buf_append(b, "", 1);
        b->len--;
        return b->data ? b->data : "";
}

static void expect_exit(const struct exec_outcome *o, int code, int sig)
{
        struct proc_status st;
        ASSERT_TRUE(o->died);
        proc_status_decode(o->exit_status, &st);
        ASSERT_EQ(st.code, code);
        ASSERT_EQ(st.signal, sig);
}

TEST(proc_cat_echoes_stdin)
{
        const char *argv[] = { "/bin/cat", NULL };
        static const char in[] = "hello\nworld\n";
        struct exec_outcome o;
        run_argv(argv, PROC_IO_PIPES, in, &LIM, &o);
        ASSERT_STREQ(text(&o.out), in);
        ASSERT_EQ(o.err.len, 0);
        ASSERT_EQ(o.limit, EXEC_LIMIT_NONE);
        ASSERT_GT(o.cpu_ns, 0);
        ASSERT_GT(o.memory_peak, 0);
        expect_exit(&o, 0, 0);
        exec_outcome_done(&o);
}

TEST(proc_stdout_stderr_exit_code)
{
        struct exec_outcome o;
        run_bash("echo out; echo err >&2; echo more; exit 7", PROC_IO_PIPES, NULL, &o);
        ASSERT_STREQ(text(&o.out), "out\nmore\n");
        ASSERT_STREQ(text(&o.err), "err\n");
        expect_exit(&o, 7, 0);
        exec_outcome_done(&o);
        /* Without a stdin pipe, stdin is /dev/null: read gets EOF at once. */
        run_bash("read x; echo \"rc=$? x=[$x]\"; id -u", PROC_IO_PIPES, NULL, &o);
        ASSERT_STREQ(text(&o.out), "rc=1 x=[]\n65534\n");
        exec_outcome_done(&o);
}

TEST(proc_signal_is_reported)
{
        const char *argv[] = { "/bin/sleep", "30", NULL };
        struct proc *p = spawn(argv, PROC_IO_PIPES, false);
        struct proc_status st;
        ASSERT_ERR(proc_wait(p, 100, &st), ETIMEDOUT);
        ASSERT_OK(proc_signal(p, SIGTERM));
        ASSERT_OK(proc_wait(p, 5000, &st));
        ASSERT_TRUE(st.exited);
        ASSERT_EQ(st.signal, SIGTERM);
        ASSERT_EQ(st.code, 0);
        ASSERT_ERR(proc_signal(p, SIGTERM), ESRCH);
        proc_free(p);
        /* SIGKILL takes the whole jail down. */
        p = spawn(argv, PROC_IO_PIPES, false);
        ASSERT_OK(proc_signal(p, SIGKILL));
        ASSERT_OK(proc_wait(p, 5000, &st));
        ASSERT_EQ(st.signal, SIGKILL);
        proc_free(p);
}

TEST(proc_wall_limit_kills)
{
        const char *argv[] = { "/bin/sleep", "20", NULL };
        struct exec_limits lim = LIM;
        lim.wall_ms = 300;
        struct exec_outcome o;
        uint64_t t0 = now_ns();
        run_argv(argv, PROC_IO_PIPES, NULL, &lim, &o);
        ASSERT_EQ(o.limit, EXEC_LIMIT_WALL);
        ASSERT_TRUE(o.died);
        ASSERT_LT((now_ns() - t0) / 1000000, 3000);
        ASSERT_GE(o.duration_ns / 1000000, 300);
        exec_outcome_done(&o);
}

TEST(proc_output_limit_kills)
{
        struct exec_outcome o;
        run_bash("yes", PROC_IO_PIPES, NULL, &o);
        ASSERT_EQ(o.limit, EXEC_LIMIT_OUTPUT);
        ASSERT_U64_LE(o.out.len, LIM.output_bytes);
        exec_outcome_done(&o);
}

/* The fd interface: output can be read while the process still runs. */
TEST(proc_streams_before_exit)
{
        const char *argv[] = { "/bin/bash", "-c", "echo first; read x; echo \"got $x\"", NULL };
        struct proc *p = spawn(argv, PROC_IO_PIPES, true);
        struct proc_fds fds;
        proc_fds(p, &fds);
        ASSERT_TRUE(fds.stdin_fd >= 0 && fds.stdout_fd >= 0 && fds.stderr_fd >= 0 && fds.exit_fd >= 0);
        char buf[64];
        struct pollfd pf = { fds.stdout_fd, POLLIN, 0 };
        ASSERT_EQ(poll(&pf, 1, 5000), 1);
        ASSERT_EQ(proc_read(p, 1, buf, sizeof(buf)), 6);
        ASSERT_TRUE(memcmp(buf, "first\n", 6) == 0);
        ASSERT_ERR(proc_read(p, 1, buf, sizeof(buf)), EAGAIN); /* waiting for stdin */
        ASSERT_EQ(proc_write(p, "it\n", 3), 3);
        ASSERT_EQ(poll(&pf, 1, 5000), 1);
        ASSERT_EQ(proc_read(p, 1, buf, sizeof(buf)), 7);
        ASSERT_TRUE(memcmp(buf, "got it\n", 7) == 0);
        struct proc_status st;
        ASSERT_OK(proc_wait(p, 5000, &st));
        ASSERT_EQ(st.code, 0);
        proc_free(p);
}

TEST(proc_terminal)
{
        struct proc *p = bash("tty; stty size; [ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo isatty; "
                              "ls /dev/pts; ps -o tty= -p $$ 2>/dev/null || true",
                              PROC_IO_PTY);
        struct proc_fds fds;
        proc_fds(p, &fds);
        ASSERT_EQ(fds.stderr_fd, -1);
        ASSERT_EQ(fds.stdin_fd, fds.stdout_fd);
        struct exec_outcome o;
        ASSERT_OK(proc_run(p, NULL, 0, NULL, &o));
        const char *out = text(&o.out);
        /* A fresh devpts: the first terminal of the jail, and only it. */
        if (!strstr(out, "/dev/pts/0\r\n") || !strstr(out, "33 101\r\n") || !strstr(out, "isatty\r\n") ||
            !strstr(out, "0  ptmx\r\n") || !strstr(out, "pts/0\r\n"))
                TAP_FAIL("terminal output: %s", out);
        expect_exit(&o, 0, 0);
        exec_outcome_done(&o);
        proc_free(p);
}

TEST(proc_terminal_resize_and_input)
{
        struct proc *p = bash("read x; stty size; echo \"x=$x\"", PROC_IO_PTY);
        ASSERT_OK(proc_resize(p, 40, 120));
        struct exec_outcome o;
        ASSERT_OK(proc_run(p, "go\n", 3, NULL, &o));
        const char *out = text(&o.out);
        if (!strstr(out, "40 120\r\n") || !strstr(out, "x=go\r\n"))
                TAP_FAIL("terminal output: %s", out);
        exec_outcome_done(&o);
        proc_free(p);
        /* Pipes are not terminals. */
        p = bash("true", PROC_IO_PIPES);
        ASSERT_ERR(proc_resize(p, 1, 1), ENOTTY);
        proc_free(p);
}

/* The seccomp policy keeps blocking TIOCSTI (typing into the terminal)
 * while everything a shell needs from its terminal works. */
TEST(proc_terminal_blocks_tiocsti)
{
        struct exec_outcome o;
        run_bash("python3 -c 'import fcntl, termios\n"
                 "try:\n fcntl.ioctl(0, termios.TIOCSTI, b\"x\"); print(\"pushed\")\n"
                 "except OSError as e: print(\"errno\", e.errno)'",
                 PROC_IO_PTY, NULL, &o);
        const char *out = text(&o.out);
        if (!strstr(out, "errno 1\r\n"))
                TAP_FAIL("TIOCSTI: %s", out);
        exec_outcome_done(&o);
}

static bool pid_alive(pid_t pid)
{
        return kill(pid, 0) == 0 || errno != ESRCH;
}

TEST(proc_teardown_leaves_nothing)
{
        struct engine *e = engine();
        /* A duration no other test (or another suite running at the same
         * time on this host) uses, so the process scan below sees only ours. */
        char secs[32], cmd[160], scan[160];
        snprintf(secs, sizeof(secs), "100.%d", (int)getpid());
        snprintf(cmd, sizeof(cmd), "sleep %s & sleep %s & echo started; sleep %s", secs, secs, secs);
        struct proc *p = bash(cmd, PROC_IO_PIPES);
        ASSERT_EQ(engine_live_count(e), 1);
        char buf[64];
        struct pollfd pf = { p->out_fd, POLLIN, 0 };
        ASSERT_EQ(poll(&pf, 1, 5000), 1);
        ASSERT_GT(proc_read(p, 1, buf, sizeof(buf)), 0);
        pid_t init = p->jp.pid;
        ASSERT_TRUE(pid_alive(init));
        proc_free(p);
        ASSERT_EQ(engine_live_count(e), 0);
        ASSERT_FALSE(pid_alive(init));
        /* Nothing of the jail is left on the host (its sleeps, whatever their uid). */
        snprintf(scan, sizeof(scan), "ps -eo args= | grep -c '[s]leep %s'", secs);
        FILE *ps = popen(scan, "r");
        ASSERT_TRUE(ps != NULL);
        int n = -1;
        ASSERT_EQ(fscanf(ps, "%d", &n), 1);
        pclose(ps);
        ASSERT_EQ(n, 0);
        /* And buried ones go too, off the caller's thread. */
        p = bash("sleep 100", PROC_IO_PIPES);
        init = p->jp.pid;
        proc_bury(p);
        for (int i = 0; i < 100 && engine_live_count(e) > 0; i++)
                usleep(20000);
        ASSERT_EQ(engine_live_count(e), 0);
        ASSERT_FALSE(pid_alive(init));
}

/* A sandbox's jail context: its workspace dir at /workspace, a cwd, env. */
TEST(proc_in_workspace)
{
        struct engine *e = engine();
        char ws[] = "/tmp/sbx-proc-ws-XXXXXX";
        ASSERT_TRUE(mkdtemp(ws) != NULL);
        ASSERT_OK(chmod(ws, 0777));
        char sub[64];
        snprintf(sub, sizeof(sub), "%s/sub", ws);
        ASSERT_OK(mkdir(sub, 0777) < 0 ? -errno : 0);
        ASSERT_OK(chmod(sub, 0777));
        const char *argv[] = { "/bin/bash", "-c", "pwd; echo $MARK > made-here; ls /workspace", NULL };
        const char *env[] = { "PATH=/usr/bin:/bin", "MARK=from-the-jail", NULL };
        struct proc_spec spec = { .argv = argv, .envp = env, .workspace_dir = ws, .cwd = "/workspace/sub" };
        struct proc *p = NULL;
        struct err why = { 0 };
        ASSERT_OK(proc_spawn(e, &spec, &p, &why));
        struct exec_outcome o;
        ASSERT_OK(proc_run(p, NULL, 0, NULL, &o));
        proc_free(p);
        ASSERT_STREQ(text(&o.out), "/workspace/sub\nsub\n");
        exec_outcome_done(&o);
        char path[96], buf[64] = "";
        snprintf(path, sizeof(path), "%s/made-here", sub);
        ASSERT_OK(read_file_small(path, buf, sizeof(buf), NULL));
        ASSERT_STREQ(buf, "from-the-jail\n");
        rm_rf(ws);
}

/* Spawn failures name their step; argument mistakes are the caller's. */
TEST(proc_spawn_failures_name_the_step)
{
        struct engine *e = engine();
        struct proc *p = NULL;
        struct err why = { 0 };
        const char *none[] = { NULL };
        struct proc_spec spec = { .argv = none, .envp = ENV };
        ASSERT_EQ(proc_spawn(e, &spec, &p, &why), -EINVAL);
        ASSERT_EQ(why.reason, ERR_INVALID);
        ASSERT_STREQ(why.msg, "process start failed at argv: no program given");

        const char *missing[] = { "/no/such/program", NULL };
        spec.argv = missing;
        ASSERT_EQ(proc_spawn(e, &spec, &p, &why), -ENOENT);
        ASSERT_EQ(why.reason, ERR_UNAVAILABLE);
        ASSERT_EQ(why.errnum, ENOENT);
        ASSERT_STREQ(why.msg, "jail setup failed at exec: No such file or directory");
        ASSERT_TRUE(p == NULL);
        err_done(&why);
}

/* proc_spec.side_channel: fd 3 of the workload is a socket to side_fd,
 * both ways, carrying only the workload's bytes (the seccomp listener that
 * comes first over it is taken by proc_spawn); without it fd 3 is closed. */
TEST(proc_side_channel)
{
        const char *argv[] = { "/bin/bash", "-c", "read -r x <&3; printf 'got %s\\0end' \"$x\" >&3; echo out", NULL };
        struct proc_spec spec = { .argv = argv, .envp = ENV, .io = PROC_IO_PIPES, .side_channel = true };
        struct proc *p = NULL;
        struct err why = { 0 };
        int r = proc_spawn(engine(), &spec, &p, &why);
        if (r < 0)
                TAP_FAIL("proc_spawn: %d (%s)", r, why.msg);
        struct proc_fds fds;
        proc_fds(p, &fds);
        ASSERT_GE(fds.side_fd, 0);
        ASSERT_EQ(write(fds.side_fd, "ping\n", 5), 5);
        struct proc_status st;
        ASSERT_OK(proc_wait(p, 10000, &st));
        ASSERT_EQ(st.code, 0);
        char buf[64] = "";
        ssize_t n = read(fds.side_fd, buf, sizeof(buf) - 1);
        ASSERT_EQ(n, 12);
        ASSERT_TRUE(memcmp(buf, "got ping\0end", 12) == 0);
        char out[16] = "";
        ASSERT_EQ(proc_read(p, 1, out, sizeof(out)), 4);
        ASSERT_TRUE(memcmp(out, "out\n", 4) == 0);
        proc_free(p);

        struct exec_outcome o;
        run_bash("if : >&3; then echo open; else echo closed; fi", PROC_IO_PIPES, NULL, &o);
        ASSERT_STREQ(text(&o.out), "closed\n");
        exec_outcome_done(&o);
}
