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
 * No privilege, no fd, not dumpable. */
#include <errno.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
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
