#include "jail/seccomp.h"

#include <fcntl.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/util.h"
#include "jail/seccomp_table.h"

/* The policy is default-deny: seccomp_table.c lists what is allowed (with
 * the review), this file adds the syscalls allowed only for some arguments
 * and compiles everything to one BPF program. */

/* A marker errno for refusals that are part of normal operation (glibc's
 * clone3 probe). libseccomp refuses a rule whose action repeats the default
 * (ENOSYS), so such rules use this value and the exported program is
 * patched to plain ENOSYS (unquiet_program). 4000 is below the largest value libseccomp accepts
 * and far above every errno of the ABI (< 150). */
#define QUIET_ENOSYS 4000

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

/* Adds one unconditional rule per resolvable entry of a table. */
static int add_names(scmp_filter_ctx ctx, uint32_t action, const struct sc_name *names, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                int nr = seccomp_table_resolve(&names[i]);
                if (nr < 0)
                        continue; /* not a syscall of this architecture */
                int r = seccomp_rule_add(ctx, action, nr, 0);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int add_tables(scmp_filter_ctx ctx)
{
        for (size_t g = 0; g < seccomp_n_allow_groups; g++) {
                const struct sc_group *grp = &seccomp_allow_groups[g];
                int r = add_names(ctx, SCMP_ACT_ALLOW, grp->names, grp->n);
                if (r < 0)
                        return r;
        }
        /* seccomp_deny_enosys needs no rule: it is the default action (and
         * libseccomp refuses a rule that repeats the default). */
        return add_names(ctx, SCMP_ACT_ERRNO(EPERM), seccomp_deny_eperm, seccomp_n_deny_eperm);
}

/* libseccomp drops the conditional rules of a syscall that also has an
 * unconditional one, and allows one comparison per argument per rule. So
 * "allow unless the low 32 bits of arg are one of vals" is written as a
 * union of single masked compares: x differs from every value when it
 * differs from them in a bit where they all agree (one rule per such bit),
 * or when the bits where they disagree form a pattern none of them has
 * (one rule per such pattern; at most 2^4). */
static int allow_unless_low32(scmp_filter_ctx ctx, int nr, unsigned arg, const uint64_t *vals, size_t n)
{
        uint64_t differ = 0;
        for (size_t i = 1; i < n; i++)
                differ |= (vals[i] ^ vals[0]) & 0xffffffffULL;
        if (__builtin_popcountll(differ) > 4)
                return -E2BIG;
        int r = 0;
        for (unsigned b = 0; r >= 0 && b < 32; b++) {
                uint64_t bit = 1ULL << b;
                if (!(differ & bit))
                        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                                             SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, bit, ~vals[0] & bit));
        }
        /* every submask p of differ, the empty one included */
        for (uint64_t p = differ;; p = (p - 1) & differ) {
                bool taken = false;
                for (size_t i = 0; i < n; i++)
                        taken |= (vals[i] & differ) == p;
                if (!taken && r >= 0)
                        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                                             SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, differ, p));
                if (p == 0)
                        break;
        }
        return r;
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
        uint64_t all = 0;
        for (size_t i = 0; i < ARRAY_SIZE(ns_clone_flags); i++)
                all |= ns_clone_flags[i];
        int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, all, 0));
        if (r < 0)
                return r;
        /* clone3 passes its flags in memory, which BPF cannot inspect. ENOSYS
         * makes glibc (2.34+) fall back to clone(), where the rules above
         * apply. glibc tries it before every fork and thread, so it is a
         * "quiet" refusal (see QUIET_ENOSYS), never counted or logged. */
        return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(QUIET_ENOSYS), SCMP_SYS(clone3), 0);
}

/* pidfd_open(1) would hand the job a handle on the jail's init. Signals and
 * ptrace-style access through it already fail (init has another uid and its
 * own Landlock domain), but the handle itself is refused too. pid_t is 32
 * bits: compare only the low half, as the kernel truncates. */
static int add_pidfd_rules(scmp_filter_ctx ctx)
{
        static const uint64_t init_pid[] = { 1 };
        int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(pidfd_open), 1,
                                 SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffULL, 1));
        return r < 0 ? r : allow_unless_low32(ctx, SCMP_SYS(pidfd_open), 0, init_pid, 1);
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
        /* Every other request: the terminal's TIOCSCTTY, TIOCGPTPEER,
         * TIOCSWINSZ, FIONREAD, TCGETS, FICLONE, ... */
        return allow_unless_low32(ctx, SCMP_SYS(ioctl), 1, deny_ioctls, ARRAY_SIZE(deny_ioctls));
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
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1, SCMP_A0(SCMP_CMP_EQ, 0));
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
                                     SCMP_A0(SCMP_CMP_EQ, 0xffffffffULL));
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
        static const uint64_t fams[] = { AF_UNIX, AF_INET, AF_INET6, AF_NETLINK };
        for (size_t i = 0; i < ARRAY_SIZE(fams); i++) {
                if (!family_allowed(fams[i], allow_inet))
                        continue;
                int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A0(SCMP_CMP_EQ, fams[i]));
                if (r < 0)
                        return r;
        }
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

