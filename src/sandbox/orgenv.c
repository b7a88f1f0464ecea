/* The env an org gives every jail of its sandboxes (see
 * sbx_mgr_set_org_env): asked of the hook each time a jail starts, so a
 * secret changed or deleted holds for the next command at once. */
#include <string.h>

#include "sandbox/internal.h"

void sbx_mgr_set_org_env(struct sandbox_mgr *m, sbx_org_env_fn fn, void *userdata)
{
        m->org_env = fn;
        m->org_env_userdata = userdata;
}

int sandbox_org_env(struct sandbox_mgr *m, const struct sandbox *s, json_t **ret, struct err *err)
{
        json_t *env = json_object();
        if (!env)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        if (m->org_env && strcmp(s->row.org_id, SBX_DEFAULT_ORG) != 0) {
                int r = m->org_env(m->org_env_userdata, s->row.org_id, env, err);
                if (r < 0) {
                        json_decref(env);
                        return r;
                }
        }
        *ret = env;
        return 0;
}

int sandbox_env_over_org(struct sandbox_mgr *m, const struct sandbox *s, json_t *env, json_t **ret, struct err *err)
{
        int r = sandbox_org_env(m, s, ret, err);
        if (r == 0 && env)
                env_merge(*ret, env);
        return r;
}
