#include "jail/seccomp.h"

#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "base/util.h"

/* Default-allow deny-list. The jail already drops every capability, so most
 * of these would fail anyway; the filter exists so that a kernel bug reachable
 * through one of these large, rarely needed interfaces (new mount API,
 * io_uring, bpf, keyrings, user namespaces, ...) is not reachable at all from
 * untrusted code. Names unknown to the installed libseccomp are skipped by
 * name and covered by deny_raw_x86_64 below where it matters.
 *
 * seccomp() itself is deliberately *not* denied: a filter a job installs is
 * ANDed with ours (the kernel applies the most restrictive verdict), so it can
 * only reduce the job's own rights, and runtimes such as chromium or
 * sandboxing test suites install filters of their own. */
static const char *const deny_eperm[] = {
        /* mount table and root changes, old and new mount API */
        "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount",
        "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
        /* other processes' memory and file descriptors */
        "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
        /* leaving the jail's namespaces (clone is filtered by flag below) */
        "unshare", "setns",
        /* kernel keyrings are not namespaced */
        "keyctl", "add_key", "request_key",
        /* large kernel attack surface with a long CVE history */
        "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
        "io_uring_enter", "io_uring_register", "modify_ldt",
        /* whole-machine state */
        "kexec_load", "kexec_file_load", "init_module", "finit_module",
        "delete_module", "reboot", "swapon", "swapoff", "acct", "quotactl",
        "quotactl_fd", "settimeofday", "clock_settime", "clock_adjtime",
        "adjtimex", "syslog", "vhangup", "iopl", "ioperm", "nfsservctl",
        "uselib", "sysfs", "lookup_dcookie",
        /* file handles bypass path-based checks (the "shocker" escape) */
        "name_to_handle_at", "open_by_handle_at",
        /* global filesystem event monitoring, secret memory */
        "fanotify_init", "memfd_secret",
};

/* Syscalls newer than libseccomp 2.5.4's tables, by raw x86_64 number. */
static const struct {
        const char *name;
        int nr;
} deny_raw_x86_64[] = {
        { "open_tree_attr", 467 }, /* Linux 6.15: open_tree() plus mount_setattr() */
};

static const uint64_t ns_clone_flags[] = {
        CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
        CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP,
};

/* TIOCSTI pushes input into the controlling terminal (escape to the parent's
 * shell); TIOCLINUX can do the same through the console selection buffer. */
static const uint64_t deny_ioctls[] = { TIOCSTI, TIOCLINUX };

static void seccomp_releasep(scmp_filter_ctx *ctx)
{
        if (*ctx)
                seccomp_release(*ctx);
}

static int deny_syscall(scmp_filter_ctx ctx, const char *name)
{
        int nr = seccomp_syscall_resolve_name(name);
        if (nr == __NR_SCMP_ERROR)
                return 0; /* unknown to this libseccomp */
        int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
        /* Negative numbers are pseudo-syscalls that do not exist natively. */
        if (r == -EDOM && nr < 0)
                return 0;
        return r;
}

static int add_deny_list(scmp_filter_ctx ctx)
{
        for (size_t i = 0; i < ARRAY_SIZE(deny_eperm); i++) {
                int r = deny_syscall(ctx, deny_eperm[i]);
                if (r < 0)
                        return r;
        }
        if (seccomp_arch_native() != SCMP_ARCH_X86_64)
                return 0;
        for (size_t i = 0; i < ARRAY_SIZE(deny_raw_x86_64); i++) {
                if (seccomp_syscall_resolve_name(deny_raw_x86_64[i].name) != __NR_SCMP_ERROR)
                        continue; /* known by name, already handled */
                int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), deny_raw_x86_64[i].nr, 0);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* One rule per flag: libseccomp ORs rules, and a single masked compare per
 * rule is all it supports on one argument. */
static int add_clone_rules(scmp_filter_ctx ctx)
{
        for (size_t i = 0; i < ARRAY_SIZE(ns_clone_flags); i++) {
                uint64_t f = ns_clone_flags[i];
                int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                         SCMP_A0(SCMP_CMP_MASKED_EQ, f, f));
                if (r < 0)
                        return r;
        }
        /* clone3 passes its flags in memory, which BPF cannot inspect. ENOSYS
         * makes glibc (2.34+) fall back to clone(), where the rules above
         * apply. */
        return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
}

/* pidfd_open(1) would hand the job a handle on the jail's init. Signals and
 * ptrace-style access through it already fail (init has another uid and its
 * own Landlock domain), but the handle itself is refused too. pid_t is 32
 * bits: compare only the low half, as the kernel truncates. */
static int add_pidfd_rules(scmp_filter_ctx ctx)
{
        return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(pidfd_open), 1,
                                SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffULL, 1));
}

static int add_ioctl_rules(scmp_filter_ctx ctx)
{
        for (size_t i = 0; i < ARRAY_SIZE(deny_ioctls); i++) {
                /* The kernel truncates cmd to 32 bits, so compare only the low
                 * half: garbage in the upper half must not slip past. */
                int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                                         SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, deny_ioctls[i]));
                if (r < 0)
                        return r;
        }
        return 0;
}

/* personality() may only query (0xffffffff) or set PER_LINUX (0); anything
 * else could e.g. set ADDR_NO_RANDOMIZE or READ_IMPLIES_EXEC for an exec'd
 * child. libseccomp allows one comparison per argument per rule, so "x is
 * neither all-zeros nor all-ones" is built as a union: such an x has, going
 * round the 32 bits cyclically, some set bit followed by a clear one. Values
 * with upper bits set (ignored by the kernel) are denied outright. */
