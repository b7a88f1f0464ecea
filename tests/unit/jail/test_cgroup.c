/* Reaches the module's parsers and group paths through its internal
 * header (jail/cgroup_internal.h) and links the archive like any test.
 * Tests touching real hierarchies need root and a v1 memory controller and
 * skip otherwise; every group lives under a per-process root
 * name so parallel runs do not collide, and an atexit hook removes what a
 * failed ASSERT left behind. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"
#include "jail/cgroup_internal.h"

#include "tap.h"

static struct cgroup_root *g_root;
static struct cgroup *g_cg[4];

static void cleanup_groups(void)
{
        for (size_t i = 0; i < ARRAY_SIZE(g_cg); i++)
                cgroup_destroy(TAKE_PTR(g_cg[i]));
        cgroup_root_free(TAKE_PTR(g_root));
}

static const char *root_name(void)
{
        static char name[64];
        snprintf(name, sizeof(name), "sbx-test-%d", (int)getpid());
        return name;
}

static void require_v1(void)
{
        char dir[PATH_MAX];
        if (geteuid() != 0)
                SKIP("needs root");
        if (cg_find_own_dir("memory", dir, sizeof(dir)) < 0 || cg_find_own_dir("pids", dir, sizeof(dir)) < 0)
                SKIP("no cgroup v1 memory+pids hierarchies");
        atexit(cleanup_groups);
        int r = cgroup_root_open(root_name(), CGROUP_V1, &g_root);
        if (r == -EACCES || r == -EROFS || r == -EPERM)
                SKIP("cgroup v1 not writable");
        ASSERT_OK(r);
        ASSERT_EQ(cgroup_root_backend(g_root), CGROUP_V1);
}

static struct cgroup *make_group(size_t slot, const char *name, uint64_t mem, uint64_t pids)
{
        const struct cgroup_limits lim = { .memory_bytes = mem, .pids = pids };
        ASSERT_OK(cgroup_create(g_root, name, &lim, &g_cg[slot]));
        return g_cg[slot];
}

/* Forks a child that waits until it has been attached, then runs fn and
 * exits 0. PDEATHSIG keeps a failed test from leaking it. */
static pid_t spawn_attached(struct cgroup *cg, void (*fn)(void))
{
        int p[2];
        ASSERT_OK(pipe2(p, O_CLOEXEC));
        pid_t pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                char c;
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                close(p[1]);
                if (read(p[0], &c, 1) != 1)
                        _exit(100);
                fn();
                _exit(0);
        }
        close(p[0]);
        ASSERT_OK(cgroup_attach(cg, pid));
        ASSERT_EQ(write(p[1], "g", 1), 1);
        close(p[1]);
        return pid;
}

static int wait_status(pid_t pid)
{
        int st = 0;
        ASSERT_EQ(waitpid(pid, &st, 0), pid);
        return st;
}

/* volatile: otherwise the compiler drops the unused malloc/store/free. */
static void touch_bytes(size_t n)
{
        volatile char *m = malloc(n);
        if (!m)
                _exit(101);
        for (size_t i = 0; i < n; i += 4096)
                m[i] = 1;
        free((void *)m);
}

static void child_eat_200m(void)
{
        touch_bytes(200 * MiB);
}

static void child_eat_16m(void)
{
        touch_bytes(16 * MiB);
}

static void child_pause(void)
{
        for (;;)
                pause();
}

static void child_burn_100ms(void)
{
        struct timespec ts;
        uint64_t start, now;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        start = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
        do {
                clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
                now = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
        } while (now - start < 100 * 1000000ULL);
}

/* Exits with the number of successful forks, or 255 if fork failed with
 * anything but EAGAIN (the pids limit). */
static void child_fork_loop(void)
{
        pid_t kids[64];
        int n = 0, err = 0;
        while (n < (int)ARRAY_SIZE(kids)) {
                pid_t pid = fork();
                if (pid == 0) {
                        pause();
                        _exit(0);
                }
                if (pid < 0) {
                        err = errno;
                        break;
                }
                kids[n++] = pid;
        }
        for (int i = 0; i < n; i++) {
                kill(kids[i], SIGKILL);
                waitpid(kids[i], NULL, 0);
        }
        _exit(err == EAGAIN ? n : 255);
}