/* No set-id bits (issue 10 row 1): a set-user-id copy of a binary in a
 * workspace would run with the workspace owner's host uid for any local
 * user who reaches it. Refused with EPERM rather than stripped: BPF cannot
 * rewrite arguments, and a silent strip would hide the refusal. */
#define SETID ((uint64_t)(S_ISUID | S_ISGID))

static int add_mode_rules(scmp_filter_ctx ctx, int nr, unsigned mode_arg)
{
        int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1,
                                 SCMP_CMP(mode_arg, SCMP_CMP_MASKED_EQ, S_ISUID, S_ISUID));
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1,
                                     SCMP_CMP(mode_arg, SCMP_CMP_MASKED_EQ, S_ISGID, S_ISGID));
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_CMP(mode_arg, SCMP_CMP_MASKED_EQ, SETID, 0));
        return r;
}

/* open(at): the mode only counts when the call creates (O_CREAT, or
 * O_TMPFILE, which later linkat() can give a name). */
static int add_open_rules(scmp_filter_ctx ctx, int nr, unsigned flags_arg, unsigned mode_arg)
{
        static const uint64_t creating[] = { O_CREAT, O_TMPFILE & ~O_DIRECTORY };
        static const uint64_t bits[] = { S_ISUID, S_ISGID };
        int r = 0;
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(creating); i++)
                for (size_t j = 0; r >= 0 && j < ARRAY_SIZE(bits); j++)
                        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 2,
                                             SCMP_CMP(flags_arg, SCMP_CMP_MASKED_EQ, creating[i], creating[i]),
                                             SCMP_CMP(mode_arg, SCMP_CMP_MASKED_EQ, bits[j], bits[j]));
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                                     SCMP_CMP(flags_arg, SCMP_CMP_MASKED_EQ, creating[0] | creating[1], 0));
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_CMP(mode_arg, SCMP_CMP_MASKED_EQ, SETID, 0));
        return r;
}

static int add_setid_rules(scmp_filter_ctx ctx)
{
        static const struct {
                const char *name;
                int nr_x86_64;
                unsigned mode_arg;
        } modes[] = {
                { "chmod", 0, 1 },  { "fchmod", 0, 1 },   { "fchmodat", 0, 2 }, { "fchmodat2", 452, 2 },
                { "creat", 0, 1 },  { "mkdir", 0, 1 },    { "mkdirat", 0, 2 },  { "mknod", 0, 1 },
                { "mknodat", 0, 2 },
        };
        int r = 0;
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(modes); i++) {
                int nr = seccomp_table_resolve(&(struct sc_name){ modes[i].name, modes[i].nr_x86_64 });
                if (nr >= 0)
                        r = add_mode_rules(ctx, nr, modes[i].mode_arg);
        }
        if (r >= 0)
                r = add_open_rules(ctx, SCMP_SYS(open), 1, 2);
        if (r >= 0)
                r = add_open_rules(ctx, SCMP_SYS(openat), 2, 3);
        return r;
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
                r = add_tables(ctx);
        if (r >= 0)
                r = add_setid_rules(ctx);
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

/* Two programs from one export. fprog: the quiet marker becomes plain
 * ENOSYS. notify: the same, but every other refusal returns
 * SECCOMP_RET_USER_NOTIF, so the daemon hears of it (and answers with the
 * errno fprog gives, seccomp_prog_refusal). Without a listener the kernel
 * fails a USER_NOTIF syscall with ENOSYS: still refused. */
static int make_variants(struct seccomp_prog *p)
{
        size_t bytes = p->fprog.len * sizeof(struct sock_filter);
        p->notify.filter = malloc(bytes);
        if (!p->notify.filter)
                return -ENOMEM;
        memcpy(p->notify.filter, p->fprog.filter, bytes);
        p->notify.len = p->fprog.len;
        for (unsigned short i = 0; i < p->fprog.len; i++) {
                struct sock_filter *f = &p->fprog.filter[i], *n = &p->notify.filter[i];
                if (f->code != (BPF_RET | BPF_K) || (f->k & SECCOMP_RET_ACTION_FULL) != SECCOMP_RET_ERRNO)
                        continue;
                if (f->k == (SECCOMP_RET_ERRNO | QUIET_ENOSYS))
                        f->k = n->k = SECCOMP_RET_ERRNO | ENOSYS;
                else
                        n->k = SECCOMP_RET_USER_NOTIF;
        }
        return 0;
}

