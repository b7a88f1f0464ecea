/* Host id ranges for jails: the start-up check and the rotating set. See
 * ids.h for the layout. */
#include "jail/ids.h"

#include <errno.h>
#include <pwd.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "jail/jail.h"

extern char **environ;

static bool in_range(uint64_t id, uint64_t base, uint64_t count)
{
        return id >= base && id - base < count;
}

/* Fields 3 and 4 of passwd lines, field 3 of group lines: any of them inside
 * the range is an account the jails would impersonate. */
static int check_file(const char *path, int nfields, uint64_t base, uint64_t count, struct err *err)
{
        FILE *f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? 0 : err_set(err, ERR_INVALID, errno, "cannot read %s: %s", path, strerror(errno));
        char line[4096];
        int r = 0;
        while (r == 0 && fgets(line, sizeof(line), f)) {
                char *save = NULL, *name = strtok_r(line, ":", &save);
                (void)strtok_r(NULL, ":", &save); /* password */
                for (int i = 0; i < nfields && r == 0; i++) {
                        char *tok = strtok_r(NULL, ":", &save), *end;
                        if (!tok)
                                break;
                        unsigned long long id = strtoull(tok, &end, 10);
                        if (end != tok && in_range(id, base, count))
                                r = err_set(err, ERR_INVALID, EEXIST,
                                            "jail.id_base/jail.id_count: id %llu (%s in %s) is inside the jail id range "
                                            "[%llu, %llu)", id, name ? name : "?", path, (unsigned long long)base,
                                            (unsigned long long)(base + count));
                }
        }
        fclose(f);
        return r;
}

int jail_ids_check(uint64_t base, uint64_t count, const char *passwd, const char *group, struct err *err)
{
        if (count < JAIL_IDS_MIN_COUNT || base == 0 || base + count > 0xFFFFFFFFULL)
                return err_set(err, ERR_INVALID, ERANGE,
                               "jail.id_base/jail.id_count: the range [%llu, %llu) must hold at least %u ids, "
                               "start above 0 and end below 4294967295", (unsigned long long)base,
                               (unsigned long long)(base + count), JAIL_IDS_MIN_COUNT);
        const uint64_t reserved[] = { geteuid(), getegid(), getuid(), getgid(), JAIL_UID, JAIL_GID, 65535 };
        for (size_t i = 0; i < ARRAY_SIZE(reserved); i++)
                if (in_range(reserved[i], base, count))
                        return err_set(err, ERR_INVALID, EEXIST,
                                       "jail.id_base/jail.id_count: the range [%llu, %llu) contains id %llu "
                                       "(the daemon's own, or nobody's)", (unsigned long long)base,
                                       (unsigned long long)(base + count), (unsigned long long)reserved[i]);
        int r = check_file(passwd ? passwd : "/etc/passwd", 2, base, count, err);
        if (r == 0)
                r = check_file(group ? group : "/etc/group", 1, base, count, err);
        return r;
}

int jail_ids_subordinate(const char *path, uid_t uid, const char *name, uint64_t *base, uint64_t *count)
{
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        char line[512], uidstr[16];
        snprintf(uidstr, sizeof(uidstr), "%u", (unsigned)uid);
        int r = -ENOENT;
        while (r < 0 && fgets(line, sizeof(line), f)) {
                char *save = NULL, *who = strtok_r(line, ":", &save);
                char *start = strtok_r(NULL, ":", &save), *n = strtok_r(NULL, ":\n", &save), *e1, *e2;
                if (!who || !start || !n || (strcmp(who, uidstr) != 0 && (!name || strcmp(who, name) != 0)))
                        continue;
                unsigned long long b = strtoull(start, &e1, 10), c = strtoull(n, &e2, 10);
                if (e1 == start || *e1 || e2 == n || *e2 || c == 0)
                        continue;
                *base = b;
                *count = c;
                r = 0;
        }
        fclose(f);
        return r;
}

static const char *newuidmap_path(void)
{
        static const char *const paths[] = { "/usr/bin/newuidmap", "/bin/newuidmap" };
        for (size_t i = 0; i < ARRAY_SIZE(paths); i++)
                if (access(paths[i], X_OK) == 0)
                        return paths[i];
        return NULL;
}

