/* The store's public functions: pick a backend from the URL, check
 * arguments once for every backend, serialise single-connection backends,
 * and run *_each callbacks after the rows were read (see backend.h). No
 * SQL here: that lives in the backends (store/sqlite/, store/pg/). */
#include "store/store.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "store/core.h"

/* URL scheme → backend (libpq takes both spellings of PostgreSQL's). */
static const struct {
        const char *scheme;
        const struct store_ops *ops;
} backends[] = {
        { "sqlite", &store_sqlite_ops },
        { "postgres", &store_pg_ops },
        { "postgresql", &store_pg_ops },
};

void store_set_msg(char *buf, size_t len, const char *fmt, ...)
{
        va_list ap;

        if (!buf || len == 0)
                return;
        va_start(ap, fmt);
        vsnprintf(buf, len, fmt, ap);
        va_end(ap);
}

/* ---- row lists -------------------------------------------------------- */

void *store_rows_push(struct store_rows *l)
{
        void *item;

        if (l->n == l->cap) {
                size_t ncap = l->cap ? l->cap * 2 : 16;
                void *np = reallocarray(l->items, ncap, l->size);
                if (!np)
                        return NULL;
                l->items = np;
                l->cap = ncap;
        }
        item = (char *)l->items + l->n++ * l->size;
        memset(item, 0, l->size);
        return item;
}

static void *rows_at(const struct store_rows *l, size_t i)
{
        return (char *)l->items + i * l->size;
}

static void store_rows_done(struct store_rows *l)
{
        for (size_t i = 0; l->done && i < l->n; i++)
                l->done(rows_at(l, i));
        free(l->items);
        *l = (struct store_rows){};
}

void sandbox_row_done(struct sandbox_row *r)
{
        if (!r)
                return;
        free(r->env_json);
        r->env_json = NULL;
}

void context_row_done(struct context_row *r)
{
        if (!r)
                return;
        free(r->env_json);
        r->env_json = NULL;
}

/* ---- locking ---------------------------------------------------------- */

static pthread_mutex_t *store_lock(struct store *s)
{
        if (!s->ops->serialize)
                return NULL;
        pthread_mutex_lock(&s->lock);
        return &s->lock;
}

static void unlockp(pthread_mutex_t **m)
{
        if (*m)
                pthread_mutex_unlock(*m);
}

/* ---- argument checks -------------------------------------------------- */

static int check_id(const char *id);

/* A value that will be read back into a char[size] field must fit with its
 * NUL; strnlen keeps this safe for unterminated fixed-size inputs. */
static int check_str(const char *v, size_t size)
{
        if (!v)
                return -EINVAL;
        if (strnlen(v, size) >= size)
                return -ENAMETOOLONG;
        return 0;
}

static int check_id(const char *id)
{
        int r = check_str(id, STORE_ID_MAX);
        if (r < 0)
                return r;
        return id[0] ? 0 : -EINVAL;
}

/* ---- open / close ----------------------------------------------------- */

/* "scheme:" per RFC 3986 (ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )).
 * Returns the scheme length, or 0 when url is a plain path. */
static size_t scheme_len(const char *url)
{
        size_t i = 0;

        if (!((url[0] >= 'a' && url[0] <= 'z') || (url[0] >= 'A' && url[0] <= 'Z')))
                return 0;
        while (url[i] && url[i] != ':') {
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.", url[i]))
                        return 0;
                i++;
        }
        return url[i] == ':' ? i : 0;
}

static const struct store_ops *find_backend(const char *scheme, size_t len)
{
        for (size_t i = 0; i < ARRAY_SIZE(backends); i++)
                if (strlen(backends[i].scheme) == len && strncasecmp(backends[i].scheme, scheme, len) == 0)
                        return backends[i].ops;
        return NULL;
}

