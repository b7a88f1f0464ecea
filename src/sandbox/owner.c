/* One host identity per sandbox (issue 10, rows 3 and 4): the id a
 * sandbox's jails run as on the host, given once from the engine's range and
 * stored with the sandbox (freed with its row), and the workspace owned by
 * it. Another sandbox's uid, or any other account, can neither enter the
 * workspace nor touch its processes. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/internal.h"

int sandbox_assign_host_id(struct sandbox_mgr *m, struct sandbox *s)
{
        uid_t first;
        uint32_t n, id;
        if (s->row.host_id)
                return 0;
        engine_sandbox_ids(m->engine, &first, &n);
        if (n == 0)
                return 0; /* rootless: the daemon's id is the only one */
        int r = store_sandbox_free_host_id(m->store, first, n, &id);
        if (r < 0)
                return r;
        s->row.host_id = id;
        if ((r = store_sandbox_put(m->store, &s->row)) < 0)
                s->row.host_id = 0;
        return r;
}

static __thread uid_t chown_to;

static int chown_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
        (void)type;
        (void)ftw;
        if (st->st_uid != chown_to || st->st_gid != chown_to)
                return lchown(path, chown_to, chown_to) < 0 ? -1 : 0;
        return 0;
}

int sandbox_workspace_own(struct sandbox *s)
{
        struct stat st;
        uid_t id = s->row.host_id;
        if (!id || stat(s->ws.mount, &st) < 0)
                return 0;
        /* Rootless: the guest is a subordinate uid with the daemon's group
         * (jail.c, write_id_maps); the dir stays the daemon's, under the
         * 0700 data dir, and only that group may enter besides. */
        if (s->ws.plain)
                return (st.st_mode & 07777) != 0770 && chmod(s->ws.mount, 0770) < 0 ? -errno : 0;
        if (st.st_uid != id) {
                /* A workspace made before ids existed (everything JAIL_UID),
                 * or a fresh image (root_owner JAIL_UID): hand it over. */
                chown_to = id;
                if (nftw(s->ws.mount, chown_entry, 16, FTW_PHYS | FTW_MOUNT) < 0)
                        return -errno;
        }
        /* Only the sandbox's own id may enter (the daemon's files API
         * works as that id too). */
        if ((st.st_mode & 07777) != 0700 && chmod(s->ws.mount, 0700) < 0)
                return -errno;
        return 0;
}
