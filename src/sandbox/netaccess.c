/* Network for tenants' sandboxes, only through the egress proxy
 * (sandbox/egress/): attached to a sandbox's own namespace when it takes
 * one, detached when the sandbox is freed (registry.c). A sandbox without
 * it has what every sandbox had before: a loopback and no route. */
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "sandbox/egress/egress.h"
#include "sandbox/internal.h"

void sbx_mgr_set_egress(struct sandbox_mgr *m, struct egress *eg)
{
        m->egress = eg;
}

void sandbox_egress_attach(struct sandbox_mgr *m, struct sandbox *s)
{
        /* The default org (the other facades) and the warm pool get none;
         * a warm sandbox gets its org's when it is taken and used. */
        if (!m->egress || s->egress || s->netns_fd < 0 || strcmp(s->row.org_id, SBX_DEFAULT_ORG) == 0 ||
            strcmp(s->row.org_id, SBX_POOL_ORG) == 0)
                return;
        int r = egress_attach(m->egress, s->netns_fd, s->row.org_id, s->row.id, &s->egress);
        if (r < 0)
                log_warn("sandbox=%s msg=\"no egress proxy: the sandbox has no network\" err=\"%s\"", s->row.id,
                         strerror(-r));
}

void sandbox_egress_env(const struct sandbox_mgr *m, const struct sandbox *s, json_t *env)
{
        if (!s->egress)
                return;
        char url[64];
        snprintf(url, sizeof(url), "http://127.0.0.1:%u", egress_proxy_port(m->egress));
        static const char *const vars[] = { "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy" };
        for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
                json_object_set_new(env, vars[i], json_string(url));
        /* The sandbox's own servers stay reachable directly. */
        json_object_set_new(env, "NO_PROXY", json_string("localhost,127.0.0.1,::1"));
        json_object_set_new(env, "no_proxy", json_string("localhost,127.0.0.1,::1"));
}