int store_open(const char *url, struct store **ret, struct err *err)
{
        const struct store_ops *ops = &store_sqlite_ops;
        const char *rest;
        struct store *s = NULL;
        size_t n;
        int r;

        if (!url || !ret)
                return err_set(err, ERR_INVALID, EINVAL, "store open failed: invalid arguments");
        n = scheme_len(url);
        rest = n ? url + n + 1 : url;
        if (n) {
                ops = find_backend(url, n);
                if (!ops)
                        return err_set(err, ERR_INVALID, EPROTONOSUPPORT, "no store backend for scheme '%.*s'",
                                       (int)n, url);
        }
        r = ops->open(url, rest, &s, err);
        if (r < 0)
                return r;
        s->ops = ops;
        r = -pthread_mutex_init(&s->lock, NULL);
        if (r < 0) {
                err_set(err, ERR_INTERNAL, -r, "store open failed at mutex init: %s", strerror(-r));
                ops->close(s);
                return r;
        }
        *ret = s;
        return 0;
}

void store_close(struct store *s)
{
        if (!s)
                return;
        pthread_mutex_destroy(&s->lock);
        s->ops->close(s);
}

const char *store_backend_name(const struct store *s)
{
        return s ? s->ops->name : "none";
}

int store_integrity_check(struct store *s, char *msg, size_t len)
{
        if (!s)
                return -EINVAL;
        STORE_GUARD(s);
        return s->ops->integrity_check(s, msg, len);
}

int store_schema_version(struct store *s)
{
        if (!s)
                return -EINVAL;
        STORE_GUARD(s);
        return s->ops->schema_version(s);
}

/* ---- orgs ------------------------------------------------------------- */

int store_org_ensure(struct store *s, const char *id, const char *name)
{
        int r;

        if (!s)
                return -EINVAL;
        if (!name)
                name = "";
        if ((r = check_id(id)) < 0 || (r = check_str(name, sizeof(((struct org_row *)NULL)->name))) < 0)
                return r;
        STORE_GUARD(s);
        return s->ops->org_ensure(s, id, name);
}

int store_org_get(struct store *s, const char *id, struct org_row *ret)
{
        STORE_CALL(s, ret, id, s->ops->org_get(s, id, ret));
}

/* ---- tenants ---------------------------------------------------------- */

static int check_user(const struct user_row *u)
{
        int r;

        if ((r = check_id(u->id)) < 0 || (r = check_id(u->org_id)) < 0 || (r = CHECK_FIELD(u, email)) < 0 ||
            (r = CHECK_FIELD(u, first_name)) < 0 || (r = CHECK_FIELD(u, last_name)) < 0 ||
            (r = CHECK_FIELD(u, role)) < 0 || (r = CHECK_FIELD(u, password_hash)) < 0)
                return r;
        return u->email[0] ? 0 : -EINVAL;
}

int store_account_create(struct store *s, const struct org_row *org, const struct user_row *user)
{
        int r;

        if (!s || !org || !user)
                return -EINVAL;
        if ((r = check_id(org->id)) < 0 || (r = CHECK_FIELD(org, name)) < 0 || (r = CHECK_FIELD(org, slug)) < 0 ||
            (r = CHECK_FIELD(org, plan)) < 0 || (r = check_user(user)) < 0)
                return r;
        if (strcmp(org->id, user->org_id) != 0)
                return -EINVAL;
        STORE_GUARD(s);
        return s->ops->account_create(s, org, user);
}

int store_user_get(struct store *s, const char *id, struct user_row *ret)
{
        STORE_CALL(s, ret, id, s->ops->user_get(s, id, ret));
}

int store_user_get_by_email(struct store *s, const char *email, struct user_row *ret)
{
        if (!s || !ret || !email || !email[0])
                return -EINVAL;
        if (strlen(email) >= sizeof(ret->email))
                return -ENOENT;   /* cannot have been stored */
        STORE_GUARD(s);
        return s->ops->user_get_by_email(s, email, ret);
}

int store_apikey_create(struct store *s, const struct apikey_row *row)
{
        int r;

        if (!s || !row)
                return -EINVAL;
        if ((r = check_id(row->id)) < 0 || (r = check_id(row->org_id)) < 0 || (r = CHECK_FIELD(row, user_id)) < 0 ||
            (r = CHECK_FIELD(row, name)) < 0 || (r = CHECK_FIELD(row, prefix)) < 0 || (r = CHECK_FIELD(row, hash)) < 0)
                return r;
        if (!row->hash[0])
                return -EINVAL;
        STORE_GUARD(s);
        return s->ops->apikey_create(s, row);
}

