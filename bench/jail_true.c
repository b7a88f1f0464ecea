/* Times a jailed /bin/true through the daemon's own jail code (jail_spawn +
 * reap, cgroups included) against the same under bwrap and bare, in one
 * run. Prints "name p50_ms p99_ms" lines for bench/run.py. Needs root. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "jail/ids.h"
#include "jail/jail.h"
#include "stats.h"

static uint64_t run_argv(char *const argv[])
{
        uint64_t t0 = now_ns();
        pid_t pid = fork();
        if (pid == 0) {
                int nul = open("/dev/null", O_RDWR);
                dup2(nul, 0);
                dup2(nul, 1);
                dup2(nul, 2);
                char *const envp[] = { "PATH=/usr/bin:/bin", NULL };
                execve(argv[0], argv, envp);
                _exit(127);
        }
        waitpid(pid, NULL, 0);
        return now_ns() - t0;
}

static uint64_t run_jail(struct jail_ctx *ctx, int i)
{
        char name[64];
        snprintf(name, sizeof(name), "bench%d", i);
        int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
        struct jail_spec spec = {
                .argv = { "/bin/true" },
                .envp = { "PATH=/usr/bin:/bin" },
                .cgroup_name = name,
                .limits = { .memory_bytes = 256 * MiB, .pids = 64, .cpu_seconds = 5, .file_bytes = 1 * MiB,
                            .nofile = 256, .tmp_bytes = 16 * MiB, .workspace_bytes = 16 * MiB },
                .stdout_fd = nul, .stderr_fd = nul, .ctl_fd = -1, .replay_fd = -1,
        };
        struct jail_proc p;
        struct err why = { 0 };
        uint64_t t0 = now_ns();
        if (jail_spawn(ctx, &spec, &p, &why) < 0) {
                fprintf(stderr, "%s\n", why.msg);
                exit(1);
        }
        jail_reap(&p, NULL);
        uint64_t t = now_ns() - t0;
        jail_proc_release(&p);
        close(nul);
        return t;
}

int main(int argc, char **argv)
{
        int n = argc > 1 ? atoi(argv[1]) : 200;
        const char *kernels = argc > 2 ? argv[2] : "src/runtimes/kernels";
        if (n < 10)
                n = 10;
        char run_dir[] = "/tmp/sbx-bench-XXXXXX";
        if (!mkdtemp(run_dir))
                return 1;
        struct jail_ctx ctx;
        struct err why = { 0 };
        if (jail_ctx_init(&ctx, run_dir, kernels, -1, &why) < 0 ||
            jail_ctx_set_ids(&ctx, JAIL_IDS_DEFAULT_BASE, JAIL_IDS_DEFAULT_COUNT, &why) < 0) {
                fprintf(stderr, "%s\n", why.msg);
                return 1;
        }
        /* As the daemon runs: pid 1 execs the init binary built next to it. */
        if (jail_ctx_set_init_dir(&ctx, argc > 3 ? argv[3] : "build") < 0)
                fprintf(stderr, "no %s: pid 1 stays in-process\n", JAIL_INIT_BIN);
        uint64_t *a = calloc((size_t)n, sizeof(*a)), *b = calloc((size_t)n, sizeof(*b)),
                 *c = calloc((size_t)n, sizeof(*c));
        char *const bare[] = { "/bin/true", NULL };
        char *const bwrap[] = { "/usr/bin/bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
                                "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink",
                                "usr/lib64", "/lib64", "--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev",
                                "/dev", "--tmpfs", "/tmp", "/bin/true", NULL };
        for (int i = 0; i < 10; i++) { /* warm-up */
                run_jail(&ctx, i);
                run_argv(bwrap);
        }
        /* Interleave so machine noise hits all three alike. */
        for (int i = 0; i < n; i++) {
                a[i] = run_jail(&ctx, i);
                b[i] = run_argv(bwrap);
                c[i] = run_argv(bare);
        }
        report("jail_true", a, n);
        report("bwrap_true", b, n);
        report("bare_true", c, n);
        jail_ctx_done(&ctx);
        rmdir(run_dir);
        free(a);
        free(b);
        free(c);
        return 0;
}
