/* The jail's syscall allowlist, reviewed one syscall at a time against the
 * x86_64 syscall table of Linux 6.18 (arch/x86/entry/syscalls/syscall_64.tbl,
 * numbers 0-469). A syscall is here because bash, coreutils, the four
 * language runtimes (CPython, Perl, Node.js, Ruby), the jail's terminal
 * support or the fork-server shim need it, and its kernel side is either
 * namespaced by the jail (pid, mount, ipc, uts, net, cgroup) or only acts on
 * the caller's own process, files and memory.
 *
 * Not here, and filtered by argument in seccomp.c: clone/clone3, ioctl,
 * personality, pidfd_open, socket/socketpair, the chmod family and every
 * call that creates a file with a mode (set-id bits), setxattr.
 *
 * Everything else, including every syscall added after 6.18 and the ones
 * this review left out on purpose (listmount, statmount, lsm_*, uretprobe,
 * *xattrat, file_getattr/file_setattr, process_madvise, vmsplice,
 * remap_file_pages, NUMA page migration, the old i386-era calls), gets
 * ENOSYS: a program sees an old kernel, never an unreviewed interface. */
#include "jail/seccomp_table.h"

#include <seccomp.h>

#include "base/util.h"

#define N(s) { #s, 0 }
#define RAW(s, nr) { #s, nr } /* newer than libseccomp 2.5.4's table */
#define GROUP(why, list) { why, list, ARRAY_SIZE(list) }

/* File descriptors and plain I/O on what the process already holds. */
static const struct sc_name fd_io[] = {
        N(read), N(write), N(readv), N(writev), N(pread64), N(pwrite64), N(preadv),
        N(pwritev), N(preadv2), N(pwritev2), N(lseek), N(close), N(close_range), N(dup),
        N(dup2), N(dup3), N(fcntl), N(flock), N(fsync), N(fdatasync), N(sync), N(syncfs),
        N(sync_file_range), N(fallocate), N(ftruncate), N(sendfile), N(copy_file_range),
        N(splice), N(tee), N(fadvise64), N(readahead),
};

/* Path-based file system calls: the jail's mounts (read-only root, nosuid
 * workspace and /tmp), Landlock and the uid decide what they reach. Calls
 * that take a mode are in seccomp.c (set-id bits). */
static const struct sc_name paths[] = {
        N(stat), N(fstat), N(lstat), N(newfstatat), N(statx), N(access), N(faccessat),
        N(faccessat2), N(readlink), N(readlinkat), N(getdents), N(getdents64), N(getcwd),
        N(chdir), N(fchdir), N(rename), N(renameat), N(renameat2), N(rmdir), N(link),
        N(linkat), N(unlink), N(unlinkat), N(symlink), N(symlinkat), N(chown), N(fchown),
        N(lchown), N(fchownat), N(umask), N(utime), N(utimes), N(utimensat), N(futimesat),
        N(statfs), N(fstatfs), N(truncate),
        /* reading and removing extended attributes; setting is refused */
        N(getxattr), N(lgetxattr), N(fgetxattr), N(listxattr), N(llistxattr),
        N(flistxattr), N(removexattr), N(lremovexattr), N(fremovexattr),
        /* file change notification (per-user instance limits) */
        N(inotify_init), N(inotify_init1), N(inotify_add_watch), N(inotify_rm_watch),
};

/* The process's own address space. mlock is bounded by RLIMIT_MEMLOCK. */
static const struct sc_name memory[] = {
        N(brk), N(mmap), N(munmap), N(mprotect), N(mremap), N(msync), N(mincore),
        N(madvise), N(mlock), N(mlock2), N(munlock), N(mlockall), N(munlockall),
        N(pkey_mprotect), N(pkey_alloc), N(pkey_free), N(membarrier), N(memfd_create),
        N(get_mempolicy), N(set_mempolicy), N(mbind),
        RAW(map_shadow_stack, 453), /* CET user shadow stacks (glibc 2.39+) */
        RAW(mseal, 462),            /* sealing only removes rights */
};

/* Threads, futexes, scheduling of the caller's own tasks (the cgroup caps
 * CPU; raising priority needs CAP_SYS_NICE, which the jail has not). */