int store_apikey_get_by_hash(struct store *s, const char *hash, struct apikey_row *ret)
{
        STORE_CALL(s, ret, hash, s->ops->apikey_get_by_hash(s, hash, ret));
}

int store_apikey_get(struct store *s, const char *org_id, const char *id, struct apikey_row *ret)
{
        int r = check_id(org_id);
        if (r < 0)
                return r;
        STORE_CALL(s, ret, id, s->ops->apikey_get(s, org_id, id, ret));
}

/* One page of an org's rows into l (under the lock), its total count. */
static int org_page(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, org_page_op op,
                    struct store_rows *l, uint64_t *ret_total)
{
        if (!s || !ret_total || limit > INT64_MAX || offset > INT64_MAX)
                return -EINVAL;
        int r = check_id(org_id);
        if (r < 0)
                return r;
        STORE_GUARD(s);
        return op(s, org_id, limit, offset, l, ret_total);
}

int store_apikey_each(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                      void (*fn)(const struct apikey_row *row, void *userdata), void *userdata,
                      uint64_t *ret_total)
{
        _cleanup_(store_rows_done) struct store_rows l = { .size = sizeof(struct apikey_row) };
        if (!fn)
                return -EINVAL;
        int r = org_page(s, org_id, limit, offset, s ? s->ops->apikey_list : NULL, &l, ret_total);
        for (size_t i = 0; r == 0 && i < l.n; i++)
                fn(rows_at(&l, i), userdata);
        return r;
}

int store_apikey_delete(struct store *s, const char *org_id, const char *id)
{
        int r = check_id(org_id);
        if (r < 0)
                return r;
        STORE_CALL(s, true, id, s->ops->apikey_delete(s, org_id, id));
}

int store_apikey_rehash(struct store *s, const char *org_id, const char *id, const char *hash, const char *prefix)
{
        int r;

        if (!hash || !prefix || !hash[0] || strlen(hash) >= sizeof(((struct apikey_row *)NULL)->hash) ||
            strlen(prefix) >= sizeof(((struct apikey_row *)NULL)->prefix))
                return -EINVAL;
        if ((r = check_id(org_id)) < 0)
                return r;
        STORE_CALL(s, true, id, s->ops->apikey_rehash(s, org_id, id, hash, prefix));
}

int store_session_create(struct store *s, const struct session_row *row)
{
        int r;

        if (!s || !row)
                return -EINVAL;
        if ((r = check_id(row->id)) < 0 || (r = check_id(row->user_id)) < 0 || (r = check_id(row->org_id)) < 0)
                return r;
        STORE_GUARD(s);
        return s->ops->session_create(s, row);
}

int store_session_get(struct store *s, const char *id, struct session_row *ret)
{
        STORE_CALL(s, ret, id, s->ops->session_get(s, id, ret));
}

int store_session_revoke(struct store *s, const char *id)
{
        STORE_CALL(s, true, id, s->ops->session_revoke(s, id));
}

void idem_row_done(struct idem_row *r)
{
        if (!r)
                return;
        free(r->response);
        r->response = NULL;
}

int store_idem_get(struct store *s, const char *org_id, const char *key, const char *route, uint64_t not_before,
                   struct idem_row *ret)
{
        int r;

        if (!key || !route || !key[0] || strlen(key) >= sizeof(ret->key) || strlen(route) >= sizeof(ret->route))
                return -EINVAL;
        if ((r = check_id(org_id)) < 0)
                return r;
        STORE_CALL(s, ret, org_id, s->ops->idem_get(s, org_id, key, route, not_before, ret));
}

int store_idem_put(struct store *s, const struct idem_row *row, uint64_t not_before)
{
        int r;

        if (!s || !row || !row->response || !row->key[0])
                return -EINVAL;
        if ((r = check_id(row->org_id)) < 0 || (r = CHECK_FIELD(row, key)) < 0 || (r = CHECK_FIELD(row, route)) < 0 ||
            (r = CHECK_FIELD(row, body_hash)) < 0)
                return r;
        STORE_GUARD(s);
        return s->ops->idem_put(s, row, not_before);
}

/* ---- secrets ---------------------------------------------------------- */

