/* A sandbox as its org sees it (the controller facade): found, listed and
 * destroyed only by its own org, never created on the way (registry.c
 * creates on first use for the single-key APIs of SBX_DEFAULT_ORG). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sandbox/internal.h"

void sandbox_info_fill(const struct sandbox_row *row, struct sbx_info *ret)
{
        snprintf(ret->id, sizeof(ret->id), "%s", row->id);
        snprintf(ret->org_id, sizeof(ret->org_id), "%s", row->org_id);
        ret->created_at = row->created_at;
        ret->last_used = row->last_used;
        ret->expires_at = row->expires_at;
        ret->expiry_fixed = row->expiry_fixed;
        ret->cpu_millis = row->cpu_millis;
        ret->memory_bytes = row->memory_bytes;
}

int sbx_find(struct sandbox_mgr *m, const char *org_id, const char *id, struct sbx_info *ret, struct err *err)
{
        memset(ret, 0, sizeof(*ret));
        struct sandbox *s = sandbox_get_existing(m, org_id, id, err);
        if (!s)
                return err_ret(err);
        pthread_mutex_lock(&s->lock);
        sandbox_info_fill(&s->row, ret);
        ret->env = json_deep_copy(s->env);
        pthread_mutex_unlock(&s->lock);
        sandbox_put(m, s);
        if (!ret->env)
                return err_set(err, ERR_INTERNAL, ENOMEM, "Out of memory");
        return 0;
}

struct list_ctx {
        void (*fn)(const struct sbx_info *info, void *userdata);
        void *userdata;
};

static void on_row(const struct sandbox_row *row, void *userdata)
{
        struct list_ctx *lc = userdata;
        struct sbx_info info = { 0 };
        sandbox_info_fill(row, &info);
        info.env = env_parse(row->env_json);
        lc->fn(&info, lc->userdata);
        sbx_info_done(&info);
}

int sbx_list_org(struct sandbox_mgr *m, const char *org_id, uint64_t limit, uint64_t offset,
                 void (*fn)(const struct sbx_info *info, void *userdata), void *userdata, uint64_t *ret_total,
                 struct err *err)
{
        struct list_ctx lc = { fn, userdata };
        int r = store_sandbox_each_org(m->store, org_id, limit, offset, on_row, &lc, ret_total);
        return r < 0 ? err_set(err, ERR_INTERNAL, -r, "Cannot list sandboxes: %s", strerror(-r)) : 0;
}

int sbx_destroy_org(struct sandbox_mgr *m, const char *org_id, const char *id, struct err *err)
{
        struct sandbox *s = sandbox_get_existing(m, org_id, id, err);
        if (!s)
                return err_ret(err);
        int r = sandbox_wipe(m, s);
        sandbox_put(m, s);
        return r < 0 ? err_set(err, ERR_INTERNAL, -r, "Cannot destroy sandbox: %s", strerror(-r)) : 0;
}
