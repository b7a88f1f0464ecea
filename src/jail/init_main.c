/* sandboxd-init: pid 1 of a jail once guest code can run. The jail's cloned
 * child (a copy of the daemon: its heap holds the API key and other tenants'
 * env) builds the jail, forks the workload, drops every privilege, sets the
 * seccomp filter, and then execs this small binary, so that nothing of the
 * daemon's memory stays mapped in the jail while guest code runs.
 *
 * Usage (by the jail only): init WORKLOAD_PID, with fd 1 the workload's
 * gate: the workload runs no guest code before it is closed, which happens
 * here once we are not dumpable. It only reaps: when the
 * workload exits, it exits with the workload's status (128+N for signal N),
 * and the kernel ends the pid namespace, every escaped process included.
 * No privilege, no fd, not dumpable.
 *
 * Usage "launch" (a deferred jail's workload, confined, execs us so that
 * no copy of the daemon waits in the jail): says "ready" on fd 4 (the
 * report pipe), reads the command from fd 5 (jail/command.c) and execs it,
 * reporting a failure on fd 4 as the jail's child would. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/internal.h"

static int report(int step, int err)
{
        struct child_report rep = { step, err };
        return write(4, &rep, sizeof(rep)) == (ssize_t)sizeof(rep) ? 0 : -1;
}

static int launch(void)
{
        const char *argv[JAIL_MAX_ARGS + 1], *envp[JAIL_MAX_ENV + 1], *cwd = NULL;
        if (report(STEP_COMMAND, 0) < 0)
                return 127;
        int r = jail_cmd_read(5, argv, envp, &cwd);
        close(5);
        if (r == -EIO)
                return 127; /* dropped unused: nothing runs */
        if (r < 0) {
                report(STEP_COMMAND, -r);
                return 127;
        }
        if (chdir(cwd ? cwd : JAIL_WORKSPACE) < 0) {
                report(STEP_CHDIR, errno);
                return 127;
        }
        /* The daemon sees EOF on the report pipe once the exec succeeded. */
        if (fcntl(4, F_SETFD, FD_CLOEXEC) == 0)
                execve(argv[0], (char *const *)argv, (char *const *)envp);
        report(STEP_EXEC, errno);
        return 127;
}

int main(int argc, char **argv)
{
        if (argc == 1 && strcmp(argv[0], JAIL_LAUNCHER_ARG0) == 0)
                return launch();
        /* exec made us dumpable again; nothing may read or trace pid 1. */
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return 255;
        prctl(PR_SET_NAME, "init", 0, 0, 0);
        syscall(SYS_close_range, 0U, ~0U, 0U); /* and so opens the gate */
        char *end = NULL;
        long workload = argc == 2 ? strtol(argv[1], &end, 10) : 0;
        if (workload <= 1 || !end || *end)
                return 255;
        for (;;) {
                int status;
                pid_t p = waitpid(-1, &status, __WALL);
                if (p == (pid_t)workload) {
                        if (WIFEXITED(status))
                                return WEXITSTATUS(status);
                        return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 255;
                }
                if (p < 0 && errno != EINTR)
                        return 255;
        }
}