void secret_row_done(struct secret_row *r)
{
        if (!r)
                return;
        free(r->sealed);
        r->sealed = NULL;
}

static void secret_item_done(void *item)
{
        secret_row_done(item);
}

static int check_secret(const struct secret_row *row)
{
        int r;

        if (!row || !row->sealed || !row->sealed[0])
                return -EINVAL;
        if ((r = check_id(row->org_id)) < 0 || (r = check_id(row->name)) < 0 || (r = CHECK_FIELD(row, key_id)) < 0)
                return r;
        return 0;
}

int store_secret_create(struct store *s, const struct secret_row *row)
{
        STORE_CALL(s, true, row ? row->org_id : NULL, check_secret(row) ?: s->ops->secret_create(s, row));
}

int store_secret_update(struct store *s, const struct secret_row *row)
{
        STORE_CALL(s, true, row ? row->org_id : NULL, check_secret(row) ?: s->ops->secret_update(s, row));
}

int store_secret_delete(struct store *s, const char *org_id, const char *name)
{
        int r = check_id(org_id);
        if (r < 0)
                return r;
        STORE_CALL(s, true, name, s->ops->secret_delete(s, org_id, name));
}

int store_secret_each(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                      void (*fn)(const struct secret_row *row, void *userdata), void *userdata,
                      uint64_t *ret_total)
{
        _cleanup_(store_rows_done) struct store_rows l = { .size = sizeof(struct secret_row),
                                                           .done = secret_item_done };
        int r = fn ? org_page(s, org_id, limit, offset, s ? s->ops->secret_list : NULL, &l, ret_total) : -EINVAL;

        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(rows_at(&l, i), userdata);
        return r;
}

/* ---- sandboxes -------------------------------------------------------- */

int store_sandbox_get(struct store *s, const char *id, struct sandbox_row *ret)
{
        STORE_CALL(s, ret, id, s->ops->sandbox_get(s, id, ret));
}

int store_sandbox_put(struct store *s, const struct sandbox_row *row)
{
        int r;

        if (!s || !row)
                return -EINVAL;
        if ((r = check_id(row->id)) < 0 || (r = check_id(row->org_id)) < 0 ||
            (r = check_str(row->warm_class, sizeof(row->warm_class))) < 0 ||
            (r = check_str(row->node_id, sizeof(row->node_id))) < 0)
                return r;
        STORE_GUARD(s);
        return s->ops->sandbox_put(s, row);
}

int store_sandbox_touch(struct store *s, const char *id, uint64_t last_used, uint64_t expires_at)
{
        STORE_CALL(s, true, id, s->ops->sandbox_touch(s, id, last_used, expires_at));
}

int store_sandbox_set_env(struct store *s, const char *id, const char *env_json)
{
        STORE_CALL(s, true, id, s->ops->sandbox_set_env(s, id, env_json ? env_json : "{}"));
}

int store_sandbox_delete(struct store *s, const char *id)
{
        STORE_CALL(s, true, id, s->ops->sandbox_delete(s, id));
}

int store_sandbox_rekey(struct store *s, const char *old_id, const struct sandbox_row *row)
{
        int r;

        if (!s || !row)
                return -EINVAL;
        if ((r = check_id(old_id)) < 0 || (r = check_id(row->id)) < 0 || (r = check_id(row->org_id)) < 0 ||
            (r = check_str(row->warm_class, sizeof(row->warm_class))) < 0 ||
            (r = check_str(row->node_id, sizeof(row->node_id))) < 0)
                return r;
        JOURNAL_WRITE(s);
        /* The old row first: the two never coexist, even in a WAL cut
         * short by a power loss (a prefix of its commits survives), so
         * no two sandboxes ever share the host id. */
        r = s->ops->sandbox_delete(s, old_id);
        return r < 0 && r != -ENOENT ? r : s->ops->sandbox_put(s, row);
}

/* Each *_each reads its rows into a store_rows under the lock (the
 * backend's list op) and walks them after releasing it. */
static int each_id(const struct store_rows *l, int r, void (*fn)(const char *id, void *userdata), void *userdata)
{
        if (r < 0)
                return r;
        for (size_t i = 0; i < l->n; i++)
                fn(((struct store_id *)rows_at(l, i))->id, userdata);
        return 0;
}

