#include "jail/privs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail/jail.h"

/* Raw set*id system calls. glibc's wrappers change the ids of every thread
 * of the process (__nptl_setxid) using the thread list copied from the
 * daemon: in a child made by a raw clone() those threads do not exist, and
 * one that was inside pthread_create() at clone time makes the wrapper wait
 * for it forever (seen as a template start hanging at daemon start-up,
 * holding the template lock). The child has exactly one thread, so the
 * per-thread system call is the right one. */
static int sys_setgroups_none(void)
{
        return syscall(SYS_setgroups, 0, NULL) < 0 ? -errno : 0;
}

static int sys_setresgid(gid_t g)
{
        return syscall(SYS_setresgid, g, g, g) < 0 ? -errno : 0;
}

static int sys_setresuid(uid_t u)
{
        return syscall(SYS_setresuid, u, u, u) < 0 ? -errno : 0;
}

static int capset_zero(void)
{
        struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
        struct __user_cap_data_struct d[2] = { { 0 } };
        return syscall(SYS_capset, &h, d) < 0 ? -errno : 0;
}

static int sys_prctl(int option, unsigned long arg)
{
        return prctl(option, arg, 0, 0, 0) < 0 ? -errno : 0;
}

int privs_drop(uid_t uid, gid_t gid, unsigned flags)
{
        int r;
        /* Capabilities are numbered without gaps: EINVAL is the first past
         * this kernel's last one. */
        for (int cap = 0; cap <= 63; cap++) {
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
                        continue;
                if (errno == EINVAL)
                        break;
                return -errno;
        }
        if ((r = sys_prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)) < 0)
                return r;
        if (flags & PRIVS_SETID) {
                if ((flags & PRIVS_SETGROUPS) && (r = sys_setgroups_none()) < 0)
                        return r;
                if ((r = sys_setresgid(gid)) < 0 || (r = sys_setresuid(uid)) < 0)
                        return r;
        }
        if ((r = capset_zero()) < 0)
                return r;
        return sys_prctl(PR_SET_NO_NEW_PRIVS, 1);
}

/* "INNER HOST 1\n" without stdio. */
static size_t format_map(char *buf, uid_t inner, uid_t host)
{
        char tmp[24];
        size_t n = 0;
        uid_t v[2] = { inner, host };
        for (int i = 0; i < 2; i++) {
                size_t k = 0;
                do
                        tmp[k++] = (char)('0' + v[i] % 10);
                while ((v[i] /= 10) && k < sizeof(tmp));
                while (k)
                        buf[n++] = tmp[--k];
                buf[n++] = ' ';
        }
        buf[n++] = '1';
        buf[n++] = '\n';
        return n;
}

static int write_proc_self(const char *name, const char *text, size_t len)
{
        int fd = open(name, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = write(fd, text, len);
        int r = n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
        close(fd);
        return r;
}

int privs_enter_userns(uid_t host_id, uid_t inner_id)
{
        char map[64];
        int r;
        if ((r = sys_setgroups_none()) < 0 || (r = sys_setresgid(host_id)) < 0 || (r = sys_setresuid(host_id)) < 0)
                return r;
        /* Changing ids made us non-dumpable, which hands our /proc files to
         * root: uid_map could then not be written. Dumpable only for the
         * writes: until it execs, this process is a copy of the daemon. */
        if ((r = sys_prctl(PR_SET_DUMPABLE, 1)) < 0)
                return r;
        if (unshare(CLONE_NEWUSER) < 0)
                return -errno;
        size_t n = format_map(map, inner_id, host_id);
        if ((r = write_proc_self("/proc/self/uid_map", map, n)) < 0 ||
            (r = write_proc_self("/proc/self/setgroups", "deny", 4)) < 0 ||
            (r = write_proc_self("/proc/self/gid_map", map, n)) < 0)
                return r;
        return sys_prctl(PR_SET_DUMPABLE, 0);
}

int privs_become_root(void)
{
        int r;
        if ((r = sys_setgroups_none()) < 0 || (r = sys_setresgid(0)) < 0)
                return r;
        return sys_setresuid(0);
}

int privs_setrlimit(int resource, uint64_t soft, uint64_t hard)
{
        struct rlimit rl = { soft, hard };
        return setrlimit(resource, &rl) < 0 ? -errno : 0;
}

int privs_apply_limits(const struct jail_limits *l)
{
        int r = 0;
        if (l->cpu_seconds && (r = privs_setrlimit(RLIMIT_CPU, l->cpu_seconds, l->cpu_seconds + 1)) < 0)
                return r;
        if (l->file_bytes && (r = privs_setrlimit(RLIMIT_FSIZE, l->file_bytes, l->file_bytes)) < 0)
                return r;
        if (l->nofile && (r = privs_setrlimit(RLIMIT_NOFILE, l->nofile, l->nofile)) < 0)
                return r;
        if (l->data_bytes && (r = privs_setrlimit(RLIMIT_DATA, l->data_bytes, l->data_bytes)) < 0)
                return r;
        if ((r = privs_setrlimit(RLIMIT_CORE, 0, 0)) < 0)
                return r;
        return privs_setrlimit(RLIMIT_MSGQUEUE, 0, 0);
}