int seccomp_prog_build(bool allow_inet, struct seccomp_prog **ret)
{
        /* Default-deny: whatever the table does not name is "not
         * implemented", as on a kernel older than the syscall. */
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
        if (!ctx)
                return -ENOMEM;
        int r = build_policy(ctx, allow_inet);
        if (r < 0)
                return r;
        struct seccomp_prog *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        r = export_bpf(ctx, &p->fprog.filter, &p->fprog.len);
        if (r >= 0)
                r = make_variants(p);
        if (r < 0) {
                seccomp_prog_free(p);
                return r;
        }
        *ret = p;
        return 0;
}

void seccomp_prog_free(struct seccomp_prog *p)
{
        if (!p)
                return;
        free(p->fprog.filter);
        free(p->notify.filter);
        free(p);
}

int seccomp_prog_apply(const struct seccomp_prog *p)
{
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p->fprog, 0, 0) < 0)
                return -errno;
        return 0;
}

int seccomp_prog_apply_listener(const struct seccomp_prog *p)
{
        long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &p->notify);
        return fd < 0 ? -errno : (int)fd;
}

/* A classic-BPF interpreter for the instructions libseccomp emits (loads of
 * struct seccomp_data words, the scratch memory, AND, the conditional and
 * unconditional jumps, returns). Anything else, an out-of-range load or a
 * jump past the end ends the run with KILL_PROCESS. */
static bool uses_scratch(uint16_t code)
{
        return code == (BPF_LD | BPF_MEM) || code == (BPF_LDX | BPF_MEM) || code == BPF_ST || code == BPF_STX;
}

static uint32_t run_bpf(const struct sock_fprog *prog, const struct seccomp_data *d)
{
        uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };
        for (unsigned pc = 0; pc < prog->len; pc++) {
                const struct sock_filter *f = &prog->filter[pc];
                if (uses_scratch(f->code) && f->k >= BPF_MEMWORDS)
                        return SECCOMP_RET_KILL_PROCESS;
                switch (f->code) {
                case BPF_LD | BPF_W | BPF_ABS:
                        if (f->k > sizeof(*d) - sizeof(a) || f->k % 4)
                                return SECCOMP_RET_KILL_PROCESS;
                        memcpy(&a, (const char *)d + f->k, sizeof(a));
                        break;
                case BPF_LD | BPF_MEM: a = mem[f->k]; break;
                case BPF_LDX | BPF_MEM: x = mem[f->k]; break;
                case BPF_ST: mem[f->k] = a; break;
                case BPF_STX: mem[f->k] = x; break;
                case BPF_LD | BPF_IMM: a = f->k; break;
                case BPF_ALU | BPF_AND | BPF_K: a &= f->k; break;
                case BPF_MISC | BPF_TAX: x = a; break;
                case BPF_MISC | BPF_TXA: a = x; break;
                case BPF_JMP | BPF_JA: pc += f->k; break;
                case BPF_JMP | BPF_JEQ | BPF_K: pc += a == f->k ? f->jt : f->jf; break;
                case BPF_JMP | BPF_JGT | BPF_K: pc += a > f->k ? f->jt : f->jf; break;
                case BPF_JMP | BPF_JGE | BPF_K: pc += a >= f->k ? f->jt : f->jf; break;
                case BPF_JMP | BPF_JSET | BPF_K: pc += (a & f->k) ? f->jt : f->jf; break;
                case BPF_JMP | BPF_JEQ | BPF_X: pc += a == x ? f->jt : f->jf; break;
                case BPF_JMP | BPF_JGT | BPF_X: pc += a > x ? f->jt : f->jf; break;
                case BPF_JMP | BPF_JGE | BPF_X: pc += a >= x ? f->jt : f->jf; break;
                case BPF_RET | BPF_K: return f->k;
                case BPF_RET | BPF_A: return a;
                default: return SECCOMP_RET_KILL_PROCESS;
                }
        }
        return SECCOMP_RET_KILL_PROCESS;
}

int seccomp_prog_refusal(const struct seccomp_prog *p, const struct seccomp_data *d)
{
        uint32_t ret = run_bpf(&p->fprog, d);
        if ((ret & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ERRNO)
                return (int)(ret & SECCOMP_RET_DATA);
        return ret == SECCOMP_RET_ALLOW ? 0 : ENOSYS;
}

void seccomp_syscall_name(int nr, char *buf, size_t len)
{
        char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
        if (name)
                snprintf(buf, len, "%s", name);
        else
                snprintf(buf, len, "%d", nr);
        free(name);
}