int store_sandbox_each_expired(struct store *s, uint64_t now,
                               void (*fn)(const char *id, void *userdata), void *userdata)
{
        _cleanup_(store_rows_done) struct store_rows l = { .size = sizeof(struct store_id) };
        int r;

        if (!s || !fn)
                return -EINVAL;
        {
                STORE_GUARD(s);
                r = s->ops->sandbox_list_expired(s, now, &l);
        }
        return each_id(&l, r, fn, userdata);
}

int store_sandbox_each_in_org(struct store *s, const char *org_id,
                              void (*fn)(const char *id, void *userdata), void *userdata)
{
        _cleanup_(store_rows_done) struct store_rows l = { .size = sizeof(struct store_id) };
        int r;

        if (!s || !fn)
                return -EINVAL;
        if ((r = check_id(org_id)) < 0)
                return r;
        {
                STORE_GUARD(s);
                r = s->ops->sandbox_ids_in_org(s, org_id, &l);
        }
        return each_id(&l, r, fn, userdata);
}

int store_sandbox_each_in_class(struct store *s, const char *org_id, const char *warm_class,
                                void (*fn)(const char *id, void *userdata), void *userdata)
{
        _cleanup_(store_rows_done) struct store_rows l = { .size = sizeof(struct store_id) };
        int r;

        if (!s || !fn || !warm_class)
                return -EINVAL;
        if ((r = check_id(org_id)) < 0 || (r = check_str(warm_class, STORE_ID_MAX)) < 0)
                return r;
        {
                STORE_GUARD(s);
                r = s->ops->sandbox_ids_in_class(s, org_id, warm_class, &l);
        }
        return each_id(&l, r, fn, userdata);
}

static void sandbox_item_done(void *item)
{
        sandbox_row_done(item);
}

int store_sandbox_each_org(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                           void (*fn)(const struct sandbox_row *row, void *userdata), void *userdata,
                           uint64_t *ret_total)
{
        _cleanup_(store_rows_done) struct store_rows l = { .size = sizeof(struct sandbox_row),
                                                           .done = sandbox_item_done };
        if (!fn)
                return -EINVAL;
        int r = org_page(s, org_id, limit, offset, s ? s->ops->sandbox_list_org : NULL, &l, ret_total);
        for (size_t i = 0; r == 0 && i < l.n; i++)
                fn(rows_at(&l, i), userdata);
        return r;
}

int store_sandbox_count(struct store *s, uint64_t *ret)
{
        if (!s || !ret)
                return -EINVAL;
        STORE_GUARD(s);
        return s->ops->sandbox_count(s, ret);
}

int store_sandbox_disk_reserved(struct store *s, uint64_t default_bytes, uint64_t *ret)
{
        if (!s || !ret)
                return -EINVAL;
        STORE_GUARD(s);
        return s->ops->sandbox_disk_reserved(s, default_bytes, ret);
}

int store_sandbox_free_host_id(struct store *s, uint32_t first, uint32_t n, uint32_t *ret)
{
        if (!s || !ret || n == 0 || (uint64_t)first + n > UINT32_MAX)
                return -EINVAL;
        STORE_GUARD(s);
        return s->ops->sandbox_free_host_id(s, first, n, ret);
}

/* ---- for the core's other files (core.h) -------------------------------- */

int store_core_org_page(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, org_page_op op,
                        struct store_rows *l, uint64_t *ret_total)
{
        return org_page(s, org_id, limit, offset, op, l, ret_total);
}

void store_core_rows_done(struct store_rows *l)
{
        store_rows_done(l);
}

void *store_core_row(const struct store_rows *l, size_t i)
{
        return rows_at(l, i);
}

int store_core_check_id(const char *id)
{
        return check_id(id);
}

int store_core_check_str(const char *v, size_t size)
{
        return check_str(v, size);
}

pthread_mutex_t *store_core_lock(struct store *s)
{
        pthread_mutex_t *m = store_lock(s);
        store_core_strict(s);
        return m;
}

pthread_mutex_t *store_core_lock_journal(struct store *s)
{
        return store_lock(s);
}

void store_core_unlockp(pthread_mutex_t **m)
{
        unlockp(m);
}
