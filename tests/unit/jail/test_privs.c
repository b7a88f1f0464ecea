/* Tests of the fork-safe pieces shared by the jail and the fork-server shim:
 * src/jail/privs.c (privilege drop, rlimits) and src/jail/procfs.c (/proc
 * masking). Each test forks (tap_main) and changes only its own process;
 * they need root and skip otherwise. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/util.h"
#include "jail/jail.h"
#include "jail/privs.h"
#include "jail/procfs.h"
#include "tap.h"

static void require_root(void)
{
        if (geteuid() != 0)
                SKIP("needs root");
}

/* Effective, permitted and inheritable sets, low and high words OR'ed. */
static uint64_t caps_now(void)
{
        struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
        struct __user_cap_data_struct d[2];
        ASSERT_OK(syscall(SYS_capget, &h, d));
        uint64_t all = 0;
        for (int i = 0; i < 2; i++)
                all |= (uint64_t)(d[i].effective | d[i].permitted | d[i].inheritable) << (32 * i);
        return all;
}

TEST(privs_drop_becomes_the_jail_user_with_nothing_left)
{
        require_root();
        gid_t extra = 4242;
        ASSERT_OK(setgroups(1, &extra));
        ASSERT_NE(caps_now(), 0);
        ASSERT_OK(privs_drop(JAIL_UID, JAIL_GID, PRIVS_SETID | PRIVS_SETGROUPS));
        uid_t r, e, s;
        ASSERT_OK(getresuid(&r, &e, &s));
        ASSERT_TRUE(r == JAIL_UID && e == JAIL_UID && s == JAIL_UID);
        gid_t gr, ge, gs;
        ASSERT_OK(getresgid(&gr, &ge, &gs));
        ASSERT_TRUE(gr == JAIL_GID && ge == JAIL_GID && gs == JAIL_GID);
        ASSERT_EQ(getgroups(0, NULL), 0);
        ASSERT_U64_EQ(caps_now(), 0);
        ASSERT_EQ(prctl(PR_CAPBSET_READ, CAP_SYS_ADMIN, 0, 0, 0), 0);
        /* The whole bounding set, up to this kernel's last capability. */
        char last[16] = "";
        FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
        ASSERT_TRUE(f && fgets(last, sizeof(last), f));
        fclose(f);
        for (int cap = 0; cap <= atoi(last); cap++)
                ASSERT_EQ(prctl(PR_CAPBSET_READ, cap, 0, 0, 0), 0);
        ASSERT_EQ(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), 1);
        /* And there is no way back. */
        ASSERT_EQ(setuid(0), -1);
        ASSERT_EQ(errno, EPERM);
}

TEST(privs_drop_without_setid_keeps_the_uid_but_no_capability)
{
        require_root();
        ASSERT_OK(privs_drop(JAIL_UID, JAIL_GID, 0));
        ASSERT_EQ(getuid(), 0);
        ASSERT_U64_EQ(caps_now(), 0);
        ASSERT_EQ(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), 1);
        /* uid 0 without CAP_DAC_OVERRIDE: a 0000 file is closed to us. */
        char path[] = "/tmp/sbx-privs-XXXXXX";
        int fd = mkstemp(path);
        ASSERT_GE(fd, 0);
        close(fd);
        ASSERT_OK(chmod(path, 0));
        ASSERT_EQ(open(path, O_RDONLY | O_CLOEXEC), -1);
        ASSERT_EQ(errno, EACCES);
        unlink(path);
}

TEST(privs_drop_reports_errno)
{
        require_root();
        ASSERT_OK(privs_drop(JAIL_UID, JAIL_GID, PRIVS_SETID | PRIVS_SETGROUPS));
        /* Without CAP_SETUID a second drop to another uid fails cleanly. */
        ASSERT_ERR(privs_drop(1000, 1000, PRIVS_SETID), EPERM);
}

