/* Host id ranges for jails: the start-up check and the rotating set. See
 * ids.h for the layout. */
#include "jail/ids.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "jail/jail.h"

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

int jail_ctx_set_ids(struct jail_ctx *ctx, uint64_t base, uint64_t count, struct err *err)
{
        if (ctx->userns)
                return 0;
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
