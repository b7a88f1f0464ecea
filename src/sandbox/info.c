/* A sandbox's info, its env and the workspace handed to the files
 * operations: the registry's read-mostly views of a loaded sandbox (split
 * from registry.c, which loads, references and destroys them). */
#include "sandbox/internal.h"
#include "sandbox/replica.h"

#include <fcntl.h>
#include <string.h>

#include "base/util.h"

/* ---- info and env ---- */

void sbx_info_done(struct sbx_info *info)
{
        json_decref(info->env);
        free(info->contexts);
        memset(info, 0, sizeof(*info));
}

/* Only a workspace that exists is measured: reading info must not create
 * one. Caller holds s->lock. */
static void measure_workspace(struct sandbox_mgr *m, struct sandbox *s, struct sbx_info *info)
{
        bool exists = s->ws.mounted || access(s->ws.plain ? s->ws.mount : s->ws.image, F_OK) == 0;
        if (exists && !s->ws.mounted)
                workspace_open(&s->ws, sandbox_workspace_bytes(m, s), sandbox_workspace_inodes(m, s));
        int fd = s->ws.mounted ? open(s->ws.mount, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
        if (fd >= 0) {
                files_usage(fd, &info->ws_files, &info->ws_bytes);
                close(fd);
        }
}

static int contexts_snapshot(const struct sandbox *s, struct sbx_context_info **ret, size_t *ret_n)
{
        size_t n = 0;
        for (const struct context *c = s->contexts; c; c = c->next)
                n++;
        struct sbx_context_info *arr = calloc(n ? n : 1, sizeof(*arr));
        if (!arr)
                return -ENOMEM;
        size_t i = 0;
        for (const struct context *c = s->contexts; c; c = c->next)
                context_info_fill(c, &arr[i++]);
        *ret = arr;
        *ret_n = n;
        return 0;
}

int sbx_info(struct sandbox_mgr *m, const char *id, struct sbx_info *ret, struct err *err)
{
        memset(ret, 0, sizeof(*ret));
        struct sandbox *s = sandbox_enter_cold(m, id, err);
        if (!s)
                return err_ret(err);
        sandbox_info_fill(&s->row, ret);
        ret->env = json_deep_copy(s->env);
        int r = contexts_snapshot(s, &ret->contexts, &ret->ncontexts);
        if (r == 0)
                measure_workspace(m, s, ret);
        sandbox_leave(m, s);
        if (r < 0 || !ret->env) {
                sbx_info_done(ret);
                return err_set(err, ERR_INTERNAL, ENOMEM, "Out of memory");
        }
        return 0;
}

int sbx_context_list(struct sandbox_mgr *m, const char *id, struct sbx_context_info **ret, size_t *ret_n,
                     struct err *err)
{
        return sbx_context_list_org(m, NULL, id, ret, ret_n, err);
}

int sbx_context_list_org(struct sandbox_mgr *m, const char *org_id, const char *id, struct sbx_context_info **ret,
                         size_t *ret_n, struct err *err)
{
        struct sandbox *s = sandbox_enter_org(m, org_id, id, err);
        if (!s)
                return err_ret(err);
        int r = contexts_snapshot(s, ret, ret_n);
        sandbox_leave(m, s);
        if (r < 0)
                return err_set(err, ERR_INTERNAL, -r, "Out of memory");
        return 0;
}

int sbx_set_env(struct sandbox_mgr *m, const char *id, json_t *env, struct err *err)
{
        return sbx_set_env_org(m, NULL, id, env, err);
}

int sbx_set_env_org(struct sandbox_mgr *m, const char *org_id, const char *id, json_t *env, struct err *err)
{
        struct sandbox *s = sandbox_enter_org(m, org_id, id, err);
        if (!s)
                return err_ret(err);
        json_t *next = json_deep_copy(s->env);
        env_merge(next, env);
        char *text = json_dumps(next, JSON_COMPACT | JSON_SORT_KEYS);
        int r = text ? store_sandbox_set_env(m->store, s->row.id, text) : -ENOMEM;
        free(text);
        if (r == 0) {
                json_decref(s->env);
                s->env = next;
        } else {
                json_decref(next);
        }
        sandbox_leave(m, s);
        if (r < 0)
                return err_set(err, ERR_INTERNAL, -r, "Cannot store env: %s", strerror(-r));
        return 0;
}

/* ---- workspace for file operations ---- */

int sbx_workspace_acquire(struct sandbox_mgr *m, const char *id, struct sbx_workspace *ret, struct err *err)
{
        return sbx_workspace_acquire_org(m, NULL, id, ret, err);
}

int sandbox_workspace_locked(struct sandbox_mgr *m, struct sandbox *s, struct sbx_workspace *ret, struct err *err)
{
        int r = sandbox_open_workspace(m, s, err);
        int fd = r == 0 ? open(s->ws.mount, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
        if (fd < 0)
                return r < 0 ? r : err_set(err, ERR_INTERNAL, errno, "Cannot open the workspace: %s", strerror(errno));
        *ret = (struct sbx_workspace){
                .root_fd = fd,
                .limits = { sandbox_file_bytes(m, s), sandbox_workspace_bytes(m, s), sandbox_workspace_inodes(m, s),
                            m->opt.files_max_depth },
                .created_at = s->row.created_at,
                .uid = s->row.host_id ? s->row.host_id : JAIL_UID,
                .gid = s->row.host_id ? s->row.host_id : JAIL_GID,
                .sbx = s,
        };
        return 0;
}

int sbx_workspace_acquire_org(struct sandbox_mgr *m, const char *org_id, const char *id, struct sbx_workspace *ret,
                              struct err *err)
{
        memset(ret, 0, sizeof(*ret));
        ret->root_fd = -1;
        struct sandbox *s = sandbox_enter_org(m, org_id, id, err);
        if (!s)
                return err_ret(err);
        int r = sandbox_workspace_locked(m, s, ret, err);
        if (r < 0)
                sandbox_leave(m, s);
        return r;
}

void sbx_workspace_release(struct sandbox_mgr *m, struct sbx_workspace *ws)
{
        struct sandbox *s = ws->sbx;
        if (!s)
                return;
        if (ws->root_fd >= 0)
                close(ws->root_fd);
        ws->root_fd = -1;
        ws->sbx = NULL;
        /* Every files operation (write, delete, mkdir, rename, an archive
         * extracted, a checkpoint restored) ends here. */
        sbx_replica_dirty(m, s->row.id);
        sandbox_leave(m, s);
}
