/* Route groups and matching. Every facade registers a group: its routes, an
 * auth hook and an error envelope. A request goes to the first route whose
 * pattern and method match; an unmatched path is answered (404, or 405 with
 * Allow) in the envelope of the group owning a route with that path, else of
 * the group with the longest matching prefix, else of the default group. */
#include <stdio.h>
#include <string.h>

#include "http/internal.h"

struct http_group *http_server_group(struct http_server *s, const char *prefix, const struct http_group_ops *ops,
                                     void *cls)
{
        struct http_group *g = calloc(1, sizeof(*g));
        if (!g)
                return NULL;
        if (prefix && strlen(prefix) >= sizeof(g->prefix)) {
                free(g);
                return NULL;
        }
        snprintf(g->prefix, sizeof(g->prefix), "%s", prefix ? prefix : "");
        g->ops = ops;
        g->cls = cls;
        /* Appended: routes of earlier groups are tried first. */
        struct http_group **p = &s->groups;
        while (*p)
                p = &(*p)->next;
        *p = g;
        return g;
}

int http_group_routes(struct http_group *g, const struct route *routes, size_t n)
{
        struct route_table *t = realloc(g->tables, (g->ntables + 1) * sizeof(*t));
        if (!t)
                return -ENOMEM;
        g->tables = t;
        g->tables[g->ntables++] = (struct route_table){ routes, n };
        return 0;
}

void router_free_groups(struct http_server *srv)
{
        while (srv->groups) {
                struct http_group *g = srv->groups;
                srv->groups = g->next;
                free(g->tables);
                free(g);
        }
}

bool http_match(const char *pattern, const char *path, const char **captures, char *buf, size_t buflen)
{
        size_t used = 0, ncap = 0;
        const char *p = pattern, *s = path;
        while (*p) {
                if (*p != *s && *p != ':' && *p != '*')
                        return false;
                if (*p == '*') {
                        /* The rest of the path, possibly empty. */
                        size_t n = strlen(s);
                        if (used + n + 1 > buflen || ncap >= HTTP_MAX_CAPTURES)
                                return false;
                        memcpy(buf + used, s, n + 1);
                        captures[ncap++] = buf + used;
                        return true;
                }
                if (*p == ':') {
                        size_t n = strcspn(s, "/");
                        if (n == 0 || used + n + 1 > buflen || ncap >= HTTP_MAX_CAPTURES)
                                return false;
                        memcpy(buf + used, s, n);
                        buf[used + n] = '\0';
                        captures[ncap++] = buf + used;
                        used += n + 1;
                        s += n;
                        p += strcspn(p, "/");
                        continue;
                }
                p++;
                s++;
        }
        return *s == '\0';
}

static bool pattern_matches(const char *pattern, const char *path, const char **caps, char *buf, size_t len)
{
        if (http_match(pattern, path, caps, buf, len))
                return true;
        /* A pattern ending in a star segment also matches without it. */
        size_t pl = strlen(pattern);
        if (pl >= 2 && strcmp(pattern + pl - 2, "/*") == 0) {
                char trimmed[256];
                if (pl - 2 >= sizeof(trimmed))
                        return false;
                memcpy(trimmed, pattern, pl - 2);
                trimmed[pl - 2] = '\0';
                if (http_match(trimmed, path, caps, buf, len)) {
                        size_t n = 0;
                        while (n < HTTP_MAX_CAPTURES && caps[n])
                                n++;
                        if (n < HTTP_MAX_CAPTURES)
                                caps[n] = "";
                        return true;
                }
        }
        return false;
}

static void allow_add(char *allow, size_t allowlen, const char *method)
{
        if (strstr(allow, method))
                return;
        size_t used = strlen(allow);
        snprintf(allow + used, allowlen - used, "%s%s", used ? ", " : "", method);
}

/* The group for a path no route matched: longest prefix, else default. */
static struct http_group *group_by_prefix(struct http_server *srv, const char *path)
{
        struct http_group *best = NULL;
        size_t best_len = 0;
        for (struct http_group *g = srv->groups; g; g = g->next) {
                size_t n = strlen(g->prefix);
                if (strncmp(path, g->prefix, n) != 0 || (best && n <= best_len))
                        continue;
                best = g;
                best_len = n;
        }
        return best ? best : srv->groups;
}

const struct route *router_find(struct http_server *srv, struct conn_state *st, bool *path_matched, char *allow,
                                size_t allowlen)
{
        *path_matched = false;
        allow[0] = '\0';
        struct http_group *owner = NULL;
        for (struct http_group *g = srv->groups; g; g = g->next)
                for (size_t t = 0; t < g->ntables; t++)
                        for (size_t i = 0; i < g->tables[t].n; i++) {
                                const struct route *r = &g->tables[t].v[i];
                                const char *caps[HTTP_MAX_CAPTURES] = { 0 };
                                if (!pattern_matches(r->pattern, st->path, caps, st->capbuf, st->capbuf_len))
                                        continue;
                                if (strcmp(r->method, st->req.method) == 0) {
                                        memcpy(st->req.captures, caps, sizeof(caps));
                                        st->req.route = r->pattern;
                                        st->group = g;
                                        return r;
                                }
                                allow_add(allow, allowlen, r->method);
                                if (!owner)
                                        owner = g;
                                *path_matched = true;
                        }
        st->group = owner ? owner : group_by_prefix(srv, st->path);
        return NULL;
}

void http_fail(struct conn_state *st, int status, const char *message)
{
        struct http_group *g = st->group;
        if (g && g->ops && g->ops->envelope) {
                g->ops->envelope(g->cls, &st->res, status, message);
                return;
        }
        http_json(&st->res, status, json_pack("{s:s}", "error", message));
}