static bool dir_exists(const char *path)
{
        struct stat st;
        return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ---- pure parsing ---------------------------------------------------- */

TEST(cgroup_parse_proc_cgroup)
{
        char l1[] = "4:memory:/process_api/abc\n";
        ASSERT_STREQ(cg_proc_cgroup_match(l1, "memory"), "/process_api/abc");
        char l2[] = "2:cpu,cpuacct:/x\n";
        ASSERT_STREQ(cg_proc_cgroup_match(l2, "cpuacct"), "/x");
        char l3[] = "2:cpu,cpuacct:/x\n";
        ASSERT_TRUE(cg_proc_cgroup_match(l3, "memory") == NULL);
        char l4[] = "0::/user.slice/x.service\n";
        ASSERT_STREQ(cg_proc_cgroup_match(l4, NULL), "/user.slice/x.service");
        char l5[] = "0::/\n";
        ASSERT_TRUE(cg_proc_cgroup_match(l5, "memory") == NULL);
        char l6[] = "9:name=systemd:/\n";
        ASSERT_TRUE(cg_proc_cgroup_match(l6, NULL) == NULL);
        char l7[] = "garbage\n";
        ASSERT_TRUE(cg_proc_cgroup_match(l7, NULL) == NULL);
}

static int mi(const char *line, const char *type, const char *ctrl, const char *own, char *out)
{
        char buf[512];
        snprintf(buf, sizeof(buf), "%s", line);
        return cg_mountinfo_match(buf, type, ctrl, own, out, PATH_MAX);
}

TEST(cgroup_parse_mountinfo)
{
        char out[PATH_MAX];
        const char *mem = "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n";
        ASSERT_EQ(mi(mem, "cgroup", "memory", "/process_api/x", out), 1);
        ASSERT_STREQ(out, "/sys/fs/cgroup/memory/process_api/x");
        ASSERT_EQ(mi(mem, "cgroup", "memory", "/", out), 1);
        ASSERT_STREQ(out, "/sys/fs/cgroup/memory");
        ASSERT_EQ(mi(mem, "cgroup", "pids", "/", out), 0);
        ASSERT_EQ(mi(mem, "cgroup2", NULL, "/", out), 0);

        const char *sub = "34 30 0:31 /process_api /cg rw - cgroup cgroup rw,memory\n";
        ASSERT_EQ(mi(sub, "cgroup", "memory", "/process_api/x", out), 1);
        ASSERT_STREQ(out, "/cg/x");
        ASSERT_EQ(mi(sub, "cgroup", "memory", "/process_api", out), 1);
        ASSERT_STREQ(out, "/cg");
        ASSERT_EQ(mi(sub, "cgroup", "memory", "/process_apix", out), 0);
        ASSERT_EQ(mi(sub, "cgroup", "memory", "/other", out), 0);

        const char *co = "31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw shared:9 - cgroup cgroup rw,cpu,cpuacct\n";
        ASSERT_EQ(mi(co, "cgroup", "cpuacct", "/a", out), 1);
        ASSERT_STREQ(out, "/sys/fs/cgroup/cpu,cpuacct/a");

        const char *v2 = "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        ASSERT_EQ(mi(v2, "cgroup2", NULL, "/", out), 1);
        ASSERT_STREQ(out, "/sys/fs/cgroup/unified");
        ASSERT_EQ(mi(v2, "cgroup", "memory", "/", out), 0);

        const char *esc = "50 30 0:40 / /mnt/my\\040cg rw - cgroup2 none rw\n";
        ASSERT_EQ(mi(esc, "cgroup2", NULL, "/j", out), 1);
        ASSERT_STREQ(out, "/mnt/my cg/j");

        ASSERT_EQ(mi("truncated line\n", "cgroup", "memory", "/", out), 0);
}

TEST(cgroup_read_keyed_files)
{
        char dir[] = "/tmp/sbx-cgtest-XXXXXX";
        ASSERT_TRUE(mkdtemp(dir) != NULL);
        char p[PATH_MAX];
        ASSERT_OK(cg_join_path(p, dir, "memory.oom_control"));
        int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        ASSERT_TRUE(fd >= 0);
        const char *text = "oom_kill_disable 1\nunder_oom 0\noom_kill 3\n";
        ASSERT_OK(write_all(fd, text, strlen(text)));
        close(fd);
        uint64_t v = 99;
        ASSERT_OK(cg_read_key_u64(dir, "memory.oom_control", "oom_kill", &v));
        ASSERT_EQ(v, 3);
        ASSERT_OK(cg_read_key_u64(dir, "memory.oom_control", "oom_kill_disable", &v));
        ASSERT_EQ(v, 1);
        ASSERT_OK(cg_read_key_u64(dir, "memory.oom_control", "missing", &v));
        ASSERT_EQ(v, 0);
        ASSERT_EQ(cg_read_key_u64(dir, "pids.events", "max", &v), -ENOENT);
        v = 5;
        ASSERT_OK(cg_read_key_opt(dir, "pids.events", "max", &v));
        ASSERT_EQ(v, 0);
        ASSERT_TRUE(cg_list_has("cpu io memory pids\n", "pids", ' '));
        ASSERT_TRUE(!cg_list_has("cpu io memory pids\n", "mem", ' '));
        ASSERT_TRUE(cg_list_has("rw,relatime,memory", "memory", ','));
        unlink(p);
        rmdir(dir);
}

TEST(cgroup_rejects_bad_names)
{
        struct cgroup_root *root = NULL;
        ASSERT_EQ(cgroup_root_open("a/b", CGROUP_NONE, &root), -EINVAL);
        ASSERT_EQ(cgroup_root_open("", CGROUP_NONE, &root), -EINVAL);
        ASSERT_EQ(cgroup_root_open("..", CGROUP_NONE, &root), -EINVAL);
        ASSERT_EQ(cgroup_root_open("x", _CGROUP_BACKEND_MAX, &root), -EINVAL);
        ASSERT_TRUE(root == NULL);
        ASSERT_OK(cgroup_root_open("x", CGROUP_NONE, &root));
        struct cgroup *cg = NULL;
        ASSERT_EQ(cgroup_create(root, ".", NULL, &cg), -EINVAL);
        ASSERT_EQ(cgroup_create(root, "a/../../b", NULL, &cg), -EINVAL);
        ASSERT_TRUE(cg == NULL);
        cgroup_root_free(root);
}

TEST(cgroup_backend_names)
{
        ASSERT_STREQ(cgroup_backend_name(CGROUP_NONE), "none");
        ASSERT_STREQ(cgroup_backend_name(CGROUP_V1), "v1");
        ASSERT_STREQ(cgroup_backend_name(CGROUP_V2), "v2");
        ASSERT_STREQ(cgroup_backend_name(_CGROUP_BACKEND_MAX), "unknown");
}

TEST(cgroup_none_is_noop)
{
        struct cgroup_root *root = NULL;
        ASSERT_OK(cgroup_root_open("x", CGROUP_NONE, &root));
        ASSERT_EQ(cgroup_root_backend(root), CGROUP_NONE);
        struct cgroup *cg = NULL;
        const struct cgroup_limits lim = { 64 * MiB, 10 };
        ASSERT_OK(cgroup_create(root, "job", &lim, &cg));
        ASSERT_OK(cgroup_attach(cg, getpid()));
        struct cgroup_usage u = { 1, 1, 1, 1 };
        ASSERT_OK(cgroup_read_usage(cg, &u));
        ASSERT_TRUE(u.cpu_ns == 0 && u.memory_peak == 0 && u.oom_kills == 0 && u.pids_max_hits == 0);
        ASSERT_TRUE(cgroup_is_empty(cg));
        ASSERT_OK(cgroup_kill_all(cg));
        ASSERT_OK(cgroup_reset(cg));
        cgroup_destroy(cg);
        cgroup_destroy(NULL);
        cgroup_root_free(root);
        cgroup_root_free(NULL);
}

TEST(cgroup_auto_detect)
{
        struct cgroup_root *root = NULL;
        ASSERT_OK(cgroup_root_open(root_name(), -1, &root));
        enum cgroup_backend b = cgroup_root_backend(root);
        char dir[PATH_MAX];
        bool v1 = geteuid() == 0 && cg_find_own_dir("memory", dir, sizeof(dir)) == 0 &&
                  cg_find_own_dir("pids", dir, sizeof(dir)) == 0;
        if (cg_v2_has_memory())
                ASSERT_EQ(b, CGROUP_V2);
        else if (v1)
                ASSERT_EQ(b, CGROUP_V1);
        fprintf(stderr, "# auto-detected backend: %s\n", cgroup_backend_name(b));
        cgroup_root_free(root);
}

/* ---- v1 on the real hierarchies --------------------------------------- */

TEST(cgroup_v1_root_layout)
{
        require_v1();
        char own[PATH_MAX], want[PATH_MAX + 64];
        ASSERT_OK(cg_find_own_dir("memory", own, sizeof(own)));
        snprintf(want, sizeof(want), "%s/%s", own, root_name());
        bool found = false;
        for (size_t i = 0; i < g_root->n; i++)
                if (g_root->h[i].ctrls & CG_BIT(CG_MEMORY))
                        found = strcmp(g_root->h[i].path, want) == 0;
        ASSERT_TRUE(found);
        for (size_t i = 0; i < g_root->n; i++)
                ASSERT_TRUE(dir_exists(g_root->h[i].path));
        char saved[_CG_CTRL_MAX][PATH_MAX];
        size_t n = g_root->n;
        for (size_t i = 0; i < n; i++)
                snprintf(saved[i], PATH_MAX, "%s", g_root->h[i].path);
        cgroup_root_free(TAKE_PTR(g_root));
        for (size_t i = 0; i < n; i++)
                ASSERT_TRUE(!dir_exists(saved[i]));
}

TEST(cgroup_v1_limits_written)
{
        require_v1();
        struct cgroup *cg = make_group(0, "limits", 64 * MiB, 10);
        const char *mem = cg_ctrl_dir(cg, CG_MEMORY);
        char p[PATH_MAX];
        uint64_t v;
        ASSERT_OK(cg_join_path(p, mem, "memory.limit_in_bytes"));
        ASSERT_OK(read_u64_file(p, &v));
        ASSERT_EQ(v, 64 * MiB);
        ASSERT_OK(cg_join_path(p, mem, "memory.memsw.limit_in_bytes"));
        if (read_u64_file(p, &v) == 0)
                ASSERT_EQ(v, 64 * MiB);
        ASSERT_OK(cg_join_path(p, cg_ctrl_dir(cg, CG_PIDS), "pids.max"));
        ASSERT_OK(read_u64_file(p, &v));
        ASSERT_EQ(v, 10);
        struct cgroup *dup = NULL;
        ASSERT_EQ(cgroup_create(g_root, "limits", NULL, &dup), -EEXIST);
        ASSERT_TRUE(dup == NULL);
        ASSERT_TRUE(dir_exists(mem)); /* the failed duplicate removed nothing */
}

/* The root's CPU quota reaches every group created below it (issue 10
 * row 6), and an explicit one wins. */
TEST(cgroup_v1_cpu_quota_written)
{
        require_v1();
        char dir[PATH_MAX];
        if (cg_find_own_dir("cpu", dir, sizeof(dir)) < 0)
                SKIP("no cgroup v1 cpu hierarchy");
        ASSERT_OK(cgroup_root_set_cpu_quota(g_root, 50));
        struct cgroup *cg = make_group(0, "quota", 64 * MiB, 10);
        const char *cpu = cg_ctrl_dir(cg, CG_CPUQ);
        ASSERT_TRUE(cpu != NULL);
        char p[PATH_MAX];
        uint64_t v;
        ASSERT_OK(cg_join_path(p, cpu, "cpu.cfs_period_us"));
        ASSERT_OK(read_u64_file(p, &v));
        ASSERT_EQ(v, 100000);
        ASSERT_OK(cg_join_path(p, cpu, "cpu.cfs_quota_us"));
        ASSERT_OK(read_u64_file(p, &v));
        ASSERT_EQ(v, 50000);
        const struct cgroup_limits two_cpus = { .memory_bytes = 64 * MiB, .pids = 10, .cpu_quota_percent = 200 };
        ASSERT_OK(cgroup_create(g_root, "quota2", &two_cpus, &g_cg[1]));
        ASSERT_OK(cg_join_path(p, cg_ctrl_dir(g_cg[1], CG_CPUQ), "cpu.cfs_quota_us"));
        ASSERT_OK(read_u64_file(p, &v));
        ASSERT_EQ(v, 200000);
        ASSERT_OK(cgroup_root_set_cpu_quota(g_root, 0));
}

TEST(cgroup_none_refuses_cpu_quota)
{
        struct cgroup_root *root = NULL;
        ASSERT_OK(cgroup_root_open("sbx-none-quota", CGROUP_NONE, &root));
        ASSERT_EQ(cgroup_root_set_cpu_quota(root, 100), -EOPNOTSUPP);
        ASSERT_OK(cgroup_root_set_cpu_quota(root, 0));
        cgroup_root_free(root);
}

TEST(cgroup_v1_oom_kill)
{
        require_v1();
        struct cgroup *cg = make_group(0, "oom", 64 * MiB, 10);
        int st = wait_status(spawn_attached(cg, child_eat_200m));
        ASSERT_TRUE(WIFSIGNALED(st));
        ASSERT_EQ(WTERMSIG(st), SIGKILL);
        struct cgroup_usage u;
        ASSERT_OK(cgroup_read_usage(cg, &u));
        ASSERT_TRUE(u.oom_kills >= 1);
        ASSERT_TRUE(u.memory_peak >= 56 * MiB && u.memory_peak <= 64 * MiB);
        ASSERT_EQ(u.pids_max_hits, 0);
}

/* A read of some counters leaves the others at 0 and still subtracts the
 * reset's baselines from what it reads. */
TEST(cgroup_v1_read_usage_of_reads_only_what_is_asked)
{
        require_v1();
        struct cgroup *cg = make_group(0, "oomsome", 64 * MiB, 10);
        int st = wait_status(spawn_attached(cg, child_eat_200m));
        ASSERT_TRUE(WIFSIGNALED(st));
        struct cgroup_usage u;
        ASSERT_OK(cgroup_read_usage_of(cg, CGROUP_USAGE_PEAK | CGROUP_USAGE_PIDS, &u));
        ASSERT_EQ(u.oom_kills, 0);
        ASSERT_TRUE(u.memory_peak >= 56 * MiB);
        ASSERT_OK(cgroup_read_usage_of(cg, 0, &u));
        ASSERT_EQ(u.memory_peak, 0);
        ASSERT_OK(cgroup_read_usage_of(cg, CGROUP_USAGE_OOM, &u));
        ASSERT_TRUE(u.oom_kills >= 1);
        ASSERT_EQ(u.memory_peak, 0);
        ASSERT_OK(cgroup_reset(cg));
        ASSERT_OK(cgroup_read_usage_of(cg, CGROUP_USAGE_OOM, &u));
        ASSERT_EQ(u.oom_kills, 0); /* the baseline the reset took */
}

TEST(cgroup_v1_pids_limit)
{
        require_v1();
        struct cgroup *cg = make_group(0, "pids", 64 * MiB, 10);
        int st = wait_status(spawn_attached(cg, child_fork_loop));
        ASSERT_TRUE(WIFEXITED(st));
        ASSERT_EQ(WEXITSTATUS(st), 9); /* itself + 9 children = pids.max */
        struct cgroup_usage u;
        ASSERT_OK(cgroup_read_usage(cg, &u));
        ASSERT_TRUE(u.pids_max_hits >= 1);
        ASSERT_EQ(u.oom_kills, 0);
}

TEST(cgroup_v1_cpu_usage)
{
        require_v1();
        struct cgroup *cg = make_group(0, "cpu", 0, 0);
        if (!cg_ctrl_dir(cg, CG_CPU))
                SKIP("no cpuacct hierarchy");
        struct cgroup_usage before, after;
        ASSERT_OK(cgroup_read_usage(cg, &before));
        int st = wait_status(spawn_attached(cg, child_burn_100ms));
        ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        ASSERT_OK(cgroup_read_usage(cg, &after));
        ASSERT_TRUE(after.cpu_ns >= before.cpu_ns + 95 * 1000000ULL);
        ASSERT_TRUE(after.cpu_ns < before.cpu_ns + 5000 * 1000000ULL);
}

TEST(cgroup_v1_kill_all)
{
        require_v1();
        struct cgroup *cg = make_group(0, "kill", 0, 0);
        ASSERT_TRUE(cgroup_is_empty(cg));
        pid_t a = spawn_attached(cg, child_pause);
        pid_t b = spawn_attached(cg, child_pause);
        ASSERT_TRUE(!cgroup_is_empty(cg));
        /* Not reaped yet on purpose: zombies must not count as members. */
        ASSERT_OK(cgroup_kill_all(cg));
        ASSERT_TRUE(cgroup_is_empty(cg));
        int st = wait_status(a);
        ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        st = wait_status(b);
        ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

TEST(cgroup_v1_destroy_removes_dirs)
{
        require_v1();
        struct cgroup *cg = make_group(0, "gone", 32 * MiB, 5);
        char saved[_CG_CTRL_MAX][PATH_MAX];
        size_t n = cg->n;
        ASSERT_TRUE(n >= 2);
        for (size_t i = 0; i < n; i++)
                snprintf(saved[i], PATH_MAX, "%s", cg->h[i].path);
        pid_t pid = spawn_attached(cg, child_pause);
        cgroup_destroy(TAKE_PTR(g_cg[0]));
        for (size_t i = 0; i < n; i++)
                ASSERT_TRUE(!dir_exists(saved[i]));
        int st = wait_status(pid);
        ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

TEST(cgroup_v1_reset_for_reuse)
{
        require_v1();
        struct cgroup *cg = make_group(0, "reuse", 64 * MiB, 10);
        int st = wait_status(spawn_attached(cg, child_eat_200m));
        ASSERT_TRUE(WIFSIGNALED(st));
        st = wait_status(spawn_attached(cg, child_fork_loop));
        ASSERT_TRUE(WIFEXITED(st));
        struct cgroup_usage u;
        ASSERT_OK(cgroup_read_usage(cg, &u));
        ASSERT_TRUE(u.oom_kills >= 1 && u.pids_max_hits >= 1 && u.memory_peak >= 56 * MiB);

        ASSERT_OK(cgroup_reset(cg));
        ASSERT_OK(cgroup_read_usage(cg, &u));
        ASSERT_EQ(u.oom_kills, 0);
        ASSERT_EQ(u.pids_max_hits, 0);
        ASSERT_EQ(u.cpu_ns, 0);
        ASSERT_TRUE(u.memory_peak < 8 * MiB);

        /* The reused group measures the next run only. */
        st = wait_status(spawn_attached(cg, child_eat_16m));
        ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        ASSERT_OK(cgroup_read_usage(cg, &u));
        ASSERT_EQ(u.oom_kills, 0);
        ASSERT_TRUE(u.memory_peak >= 16 * MiB && u.memory_peak < 48 * MiB);

        /* A live group (warm interpreter between requests) resets too. */
        pid_t pid = spawn_attached(cg, child_pause);
        ASSERT_OK(cgroup_reset(cg));
        ASSERT_OK(cgroup_read_usage(cg, &u));
        ASSERT_EQ(u.oom_kills, 0);
        ASSERT_TRUE(u.memory_peak < 16 * MiB);
        ASSERT_OK(cgroup_kill_all(cg));
        wait_status(pid);
}

/* A used jail dies at idle CPU priority (the engine's reaper); its group,
 * reused, must run the next jail at normal priority again. */
TEST(cgroup_v1_cpu_idle_cleared_by_reset)
{
        require_v1();
        struct cgroup *cg = make_group(0, "idle", 64 * MiB, 10);
        const char *cpu = cg_ctrl_dir(cg, CG_CPUQ);
        char p[PATH_MAX];
        uint64_t v;
        if (!cpu || cg_join_path(p, cpu, "cpu.idle") < 0 || access(p, F_OK) != 0) {
                ASSERT_EQ(cgroup_set_cpu_idle(cg, true), -ENOENT);
                SKIP("no cpu.idle (a cpu controller on Linux >= 5.15)");
        }
        ASSERT_OK(read_u64_file(p, &v));
        ASSERT_EQ(v, 0);
        ASSERT_OK(cgroup_set_cpu_idle(cg, true));
        ASSERT_OK(read_u64_file(p, &v));
        ASSERT_EQ(v, 1);
        ASSERT_OK(cgroup_reset(cg));
        ASSERT_OK(read_u64_file(p, &v));
        ASSERT_EQ(v, 0);
        ASSERT_OK(cgroup_set_cpu_idle(cg, true));
        ASSERT_OK(cgroup_set_cpu_idle(cg, false));
        ASSERT_OK(read_u64_file(p, &v));
        ASSERT_EQ(v, 0);
}

/* A resident kernel's next request: one read gives what happened since the
 * last reset (the idle-CPU debt) and restarts the counters from it. */
TEST(cgroup_v1_reset_read_returns_the_counters_it_restarts)
{
        require_v1();
        struct cgroup *cg = make_group(0, "resetread", 64 * MiB, 10);
        int st = wait_status(spawn_attached(cg, child_fork_loop));
        ASSERT_TRUE(WIFEXITED(st));
        struct cgroup_usage before, u;
        ASSERT_OK(cgroup_read_usage(cg, &u));
        ASSERT_OK(cgroup_reset_read(cg, &before));
        ASSERT_TRUE(before.pids_max_hits >= 1 && before.pids_max_hits == u.pids_max_hits);
        ASSERT_TRUE(before.cpu_ns >= u.cpu_ns && before.cpu_ns > 0);
        ASSERT_EQ(before.memory_peak, 0);
        ASSERT_OK(cgroup_read_usage(cg, &u));
        ASSERT_EQ(u.pids_max_hits, 0);
        ASSERT_EQ(u.cpu_ns, 0);
        ASSERT_OK(cgroup_reset_read(cg, &before));
        ASSERT_EQ(before.pids_max_hits, 0);
        ASSERT_OK(cgroup_reset_read(cg, NULL));
        cgroup_destroy(TAKE_PTR(g_cg[0]));
}

TEST(cgroup_v1_attach_errors)
{
        require_v1();
        struct cgroup *cg = make_group(0, "attach", 0, 0);
        ASSERT_EQ(cgroup_attach(cg, 0), -EINVAL);
        ASSERT_EQ(cgroup_attach(cg, -5), -EINVAL);
        /* pid_max is at most 2^22, so this pid cannot exist. */
        ASSERT_EQ(cgroup_attach(cg, 0x7ffffff0), -ESRCH);
}

/* ---- sandbox parent groups (v1) ------------------------------------- */

static bool path_exists(const char *dir, const char *file)
{
        char p[PATH_MAX];
        return cg_join_path(p, dir, file) == 0 && access(p, F_OK) == 0;
}

static void read_str(const char *dir, const char *file, char *buf, size_t len)
{
        char p[PATH_MAX];
        ASSERT_OK(cg_join_path(p, dir, file));
        ASSERT_OK(read_file_small(p, buf, len, NULL));
        buf[strcspn(buf, "\n")] = '\0';
}

TEST(cgroup_v1_parent_holds_children)
{
        require_v1();
        (void)cgroup_root_set_cpu_quota(g_root, 40); /* -EOPNOTSUPP without a cpu hierarchy */
        const struct cgroup_limits plim = { .memory_bytes = 64 * MiB, .pids = 20 };
        ASSERT_OK(cgroup_create_parent(g_root, "sbx", &plim, &g_cg[3]));
        struct cgroup *parent = g_cg[3];
        ASSERT_TRUE(!cgroup_is_nested(parent));
        char buf[64];
        read_str(cg_ctrl_dir(parent, CG_MEMORY), "memory.limit_in_bytes", buf, sizeof(buf));
        ASSERT_STREQ(buf, "67108864");
        read_str(cg_ctrl_dir(parent, CG_PIDS), "pids.max", buf, sizeof(buf));
        ASSERT_STREQ(buf, "20");
        const char *cpuq = cg_ctrl_dir(parent, CG_CPUQ);
        if (cpuq && g_root->cpu_quota_percent) {
                read_str(cpuq, "cpu.cfs_quota_us", buf, sizeof(buf));
                ASSERT_STREQ(buf, "40000"); /* the root's quota, on the parent */
        }

        /* The child's own limits stay; no CPU quota of its own. */
        const struct cgroup_limits clim = { .memory_bytes = 0, .pids = 50 };
        ASSERT_OK(cgroup_create_in(g_root, parent, "x1", &clim, &g_cg[2]));
        struct cgroup *child = g_cg[2];
        ASSERT_TRUE(cgroup_is_nested(child));
        ASSERT_EQ(child->n, parent->n);
        for (size_t i = 0; i < child->n; i++) {
                char want[PATH_MAX];
                snprintf(want, sizeof(want), "%s/x1", parent->h[i].path);
                ASSERT_STREQ(child->h[i].path, want);
        }
        read_str(cg_ctrl_dir(child, CG_PIDS), "pids.max", buf, sizeof(buf));
        ASSERT_STREQ(buf, "50");
        if (cg_ctrl_dir(child, CG_CPUQ)) {
                read_str(cg_ctrl_dir(child, CG_CPUQ), "cpu.cfs_quota_us", buf, sizeof(buf));
                ASSERT_STREQ(buf, "-1");
        }
        /* The parent's memory limit holds for a child without one. */
        int st = wait_status(spawn_attached(child, child_eat_200m));
        ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        st = wait_status(spawn_attached(child, child_eat_16m));
        ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);

        /* Children first; then the parent's directories go too. */
        char ppath[PATH_MAX];
        snprintf(ppath, sizeof(ppath), "%s", parent->h[0].path);
        cgroup_destroy(TAKE_PTR(g_cg[2]));
        ASSERT_TRUE(!path_exists(ppath, "x1"));
        cgroup_destroy(TAKE_PTR(g_cg[3]));
        ASSERT_TRUE(access(ppath, F_OK) < 0 && errno == ENOENT);
}

/* A dead daemon's tree ("<prefix>-<pid>-...", nested groups included) is
 * swept; a live one's and other names stay. */
TEST(cgroup_v1_sweep_stale)
{
        require_v1();
        char dir[PATH_MAX / 2], p[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s", g_root->h[0].path);
        pid_t dead = fork();
        ASSERT_TRUE(dead >= 0);
        if (dead == 0)
                _exit(0);
        wait_status(dead);
        snprintf(p, sizeof(p), "%s/sbxd-%d-1", dir, (int)dead);
        ASSERT_OK(mkdir(p, 0755));
        snprintf(p, sizeof(p), "%s/sbxd-%d-1/s1", dir, (int)dead);
        ASSERT_OK(mkdir(p, 0755));
        snprintf(p, sizeof(p), "%s/sbxd-%d-1/s1/x2", dir, (int)dead);
        ASSERT_OK(mkdir(p, 0755));
        snprintf(p, sizeof(p), "%s/sbxd-%d-1", dir, (int)getpid());
        ASSERT_OK(mkdir(p, 0755));
        snprintf(p, sizeof(p), "%s/other-%d-1", dir, (int)dead);
        ASSERT_OK(mkdir(p, 0755));

        cg_sweep_stale(dir, "sbxd-1-me");
        snprintf(p, sizeof(p), "sbxd-%d-1", (int)dead);
        ASSERT_TRUE(!path_exists(dir, p));
        snprintf(p, sizeof(p), "sbxd-%d-1", (int)getpid());
        ASSERT_TRUE(path_exists(dir, p));
        snprintf(p, sizeof(p), "%s/sbxd-%d-1", dir, (int)getpid());
        rmdir(p);
        snprintf(p, sizeof(p), "other-%d-1", (int)dead);
        ASSERT_TRUE(path_exists(dir, p));
        snprintf(p, sizeof(p), "%s/other-%d-1", dir, (int)dead);
        rmdir(p);
}

/* ---- v2 where it exists (controller-less on the CI machine) ----------- */

TEST(cgroup_v2_forced)
{
        if (geteuid() != 0)
                SKIP("needs root");
        struct cgroup_root *root = NULL;
        int r = cgroup_root_open(root_name(), CGROUP_V2, &root);
        if (r < 0) {
                /* A clean refusal is fine where v2 is absent or read-only. */
                ASSERT_TRUE(r > -4096);
                ASSERT_TRUE(root == NULL);
                SKIP("cgroup v2 unavailable");
        }
        g_root = root;
        atexit(cleanup_groups);
        ASSERT_EQ(cgroup_root_backend(root), CGROUP_V2);
        unsigned have = root->h[0].ctrls;
        fprintf(stderr, "# v2 controllers: %s%s%s\n", have & CG_BIT(CG_MEMORY) ? "memory " : "",
                have & CG_BIT(CG_PIDS) ? "pids " : "", have & CG_BIT(CG_CPU) ? "cpu" : "");

        const struct cgroup_limits lim = { 64 * MiB, 10 };
        struct cgroup *cg = NULL;
        r = cgroup_create(root, "limited", &lim, &cg);
        if (!(have & CG_BIT(CG_MEMORY)) || !(have & CG_BIT(CG_PIDS)))
                ASSERT_EQ(r, -EOPNOTSUPP); /* never silently unlimited */
        else
                ASSERT_OK(r);
        g_cg[1] = cg;

        cg = make_group(0, "plain", 0, 0);
        struct cgroup_usage u;
        int st = wait_status(spawn_attached(cg, child_burn_100ms));
        ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        ASSERT_OK(cgroup_read_usage(cg, &u));
        ASSERT_TRUE(u.cpu_ns >= 95 * 1000000ULL); /* cpu.stat is core, no controller needed */

        pid_t pid = spawn_attached(cg, child_pause);
        ASSERT_TRUE(!cgroup_is_empty(cg));
        ASSERT_OK(cgroup_kill_all(cg)); /* cgroup.kill */
        ASSERT_TRUE(cgroup_is_empty(cg));
        st = wait_status(pid);
        ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        ASSERT_OK(cgroup_reset(cg));
        ASSERT_OK(cgroup_read_usage(cg, &u));
        ASSERT_EQ(u.cpu_ns, 0);

        char saved[PATH_MAX];
        snprintf(saved, sizeof(saved), "%s", cg->h[0].path);
        cgroup_destroy(TAKE_PTR(g_cg[0]));
        ASSERT_TRUE(!dir_exists(saved));
}
