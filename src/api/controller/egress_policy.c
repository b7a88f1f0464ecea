/* Egress policy documents of the controller API (seed "Egress Policies"):
 * a request body validated and normalised into the stored document, and
 * the stored document's view. */
#include <string.h>

#include "api/controller/egress.h"
#include "base/util.h"
#include "sandbox/egress/egress.h"

#define NAME_MAX_LEN 128
#define DOMAINS_MAX 1000
#define PORTS_MAX 100

static bool fail(char *why, size_t len, const char *msg)
{
        snprintf(why, len, "%s", msg);
        return false;
}

/* A list of domain patterns, lower-cased and checked, into doc[name]. */
static bool domains(json_t *in, json_t *doc, const char *name, char *why, size_t len)
{
        json_t *v = json_object_get(in, name);
        json_t *out = json_array();
        if (!out)
                return fail(why, len, "out of memory");
        json_object_set_new(doc, name, out);
        if (!v || json_is_null(v))
                return true;
        if (!json_is_array(v) || json_array_size(v) > DOMAINS_MAX) {
                snprintf(why, len, "%s must be an array of at most %d domains", name, DOMAINS_MAX);
                return false;
        }
        size_t i;
        json_t *d;
        json_array_foreach(v, i, d)
        {
                char buf[300];
                const char *s = json_string_value(d);
                if (!s || strlen(s) >= sizeof(buf)) {
                        snprintf(why, len, "%s[%zu] must be a domain", name, i);
                        return false;
                }
                size_t n = strlen(s);
                for (size_t k = 0; k <= n; k++)
                        buf[k] = (char)(s[k] >= 'A' && s[k] <= 'Z' ? s[k] + 32 : s[k]);
                if (n > 1 && buf[n - 1] == '.')
                        buf[n - 1] = '\0';
                if (!egress_domain_valid(buf)) {
                        snprintf(why, len, "%s[%zu] is not a domain name or *.domain pattern", name, i);
                        return false;
                }
                json_array_append_new(out, json_string(buf));
        }
        return true;
}

static bool ports(json_t *in, json_t *doc, char *why, size_t len)
{
        json_t *v = json_object_get(in, "allowedPorts");
        json_t *out = json_array();
        if (!out)
                return fail(why, len, "out of memory");
        json_object_set_new(doc, "allowedPorts", out);
        if (!v || json_is_null(v))
                return true;
        if (!json_is_array(v) || json_array_size(v) > PORTS_MAX)
                return fail(why, len, "allowedPorts must be an array of at most 100 ports");
        size_t i;
        json_t *p;
        json_array_foreach(v, i, p)
        {
                if (!json_is_integer(p) || json_integer_value(p) < 1 || json_integer_value(p) > 65535)
                        return fail(why, len, "allowedPorts holds integers 1-65535");
                json_array_append(out, p);
        }
        return true;
}

static bool flag(json_t *in, json_t *doc, const char *name, char *why, size_t len)
{
        json_t *v = json_object_get(in, name);
        if (v && !json_is_null(v) && !json_is_boolean(v)) {
                snprintf(why, len, "%s must be a boolean", name);
                return false;
        }
        json_object_set_new(doc, name, json_boolean(json_is_true(v)));
        return true;
}

json_t *ctl_egress_policy_doc(json_t *in, char *why, size_t len)
{
        json_t *doc = json_object();
        if (!doc)
                return fail(why, len, "out of memory"), NULL;
        json_t *name = json_object_get(in, "policyName");
        bool ok = true;
        if (name && !json_is_null(name) &&
            (!json_is_string(name) || json_string_length(name) == 0 || json_string_length(name) > NAME_MAX_LEN))
                ok = fail(why, len, "policyName must be a string of 1-128 characters");
        if (ok)
                json_object_set_new(doc, "policyName", json_string(json_is_string(name) ? json_string_value(name) : "default"));
        ok = ok && flag(in, doc, "allowAll", why, len) && domains(in, doc, "allowedDomains", why, len) &&
             domains(in, doc, "deniedDomains", why, len) && ports(in, doc, why, len) &&
             flag(in, doc, "logAllRequests", why, len);
        if (!ok || !json_object_get(doc, "policyName")) {
                json_decref(doc);
                return NULL;
        }
        return doc;
}

json_t *ctl_egress_policy_view(const struct egress_policy_row *row)
{
        json_t *doc = json_loads(row->doc, 0, NULL);
        if (!json_is_object(doc)) {
                json_decref(doc);
                doc = json_object();
        }
        char created[32], updated[32];
        iso8601_ms(row->created_at, created);
        iso8601_ms(row->updated_at, updated);
        json_t *v = json_pack("{s:s, s:s}", "id", row->id, "organizationId", row->org_id);
        json_object_update(v, doc);
        json_object_set_new(v, "createdAt", json_string(created));
        json_object_set_new(v, "updatedAt", json_string(updated));
        json_decref(doc);
        return v;
}