static int add_personality_rules(scmp_filter_ctx ctx)
{
        int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
                                 SCMP_A0(SCMP_CMP_GT, 0xffffffffULL));
        for (unsigned i = 0; r >= 0 && i < 32; i++) {
                uint64_t set = 1ULL << i, clear = 1ULL << ((i + 1) % 32);
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
                                     SCMP_A0(SCMP_CMP_MASKED_EQ, set | clear, set));
        }
        return r;
}

/* Address families a job may open. Without network only AF_UNIX (the netns
 * is shared between jobs, so even loopback AF_INET would let them talk).
 * With network, the families ordinary programs need: netlink route sockets
 * back getifaddrs() and getaddrinfo(AI_ADDRCONFIG). Everything else (AF_ALG,
 * AF_VSOCK, AF_TIPC, AF_PACKET, ...) is rarely used attack surface. */
static bool family_allowed(uint64_t fam, bool allow_inet)
{
        if (fam == AF_UNIX)
                return true;
        return allow_inet && (fam == AF_INET || fam == AF_INET6 || fam == AF_NETLINK);
}

static int add_family_rules_for(scmp_filter_ctx ctx, int nr, bool allow_inet)
{
        const uint32_t act = SCMP_ACT_ERRNO(EAFNOSUPPORT);
        if (!allow_inet)
                return seccomp_rule_add(ctx, act, nr, 1, SCMP_A0(SCMP_CMP_NE, AF_UNIX));
        /* No range compares on one argument: deny each small disallowed
         * family, then everything from AF_NETLINK + 1 upwards. The compare
         * is on all 64 bits, so upper-half garbage can only cause a denial. */
        for (uint64_t fam = 0; fam < AF_NETLINK; fam++) {
                if (family_allowed(fam, allow_inet))
                        continue;
                int r = seccomp_rule_add(ctx, act, nr, 1, SCMP_A0(SCMP_CMP_EQ, fam));
                if (r < 0)
                        return r;
        }
        return seccomp_rule_add(ctx, act, nr, 1, SCMP_A0(SCMP_CMP_GT, AF_NETLINK));
}

static int add_socket_rules(scmp_filter_ctx ctx, bool allow_inet)
{
        int r = add_family_rules_for(ctx, SCMP_SYS(socket), allow_inet);
        if (r < 0)
                return r;
        return add_family_rules_for(ctx, SCMP_SYS(socketpair), allow_inet);
}

static int set_attributes(scmp_filter_ctx ctx)
{
        /* The jail sets no_new_privs itself, right before applying. */
        int r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
        if (r < 0)
                return r;
        /* Only the native ABI is in the filter; i386 (int 0x80) and x32
         * syscalls would have different numbers and so bypass every rule, so
         * they kill the process. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r < 0)
                return r;
        /* A binary tree over syscall numbers keeps the per-syscall cost flat
         * with ~60 rules; it only changes the BPF layout, not the verdicts. */
        return seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
}

static int build_policy(scmp_filter_ctx ctx, bool allow_inet)
{
        int r = set_attributes(ctx);
        if (r >= 0)
                r = add_deny_list(ctx);
        if (r >= 0)
                r = add_clone_rules(ctx);
        if (r >= 0)
                r = add_pidfd_rules(ctx);
        if (r >= 0)
                r = add_ioctl_rules(ctx);
        if (r >= 0)
                r = add_personality_rules(ctx);
        if (r >= 0)
                r = add_socket_rules(ctx, allow_inet);
        return r < 0 ? r : 0;
}

/* libseccomp 2.5.4 can only export to an fd (seccomp_export_bpf_mem is 2.6),
 * so go through an anonymous memfd and read the program back. */
static int export_bpf(scmp_filter_ctx ctx, struct sock_filter **ret, unsigned short *ret_len)
{
        _cleanup_close_ int fd = memfd_create("sandboxd-seccomp", MFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        int r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return r;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        size_t size = (size_t)st.st_size;
        if (size == 0 || size % sizeof(struct sock_filter) != 0 ||
            size / sizeof(struct sock_filter) > BPF_MAXINSNS)
                return -E2BIG;
        _cleanup_free_ struct sock_filter *insns = malloc(size);
        if (!insns)
                return -ENOMEM;
        ssize_t n = pread(fd, insns, size, 0);
        if (n < 0)
                return -errno;
        if ((size_t)n != size)
                return -EIO;
        *ret_len = (unsigned short)(size / sizeof(struct sock_filter));
        *ret = TAKE_PTR(insns);
        return 0;
}

int seccomp_prog_build(bool allow_inet, struct seccomp_prog **ret)
{
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return -ENOMEM;
        int r = build_policy(ctx, allow_inet);
        if (r < 0)
                return r;
        _cleanup_free_ struct seccomp_prog *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        r = export_bpf(ctx, &p->fprog.filter, &p->fprog.len);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}

void seccomp_prog_free(struct seccomp_prog *p)
{
        if (!p)
                return;
        free(p->fprog.filter);
        free(p);
}

int seccomp_prog_apply(const struct seccomp_prog *p)
{
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p->fprog, 0, 0) < 0)
                return -errno;
        return 0;
}
