/* Shared between the jail's own files (jail.c: parent side; init.c: the
 * cloned child and the jail's init; mount.c: the jail's file system).
 * Not for use outside src/jail/.
 *
 * Everything the child runs is prepared before clone() and must not
 * allocate or use stdio: another daemon thread may hold the malloc or a
 * stdio lock at clone time. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "jail/jail.h"

/* Steps reported by a failing child, so the daemon can say which one broke. */
enum jail_step {
        STEP_SYNC, STEP_NETNS, STEP_HOSTNAME, STEP_PRIVATE, STEP_ROOT_TMPFS, STEP_USR,
        STEP_ETC, STEP_TMP, STEP_WORKSPACE, STEP_KERNELS, STEP_DEV, STEP_PROC,
        STEP_PIVOT, STEP_RO_ROOT, STEP_FORK, STEP_FDS, STEP_RLIMIT, STEP_PRIVS,
        STEP_LANDLOCK, STEP_SECCOMP, STEP_CHDIR, STEP_EXEC, STEP_TTY, STEP_BINDS, STEP_COMMAND, _STEP_MAX
};

/* What a failing child writes on the report pipe before _exit(127). A
 * deferred jail's workload also writes { STEP_COMMAND, 0 } once it is
 * confined and waits for its command: "ready", not a failure. */
struct child_report {
        int step;
        int err;
};

#define PATHLEN 4200

/* Everything the child needs, prepared before clone(). */
struct child_args {
        const struct jail_ctx *ctx;
        const struct jail_spec *spec;
        int sync_fd;   /* read end: parent says "go" after cgroup attach / maps */
        int report_fd; /* write end: child reports failure; EOF means exec'd */
        int devnull_fd;
        int replay_fd;  /* init's end of the replay socket, or -1 */
        uid_t host_id;  /* owner of the jail user's files, as the child sees it: the
                         * host id (root mode), JAIL_UID (rootless) */
        int sysuser_fd; /* the jail's /proc/sys/user before it is made read-only, or -1 */
        int cmd_fd;     /* spec->deferred: read end of the command pipe, else -1 */
        int launcher_fd; /* the workload's JAIL_INIT_BIN (deferred jails), or -1 */
        char root[PATHLEN];
        char tmp_opts[128];
        char ws_opts[128];
};

/* Reports (step, err) to the daemon and exits the child. */
__attribute__((noreturn)) void jail_child_fail(const struct child_args *a, int step, int err);

/* For calls that return -1 and set errno. */
#define CHECK(a, step, expr)                             \
        do {                                             \
                if ((expr) < 0)                          \
                        jail_child_fail(a, step, errno); \
        } while (0)

/* For calls that return 0 or -errno. */
#define CHECK_R(a, step, expr)                         \
        do {                                           \
                int _r = (expr);                       \
                if (_r < 0)                            \
                        jail_child_fail(a, step, -_r); \
        } while (0)

/* Joins two path pieces into buf (PATHLEN bytes) without allocating; an
 * over-long result is the empty string, which every later call rejects. */
static inline const char *path_join(char *buf, const char *a, const char *b)
{
        size_t la = strlen(a), lb = strlen(b);
        if (la + lb + 2 > PATHLEN) {
                buf[0] = '\0';
                return buf;
        }
        memcpy(buf, a, la);
        buf[la] = '/';
        memcpy(buf + la + 1, b, lb + 1);
        return buf;
}

/* mount.c: builds the jail's root on a->root and pivots into it. */
void jail_setup_root(const struct child_args *a);
/* Paths of the replay overlay, relative to the new root. /.sbx is 0700
 * root-owned, so the jail user can reach neither the real workspace nor the
 * overlay layers directly while state is being replayed. */
#define REPLAY_DIR "/.sbx"

/* mount.c, in the jail's mount namespace after replay: swaps the real
 * workspace in for the replay overlay. 0 or -errno. */
int jail_swap_in_real_workspace(void);

/* init.c: the cloned child's whole life (never returns). */
__attribute__((noreturn)) void jail_child_main(struct child_args *a);
/* init.c: finds the daemon's argv/environ area, once, for the child to blank. */
void jail_find_host_strings(void);

/* jail.c: clone(flags) with a pidfd, from this thread with its effective
 * uid set to owner for the call unless owner is (uid_t)-1 (template jails:
 * their user namespace is owned by that id). Returns as clone does. */
pid_t jail_clone_as(unsigned long flags, uid_t owner, int *pidfd);
/* spawner.c: clones the jail's child in the spawner (CLONE_PARENT: the
 * caller's child all the same) with flags (jail_spawn's) and, unless owner
 * is (uid_t)-1, that effective uid; the child runs jail_child_main on a
 * copy of a. Returns the pid with *pidfd set, -ENOTCONN when there is no
 * spawner (the caller clones itself), or another -errno of the clone. */
pid_t jail_spawner_clone(struct jail_ctx *ctx, unsigned long flags, uid_t owner, const struct child_args *a,
                         int *pidfd);
/* spawner.c: ends the spawner (jail_ctx_done). */
void jail_spawner_stop(struct jail_ctx *ctx);
/* argv[0] that makes JAIL_INIT_BIN a deferred jail's launcher: fd 4 the
 * report pipe, fd 5 the command pipe (init_main.c). */
#define JAIL_LAUNCHER_ARG0 "launch"

/* command.c: a deferred jail's command (argv, envp, cwd) on the wire. At
 * most this many bytes of strings (the kernel's own exec limit is lower). */
#define JAIL_CMD_MAX (4u << 20)
/* Daemon side: the message in a malloc'd buffer. -E2BIG: no argv, or
 * more than JAIL_MAX_ARGS / JAIL_MAX_ENV / JAIL_CMD_MAX. */
int jail_cmd_encode(const char *const *argv, const char *const *envp, const char *cwd, char **ret,
                    size_t *ret_len);
/* Splits a message body into argv (argc + 1 slots, NULL-terminated), envp
 * (envc + 1) and cwd (NULL for ""); the strings point into body. Pure:
 * -E2BIG or -EPROTO for a body that is not exactly those strings. */
int jail_cmd_decode(const char *body, size_t len, uint32_t argc, uint32_t envc, const char **argv,
                    const char **envp, const char **ret_cwd);
/* The workload's side: reads one message from fd into fresh anonymous
 * pages (no malloc) and decodes it. 0 or -errno. */
int jail_cmd_read(int fd, const char **argv, const char **envp, const char **ret_cwd);
