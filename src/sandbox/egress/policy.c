/* Egress policy documents (seed "Egress Policies"): matching a host and a
 * port against an org's policies. Pure functions: the proxy asks through
 * egress_ops, whose implementation (the controller API) loads the
 * documents and calls egress_policy_decide. */
#include <stdio.h>
#include <string.h>

#include "sandbox/egress/egress.h"

bool egress_domain_match(const char *pattern, const char *host)
{
        if (strncmp(pattern, "*.", 2) != 0)
                return strcmp(pattern, host) == 0;
        size_t ls = strlen(pattern + 1), lh = strlen(host);
        /* ".suffix" at the end, after at least one character of a label. */
        return lh > ls && strcmp(host + lh - ls, pattern + 1) == 0;
}

bool egress_domain_valid(const char *pattern)
{
        const char *p = strncmp(pattern, "*.", 2) == 0 ? pattern + 2 : pattern;
        size_t n = strlen(p), label = 0;
        if (n == 0 || n > 253 || p[0] == '.' || p[n - 1] == '.')
                return false;
        for (const char *c = p; *c; c++) {
                if (*c == '.') {
                        if (label == 0)
                                return false;
                        label = 0;
                        continue;
                }
                if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-') || ++label > 63)
                        return false;
        }
        return true;
}

static bool list_matches(json_t *list, const char *host)
{
        size_t i;
        json_t *v;
        json_array_foreach(list, i, v)
        {
                if (json_is_string(v) && egress_domain_match(json_string_value(v), host))
                        return true;
        }
        return false;
}

/* No allowedPorts (or an empty list): any port. */
static bool port_ok(json_t *doc, unsigned port)
{
        json_t *ports = json_object_get(doc, "allowedPorts");
        if (port == 0 || json_array_size(ports) == 0)
                return true;
        size_t i;
        json_t *v;
        json_array_foreach(ports, i, v)
        {
                if (json_is_integer(v) && json_integer_value(v) == (json_int_t)port)
                        return true;
        }
        return false;
}

static const char *policy_name(json_t *doc)
{
        const char *name = json_string_value(json_object_get(doc, "policyName"));
        return name ? name : "?";
}

void egress_policy_decide(json_t *const *docs, size_t n, const char *host, unsigned port, bool enforce,
                          struct egress_verdict *ret)
{
        *ret = (struct egress_verdict){ .enforce = enforce };
        bool host_ok = false, allowed = false, log_all = false;
        const char *denied_by = NULL;
        for (size_t i = 0; i < n; i++) {
                json_t *d = docs[i];
                log_all |= json_is_true(json_object_get(d, "logAllRequests"));
                if (!denied_by && list_matches(json_object_get(d, "deniedDomains"), host))
                        denied_by = policy_name(d);
                bool h = json_is_true(json_object_get(d, "allowAll")) ||
                         list_matches(json_object_get(d, "allowedDomains"), host);
                host_ok |= h;
                allowed |= h && port_ok(d, port);
        }
        if (denied_by)
                snprintf(ret->reason, sizeof(ret->reason), "host denied by policy '%s'", denied_by);
        else if (n == 0)
                snprintf(ret->reason, sizeof(ret->reason), "no egress policy");
        else if (!host_ok)
                snprintf(ret->reason, sizeof(ret->reason), "host not allowed");
        else if (!allowed)
                snprintf(ret->reason, sizeof(ret->reason), "port %u not allowed", port);
        else
                snprintf(ret->reason, sizeof(ret->reason), "allowed");
        ret->violation = denied_by || !allowed;
        ret->allow = !ret->violation || !enforce;
        ret->log = log_all || ret->violation;
}