static const struct sc_name threads[] = {
        N(futex), N(futex_waitv), N(futex_wake), N(futex_wait), N(futex_requeue),
        N(set_robust_list), N(get_robust_list), N(set_tid_address), N(rseq),
        N(arch_prctl), N(gettid), N(sched_yield), N(sched_getaffinity),
        N(sched_setaffinity), N(sched_getparam), N(sched_setparam), N(sched_getscheduler),
        N(sched_setscheduler), N(sched_get_priority_max), N(sched_get_priority_min),
        N(sched_rr_get_interval), N(sched_setattr), N(sched_getattr), N(getcpu),
        N(getpriority), N(setpriority), N(ioprio_get), N(ioprio_set),
};

/* Time and timers (setting clocks is refused in the EPERM list). */
static const struct sc_name timers[] = {
        N(nanosleep), N(clock_nanosleep), N(clock_gettime), N(clock_getres),
        N(gettimeofday), N(time), N(times), N(getrusage), N(getitimer), N(setitimer),
        N(alarm), N(pause), N(timer_create), N(timer_settime), N(timer_gettime),
        N(timer_getoverrun), N(timer_delete), N(timerfd_create), N(timerfd_settime),
        N(timerfd_gettime),
};

/* Processes and signals inside the jail's pid namespace (clone is filtered
 * by flag in seccomp.c). Landlock's signal scope and the uid keep signals
 * inside the jail. */
static const struct sc_name processes[] = {
        N(fork), N(vfork), N(execve), N(execveat), N(exit), N(exit_group), N(wait4),
        N(waitid), N(kill), N(tkill), N(tgkill), N(rt_sigaction), N(rt_sigprocmask),
        N(rt_sigreturn), N(rt_sigpending), N(rt_sigtimedwait), N(rt_sigqueueinfo),
        N(rt_tgsigqueueinfo), N(rt_sigsuspend), N(sigaltstack), N(signalfd), N(signalfd4),
        N(pidfd_send_signal), N(restart_syscall),
        /* prctl: the dangerous options need capabilities the jail has not */
        N(prctl),
};

/* Identity: every change is checked against the (absent) capabilities;
 * runtimes and su-like tools call them to drop, or to probe. */
static const struct sc_name identity[] = {
        N(getpid), N(getppid), N(getpgid), N(setpgid), N(getpgrp), N(getsid), N(setsid),
        N(getuid), N(geteuid), N(getgid), N(getegid), N(getresuid), N(getresgid),
        N(getgroups), N(setuid), N(setgid), N(setreuid), N(setregid), N(setresuid),
        N(setresgid), N(setgroups), N(setfsuid), N(setfsgid), N(capget), N(capset),
};

/* Limits and system information that the jail namespaces or that reveals
 * nothing a file in /proc would not. prlimit on another process needs the
 * same uid inside the same pid namespace. */
static const struct sc_name sysinfo[] = {
        N(uname), N(sysinfo), N(getrlimit), N(setrlimit), N(prlimit64), N(getrandom),
};

/* Waiting for events on descriptors the process holds. */
static const struct sc_name events[] = {
        N(pipe), N(pipe2), N(eventfd), N(eventfd2), N(epoll_create), N(epoll_create1),
        N(epoll_ctl), N(epoll_wait), N(epoll_pwait), N(epoll_pwait2), N(poll), N(ppoll),
        N(select), N(pselect6),
};

/* Sockets that exist (socket()/socketpair() are filtered by family). */
static const struct sc_name sockets[] = {
        N(connect), N(accept), N(accept4), N(bind), N(listen), N(shutdown), N(sendto),
        N(recvfrom), N(sendmsg), N(recvmsg), N(sendmmsg), N(recvmmsg), N(getsockname),
        N(getpeername), N(setsockopt), N(getsockopt),
};

/* System V and POSIX IPC: the jail has its own IPC namespace. */
static const struct sc_name ipc[] = {
        N(shmget), N(shmat), N(shmdt), N(shmctl), N(semget), N(semop), N(semtimedop),
        N(semctl), N(msgget), N(msgsnd), N(msgrcv), N(msgctl), N(mq_open), N(mq_unlink),
        N(mq_timedsend), N(mq_timedreceive), N(mq_notify), N(mq_getsetattr),
};

/* Self-confinement can only take rights away: a filter a job stacks is
 * ANDed with ours (runtimes and test suites install their own). */
static const struct sc_name self_confinement[] = {
        N(seccomp), N(landlock_create_ruleset), N(landlock_add_rule),
        N(landlock_restrict_self),
};