TEST(privs_apply_limits_sets_what_was_asked)
{
        const struct jail_limits l = { .cpu_seconds = 7, .file_bytes = 1 * MiB, .nofile = 33, .data_bytes = 0 };
        struct rlimit before;
        ASSERT_OK(getrlimit(RLIMIT_DATA, &before));
        ASSERT_OK(privs_apply_limits(&l));
        struct rlimit rl;
        ASSERT_OK(getrlimit(RLIMIT_CPU, &rl));
        ASSERT_U64_EQ(rl.rlim_cur, 7);
        ASSERT_U64_EQ(rl.rlim_max, 8);
        ASSERT_OK(getrlimit(RLIMIT_FSIZE, &rl));
        ASSERT_U64_EQ(rl.rlim_cur, 1 * MiB);
        ASSERT_OK(getrlimit(RLIMIT_NOFILE, &rl));
        ASSERT_U64_EQ(rl.rlim_max, 33);
        ASSERT_OK(getrlimit(RLIMIT_CORE, &rl));
        ASSERT_U64_EQ(rl.rlim_max, 0);
        ASSERT_OK(getrlimit(RLIMIT_MSGQUEUE, &rl));
        ASSERT_U64_EQ(rl.rlim_max, 0);
        ASSERT_OK(getrlimit(RLIMIT_DATA, &rl)); /* 0: left alone */
        ASSERT_U64_EQ(rl.rlim_cur, before.rlim_cur);
        /* Raising a hard limit needs a privilege we may not have. */
        if (geteuid() != 0)
                ASSERT_ERR(privs_setrlimit(RLIMIT_NOFILE, 64, 64), EPERM);
        ASSERT_ERR(privs_setrlimit(RLIMIT_NOFILE, 10, 5), EINVAL);
}

/* A fresh procfs in a private mount namespace of this (forked) test. */
static void mount_private_proc(char dir[static 32])
{
        require_root();
        ASSERT_OK(unshare(CLONE_NEWNS));
        ASSERT_OK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL));
        snprintf(dir, 32, "/tmp/sbx-proc-XXXXXX");
        ASSERT_NOT_NULL(mkdtemp(dir));
        ASSERT_OK(mount("proc", dir, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL));
}

TEST(procfs_mask_hides_host_state_and_freezes_sys)
{
        char dir[32], p[PATH_MAX];
        mount_private_proc(dir);
        ASSERT_OK(jail_mask_proc(dir));
        /* Masked entries read as /dev/null. */
        static const char *const masked[] = { "kallsyms", "keys", "timer_list", "sched_debug" };
        for (size_t i = 0; i < ARRAY_SIZE(masked); i++) {
                snprintf(p, sizeof(p), "%s/%s", dir, masked[i]);
                if (access(p, F_OK) < 0)
                        continue;
                char buf[16];
                size_t len = 99;
                ASSERT_OK(read_file_small(p, buf, sizeof(buf), &len));
                ASSERT_EQ(len, 0);
                struct stat st;
                ASSERT_OK(stat(p, &st));
                ASSERT_TRUE(S_ISCHR(st.st_mode));
        }
        /* Unmasked entries still work. */
        char buf[64];
        snprintf(p, sizeof(p), "%s/self/stat", dir);
        ASSERT_OK(read_file_small(p, buf, sizeof(buf), NULL));
        ASSERT_TRUE(buf[0] >= '1' && buf[0] <= '9');
        /* /proc/sys is read-only even for root. */
        snprintf(p, sizeof(p), "%s/sys/kernel/hostname", dir);
        ASSERT_ERR(write_string_file(p, "x"), EROFS);
        umount2(dir, MNT_DETACH);
        rmdir(dir);
}

TEST(procfs_mask_and_bind_ro_report_errors)
{
        ASSERT_ERR(jail_bind_ro("/nonexistent-src", "/nonexistent-dst", false), ENOENT);
        if (geteuid() == 0) {
                /* A directory that is no procfs: nothing to mask, and no sys
                 * to bind. */
                char dir[] = "/tmp/sbx-noproc-XXXXXX";
                ASSERT_NOT_NULL(mkdtemp(dir));
                ASSERT_ERR(jail_mask_proc(dir), ENOENT);
                rmdir(dir);
        }
}