/* Rootless: the jails' ids come from the daemon's subordinate uid range
 * (/etc/subuid, mapped by the setuid newuidmap). The configured range is
 * kept when it lies inside it, else the start of the subordinate range is
 * used. Without a range or newuidmap, every jail maps the daemon's own id:
 * said once, loudly. */
static int set_subordinate_ids(struct jail_ctx *ctx, uint64_t base, uint64_t count, struct err *err)
{
        struct passwd pw, *pwp = NULL;
        char buf[1024];
        uint64_t sbase = 0, scount = 0;
        getpwuid_r(ctx->outer_uid, &pw, buf, sizeof(buf), &pwp);
        int r = jail_ids_subordinate("/etc/subuid", ctx->outer_uid, pwp ? pwp->pw_name : NULL, &sbase, &scount);
        if (r == 0 && scount < JAIL_IDS_MIN_COUNT)
                r = -ERANGE;
        if (r < 0 || !newuidmap_path()) {
                log_warn("rootless mode: %s: every sandbox runs as the daemon's own uid %u (shared with each other "
                         "and with the daemon); give the daemon's user a range of at least %u ids in /etc/subuid "
                         "and install uidmap",
                         r == -ERANGE ? "the subordinate uid range in /etc/subuid is too small"
                         : r < 0      ? "no subordinate uid range in /etc/subuid"
                                      : "newuidmap not found",
                         (unsigned)ctx->outer_uid, JAIL_IDS_MIN_COUNT);
                return 0;
        }
        if (base < sbase || base + count > sbase + scount) {
                base = sbase;
                count = count < scount ? count : scount;
        }
        if ((r = jail_ids_check(base, count, NULL, NULL, err)) < 0)
                return r;
        log_info("rootless mode: jail host ids [%llu, %llu) from /etc/subuid", (unsigned long long)base,
                 (unsigned long long)(base + count));
        ctx->id_base = (uint32_t)base;
        ctx->id_count = (uint32_t)count;
        return 0;
}

int jail_ids_map_user(pid_t pid, uid_t host_id)
{
        const char *bin = newuidmap_path();
        if (!bin)
                return -ENOENT;
        char spid[16], self[16], inner[16], outer[16];
        snprintf(spid, sizeof(spid), "%d", (int)pid);
        snprintf(self, sizeof(self), "%u", (unsigned)getuid());
        snprintf(inner, sizeof(inner), "%u", JAIL_UID);
        snprintf(outer, sizeof(outer), "%u", (unsigned)host_id);
        /* The namespace's root is the daemon (the jail's setup creates its
         * tree as that id; newuidmap allows one's own uid), the jail user
         * the sandbox's id. */
        char *const argv[] = { (char *)"newuidmap", spid, (char *)"0", self, (char *)"1",
                               inner, outer, (char *)"1", NULL };
        pid_t child;
        int r = posix_spawn(&child, bin, NULL, NULL, argv, environ);
        if (r != 0)
                return -r;
        int status;
        while (waitpid(child, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EPERM;
}

int jail_ctx_set_ids(struct jail_ctx *ctx, uint64_t base, uint64_t count, struct err *err)
{
        if (ctx->userns)
                return set_subordinate_ids(ctx, base, count, err);
        int r = jail_ids_check(base, count, NULL, NULL, err);
        if (r < 0)
                return r;
        ctx->id_base = (uint32_t)base;
        ctx->id_count = (uint32_t)count;
        return 0;
}

uid_t jail_ids_template(const struct jail_ctx *ctx)
{
        return ctx->id_count ? ctx->id_base : JAIL_TEMPLATE_UID;
}

uid_t jail_ids_stateless(struct jail_ctx *ctx)
{
        if (!ctx->id_count)
                return ctx->userns ? ctx->outer_uid : JAIL_UID;
        uint32_t n = __atomic_fetch_add(&ctx->id_next, 1, __ATOMIC_RELAXED);
        return ctx->id_base + 1 + n % JAIL_IDS_STATELESS;
}

void jail_ids_sandbox_range(const struct jail_ctx *ctx, uid_t *first, uint32_t *n)
{
        *first = ctx->id_base + 1 + JAIL_IDS_STATELESS;
        *n = ctx->id_count ? ctx->id_count - 1 - JAIL_IDS_STATELESS : 0;
}