const struct sc_group seccomp_allow_groups[] = {
        GROUP("descriptors and plain I/O", fd_io),
        GROUP("path-based file system calls", paths),
        GROUP("own address space", memory),
        GROUP("threads and scheduling", threads),
        GROUP("time and timers", timers),
        GROUP("processes and signals", processes),
        GROUP("identity", identity),
        GROUP("limits and system information", sysinfo),
        GROUP("event waiting", events),
        GROUP("socket operations", sockets),
        GROUP("IPC in the jail's namespace", ipc),
        GROUP("self-confinement", self_confinement),
};
const size_t seccomp_n_allow_groups = ARRAY_SIZE(seccomp_allow_groups);

/* Explicitly refused with EPERM. The jail drops every capability, so most
 * would fail anyway; the filter keeps the kernel code behind them (new mount
 * API, bpf, keyrings, user namespaces, ...) out of reach of a guest that
 * found a kernel bug. */
const struct sc_name seccomp_deny_eperm[] = {
        /* mount table and root changes, old and new mount API */
        N(mount), N(umount2), N(pivot_root), N(chroot), N(open_tree), N(move_mount),
        N(fsopen), N(fsconfig), N(fsmount), N(fspick), N(mount_setattr),
        RAW(open_tree_attr, 467),
        /* other processes' memory and file descriptors */
        N(ptrace), N(process_vm_readv), N(process_vm_writev), N(pidfd_getfd), N(kcmp),
        /* leaving the jail's namespaces (clone is filtered by flag) */
        N(unshare), N(setns),
        /* kernel keyrings are not namespaced */
        N(keyctl), N(add_key), N(request_key),
        /* large kernel attack surface with a long CVE history */
        N(bpf), N(perf_event_open), N(userfaultfd), N(io_uring_setup), N(io_uring_enter),
        N(io_uring_register), N(modify_ldt),
        /* whole-machine state */
        N(kexec_load), N(kexec_file_load), N(init_module), N(finit_module),
        N(delete_module), N(reboot), N(swapon), N(swapoff), N(acct), N(quotactl),
        N(quotactl_fd), N(settimeofday), N(clock_settime), N(clock_adjtime), N(adjtimex),
        N(syslog), N(vhangup), N(iopl), N(ioperm), N(nfsservctl), N(uselib), N(sysfs),
        N(lookup_dcookie),
        /* file handles bypass path-based checks (the "shocker" escape) */
        N(name_to_handle_at), N(open_by_handle_at),
        /* global filesystem event monitoring, secret memory */
        N(fanotify_init), N(memfd_secret),
        /* extended attributes: the name (security.capability = file
         * capabilities) is in memory BPF cannot read, so every set is
         * refused. shutil.copy2 and cp --preserve ignore EPERM here. */
        N(setxattr), N(lsetxattr), N(fsetxattr), RAW(setxattrat, 463),
};
const size_t seccomp_n_deny_eperm = ARRAY_SIZE(seccomp_deny_eperm);

const struct sc_name seccomp_deny_enosys[] = {
        /* Linux AIO: io_setup reserves from the host-wide fs.aio-max-nr, so
         * one guest could starve the host (issue 10 row 5). glibc's POSIX
         * AIO uses threads, not these. */
        N(io_setup), N(io_destroy), N(io_submit), N(io_cancel), N(io_getevents),
        N(io_pgetevents),
        /* openat2 takes its flags and mode in a struct BPF cannot read, so a
         * set-id O_CREAT could not be refused: callers fall back to openat,
         * where it is (glibc's open() never uses openat2). */
        N(openat2),
        /* newer than the table, or left out on purpose (see the top) */
        RAW(statmount, 457), RAW(listmount, 458), RAW(lsm_get_self_attr, 459),
        RAW(lsm_set_self_attr, 460), RAW(lsm_list_modules, 461),
};
const size_t seccomp_n_deny_enosys = ARRAY_SIZE(seccomp_deny_enosys);

int seccomp_table_resolve(const struct sc_name *s)
{
        int nr = seccomp_syscall_resolve_name(s->name);
        if (nr != __NR_SCMP_ERROR)
                return nr < 0 ? -1 : nr; /* negative: pseudo-syscall, not native */
        if (s->nr_x86_64 > 0 && seccomp_arch_native() == SCMP_ARCH_X86_64)
                return s->nr_x86_64;
        return -1;
}
