/* The store's public functions: pick a backend from the URL, check
 * arguments once for every backend, serialise single-connection backends,
 * and run *_each callbacks after the rows were read (see backend.h). No
 * SQL here: that lives in the backends (store/sqlite/). */
#include "store/store.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "store/backend.h"

/* URL scheme → backend. The PostgreSQL backend adds its row here
 * ({ "postgres", &store_pg_ops }, { "postgresql", &store_pg_ops }). */
static const struct {
        const char *scheme;
        const struct store_ops *ops;
} backends[] = {
        { "sqlite", &store_sqlite_ops },
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

static void store_cell_done(void *item)
{
        free(((struct store_cell *)item)->buf);
}

static void context_item_done(void *item)
{
        context_row_done(item);
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

/* Held until the end of the enclosing scope; the backend's own cleanups
 * (statements, transactions) have all run by then. */
#define STORE_GUARD(s) _cleanup_(unlockp) UNUSED pthread_mutex_t *store_guard_ = store_lock(s)

/* ---- argument checks -------------------------------------------------- */

static int check_id(const char *id);

/* The frame of most public functions: the arguments checked once for every
 * backend, then the backend's op run under the guard. */
#define STORE_CALL(s, args_ok, id, call)        \
        do {                                    \
                if (!(s) || !(args_ok))         \
                        return -EINVAL;         \
                int r_ = check_id(id);          \
                if (r_ < 0)                     \
                        return r_;              \
                STORE_GUARD(s);                 \
                return (call);                  \
        } while (0)

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

static int check_context_state(const struct context_row *row)
{
        int r;

        if ((r = check_id(row->id)) < 0 ||
            (r = check_str(row->cwd, sizeof(row->cwd))) < 0 ||
            (r = check_str(row->build, sizeof(row->build))) < 0)
                return r;
        return 0;
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

#define CHECK_FIELD(row, f) check_str((row)->f, sizeof((row)->f))

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

typedef int (*org_page_op)(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                           struct store_rows *out, uint64_t *ret_total);

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

/* ---- artifacts -------------------------------------------------------- */

void artifact_row_done(struct artifact_row *r)
{
        if (!r)
                return;
        free(r->metadata);
        r->metadata = NULL;
}

static void artifact_item_done(void *item)
{
        artifact_row_done(item);
}

static int check_artifact(const struct artifact_row *a)
{
        int r;
        if (!a || !a->name[0] || !a->content_type[0] || !a->state[0])
                return -EINVAL;
        if ((r = check_id(a->org_id)) < 0 || (r = CHECK_FIELD(a, sandbox_id)) < 0 || (r = CHECK_FIELD(a, state)) < 0 ||
            (r = CHECK_FIELD(a, name)) < 0 || (r = CHECK_FIELD(a, path)) < 0 ||
            (r = CHECK_FIELD(a, content_type)) < 0 || (r = CHECK_FIELD(a, checksum)) < 0)
                return r;
        if (a->size > INT64_MAX || a->created_at > INT64_MAX || a->expires_at > INT64_MAX || a->ttl_s > INT64_MAX)
                return -ERANGE;
        return 0;
}

int store_artifact_put(struct store *s, const struct artifact_row *row)
{
        STORE_CALL(s, true, row ? row->id : NULL, check_artifact(row) ?: s->ops->artifact_put(s, row));
}

int store_artifact_get(struct store *s, const char *org_id, const char *id, struct artifact_row *ret)
{
        int r = check_id(org_id);
        if (r < 0)
                return r;
        STORE_CALL(s, ret, id, s->ops->artifact_get(s, org_id, id, ret));
}

int store_artifact_delete(struct store *s, const char *org_id, const char *id)
{
        int r = check_id(org_id);
        if (r < 0)
                return r;
        STORE_CALL(s, true, id, s->ops->artifact_delete(s, org_id, id));
}

int store_artifact_each(struct store *s, const struct artifact_filter *f, uint64_t limit, uint64_t offset,
                        void (*fn)(const struct artifact_row *row, void *userdata), void *userdata,
                        uint64_t *ret_total)
{
        _cleanup_(store_rows_done) struct store_rows l = { .size = sizeof(struct artifact_row),
                                                           .done = artifact_item_done };
        if (!s || !f || !fn || !ret_total || !f->state || !f->sandbox_id || !f->name_prefix || limit > INT64_MAX ||
            offset > INT64_MAX || f->now > INT64_MAX)
                return -EINVAL;
        int r = check_id(f->org_id);
        if (r < 0)
                return r;
        {
                STORE_GUARD(s);
                r = s->ops->artifact_list(s, f, limit, offset, &l, ret_total);
        }
        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(rows_at(&l, i), userdata);
        return r;
}

int store_artifact_each_expired(struct store *s, uint64_t now,
                                void (*fn)(const struct artifact_row *row, void *userdata), void *userdata)
{
        _cleanup_(store_rows_done) struct store_rows l = { .size = sizeof(struct artifact_row),
                                                           .done = artifact_item_done };
        if (!s || !fn || now > INT64_MAX)
                return -EINVAL;
        int r;
        {
                STORE_GUARD(s);
                r = s->ops->artifact_list_expired(s, now, &l);
        }
        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(rows_at(&l, i), userdata);
        return r;
}

int store_artifact_bytes(struct store *s, const char *org_id, uint64_t *ret)
{
        STORE_CALL(s, ret, org_id, s->ops->artifact_bytes(s, org_id, ret));
}

/* ---- queued requests -------------------------------------------------- */

void queue_row_done(struct queue_row *r)
{
        if (!r)
                return;
        free(r->body);
        free(r->caller);
        free(r->response_body);
        r->body = r->caller = r->response_body = NULL;
}

static void queue_item_done(void *item)
{
        queue_row_done(item);
}

static int check_queue_row(const struct queue_row *row)
{
        int r;
        if (!row || !row->body || !row->caller)
                return -EINVAL;
        if ((r = check_id(row->id)) < 0 || (r = check_id(row->org_id)) < 0)
                return r;
        return check_str(row->kind, sizeof(row->kind)) ?: check_str(row->status, sizeof(row->status));
}

int store_queue_insert(struct store *s, const struct queue_row *row)
{
        STORE_CALL(s, true, row ? row->id : NULL, check_queue_row(row) ?: s->ops->queue_insert(s, row));
}

int store_queue_get(struct store *s, const char *org_id, const char *id, struct queue_row *ret)
{
        int r = check_id(org_id);
        if (r < 0)
                return r;
        STORE_CALL(s, ret, id, s->ops->queue_get(s, org_id, id, ret));
}

int store_queue_update(struct store *s, const struct queue_row *row)
{
        STORE_CALL(s, true, row ? row->id : NULL, check_queue_row(row) ?: s->ops->queue_update(s, row));
}

int store_queue_each(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                     void (*fn)(const struct queue_row *row, void *userdata), void *userdata, uint64_t *ret_total)
{
        _cleanup_(store_rows_done) struct store_rows l = { .size = sizeof(struct queue_row), .done = queue_item_done };
        int r = fn ? org_page(s, org_id, limit, offset, s ? s->ops->queue_list : NULL, &l, ret_total) : -EINVAL;
        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(rows_at(&l, i), userdata);
        return r;
}

int store_queue_heads(struct store *s, void (*fn)(const struct queue_row *row, void *userdata), void *userdata)
{
        _cleanup_(store_rows_done) struct store_rows l = { .size = sizeof(struct queue_row), .done = queue_item_done };
        if (!s || !fn)
                return -EINVAL;
        int r;
        {
                STORE_GUARD(s);
                r = s->ops->queue_heads(s, &l);
        }
        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(rows_at(&l, i), userdata);
        return r;
}

int store_queue_position(struct store *s, const char *org_id, const char *id, uint64_t *ret_ahead,
                         uint64_t *ret_depth)
{
        int r = check_id(org_id);
        if (r < 0)
                return r;
        STORE_CALL(s, ret_ahead && ret_depth, id, s->ops->queue_position(s, org_id, id, ret_ahead, ret_depth));
}

int store_queue_stats(struct store *s, const char *org_id, uint64_t since, struct queue_stats *ret)
{
        STORE_CALL(s, ret, org_id, s->ops->queue_stats(s, org_id, since, ret));
}

int store_queue_settle(struct store *s, bool at_start, uint32_t failed_status, const char *failed_body, uint64_t now,
                       uint64_t expire_before, uint64_t forget_before)
{
        if (!s || !failed_body)
                return -EINVAL;
        STORE_GUARD(s);
        return s->ops->queue_settle(s, at_start, failed_status, failed_body, now, expire_before, forget_before);
}

/* ---- checkpoints ------------------------------------------------------ */

void checkpoint_row_done(struct checkpoint_row *r)
{
        if (!r)
                return;
        free(r->name);
        free(r->description);
        free(r->meta_json);
        r->name = r->description = r->meta_json = NULL;
}

static void checkpoint_item_done(void *item)
{
        checkpoint_row_done(item);
}

static int check_checkpoint(const struct checkpoint_row *row)
{
        int r;

        if (!row || !row->name || !row->description || !row->meta_json)
                return -EINVAL;
        if ((r = check_id(row->org_id)) < 0 || (r = check_id(row->sandbox_id)) < 0 ||
            (r = CHECK_FIELD(row, checksum)) < 0 || row->size_bytes > INT64_MAX || row->file_count > INT64_MAX)
                return r < 0 ? r : -ERANGE;
        return 0;
}

int store_checkpoint_create(struct store *s, const struct checkpoint_row *row)
{
        STORE_CALL(s, true, row ? row->id : NULL, check_checkpoint(row) ?: s->ops->checkpoint_create(s, row));
}

int store_checkpoint_get(struct store *s, const char *org_id, const char *id, struct checkpoint_row *ret)
{
        int r = check_id(org_id);
        if (r < 0)
                return r;
        STORE_CALL(s, ret, id, s->ops->checkpoint_get(s, org_id, id, ret));
}

int store_checkpoint_delete(struct store *s, const char *org_id, const char *id)
{
        int r = check_id(org_id);
        if (r < 0)
                return r;
        STORE_CALL(s, true, id, s->ops->checkpoint_delete(s, org_id, id));
}

int store_checkpoint_each(struct store *s, const char *org_id, const char *sandbox_id, uint64_t limit,
                          uint64_t offset, void (*fn)(const struct checkpoint_row *row, void *userdata),
                          void *userdata, uint64_t *ret_total)
{
        _cleanup_(store_rows_done) struct store_rows l = { .size = sizeof(struct checkpoint_row),
                                                           .done = checkpoint_item_done };
        int r = !s || !fn || !ret_total || limit > INT64_MAX || offset > INT64_MAX ? -EINVAL : check_id(org_id);
        if (r == 0 && sandbox_id)
                r = check_id(sandbox_id);
        if (r < 0)
                return r;
        {
                STORE_GUARD(s);
                r = s->ops->checkpoint_list(s, org_id, sandbox_id, limit, offset, &l, ret_total);
        }
        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(rows_at(&l, i), userdata);
        return r;
}

int store_checkpoint_usage(struct store *s, const char *org_id, uint64_t *ret_count, uint64_t *ret_bytes)
{
        STORE_CALL(s, ret_count && ret_bytes, org_id, s->ops->checkpoint_usage(s, org_id, ret_count, ret_bytes));
}

/* ---- snapshot profiles ------------------------------------------------ */

static int check_profile(const struct snapshot_profile_row *row)
{
        int r;
        if (!row || (r = check_id(row->key)) < 0 ||
            (r = check_str(row->kernel_path, sizeof(row->kernel_path))) < 0 ||
            (r = check_str(row->rootfs_path, sizeof(row->rootfs_path))) < 0)
                return r < 0 ? r : -EINVAL;
        return 0;
}

int store_snapshot_profile_put(struct store *s, const struct snapshot_profile_row *row,
                               struct snapshot_profile_row *ret)
{
        STORE_CALL(s, true, row ? row->key : NULL, check_profile(row) ?: s->ops->snapshot_profile_put(s, row, ret));
}

int store_snapshot_profile_get(struct store *s, const char *key, struct snapshot_profile_row *ret)
{
        STORE_CALL(s, ret, key, s->ops->snapshot_profile_get(s, key, ret));
}

int store_snapshot_profile_delete(struct store *s, const char *key)
{
        STORE_CALL(s, true, key, s->ops->snapshot_profile_delete(s, key));
}

int store_snapshot_profile_each(struct store *s, void (*fn)(const struct snapshot_profile_row *row, void *userdata),
                                void *userdata)
{
        _cleanup_(store_rows_done) struct store_rows l = { .size = sizeof(struct snapshot_profile_row) };
        int r;
        if (!s || !fn)
                return -EINVAL;
        {
                STORE_GUARD(s);
                r = s->ops->snapshot_profile_list(s, &l);
        }
        for (size_t i = 0; r == 0 && i < l.n; i++)
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
            (r = check_str(row->warm_class, sizeof(row->warm_class))) < 0)
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

/* ---- contexts --------------------------------------------------------- */

int store_context_insert(struct store *s, const struct context_row *row)
{
        int r;

        if (!s || !row)
                return -EINVAL;
        if ((r = check_context_state(row)) < 0 ||
            (r = check_id(row->sandbox_id)) < 0 ||
            (r = check_str(row->binding, sizeof(row->binding))) < 0 ||
            (r = check_str(row->language, sizeof(row->language))) < 0)
                return r;
        STORE_GUARD(s);
        return s->ops->context_insert(s, row);
}

int store_context_update(struct store *s, const struct context_row *row)
{
        int r;

        if (!s || !row)
                return -EINVAL;
        if ((r = check_context_state(row)) < 0)
                return r;
        STORE_GUARD(s);
        return s->ops->context_update(s, row);
}

int store_context_get(struct store *s, const char *id, struct context_row *ret)
{
        STORE_CALL(s, ret, id, s->ops->context_get(s, id, ret));
}

int store_context_delete(struct store *s, const char *id)
{
        STORE_CALL(s, true, id, s->ops->context_delete(s, id));
}

/* Reads the rows listed under an id while holding the guard; the caller
 * walks them after it is released. */
static int list_by_id(struct store *s, const char *id,
                      int (*list)(struct store *s, const char *id, struct store_rows *out), struct store_rows *l)
{
        STORE_CALL(s, true, id, list(s, id, l));
}

int store_context_each(struct store *s, const char *sandbox_id,
                       void (*fn)(const struct context_row *row, void *userdata), void *userdata)
{
        _cleanup_(store_rows_done) struct store_rows l = { .size = sizeof(struct context_row),
                                                           .done = context_item_done };
        if (!s || !fn)
                return -EINVAL;
        int r = list_by_id(s, sandbox_id, s->ops->context_list, &l);
        for (size_t i = 0; r == 0 && i < l.n; i++)
                fn(rows_at(&l, i), userdata);
        return r;
}

int store_context_count(struct store *s, const char *sandbox_id, uint64_t *ret)
{
        STORE_CALL(s, ret, sandbox_id, s->ops->context_count(s, sandbox_id, ret));
}

/* ---- cells ------------------------------------------------------------ */

int store_cell_append(struct store *s, const char *context_id, const struct cell_row *cell)
{
        int r;

        if (!s || !cell || !cell->code || !cell->cwd)
                return -EINVAL;
        if ((r = check_id(context_id)) < 0)
                return r;
        STORE_GUARD(s);
        return s->ops->cell_append(s, context_id, cell);
}

/* Replaying a journal runs user code for a long time: it must not hold
 * the lock every other store user needs. */
int store_cell_each(struct store *s, const char *context_id,
                    void (*fn)(const struct cell_row *cell, void *userdata), void *userdata)
{
        _cleanup_(store_rows_done) struct store_rows l = { .size = sizeof(struct store_cell),
                                                           .done = store_cell_done };
        if (!s || !fn)
                return -EINVAL;
        int r = list_by_id(s, context_id, s->ops->cell_list, &l);
        for (size_t i = 0; r == 0 && i < l.n; i++)
                fn(&((struct store_cell *)rows_at(&l, i))->row, userdata);
        return r;
}

int store_cells_delete(struct store *s, const char *context_id)
{
        STORE_CALL(s, true, context_id, s->ops->cells_delete(s, context_id));
}

int store_cell_stats(struct store *s, const char *context_id, uint64_t *ret_count, uint64_t *ret_bytes)
{
        STORE_CALL(s, ret_count && ret_bytes, context_id, s->ops->cell_stats(s, context_id, ret_count, ret_bytes));
}


/* ---- GitHub integration ------------------------------------------------ */

void gh_install_row_done(struct gh_install_row *r)
{
        if (!r)
                return;
        free(r->repos_json);
        r->repos_json = NULL;
}

static void gh_install_item_done(void *item)
{
        gh_install_row_done(item);
}

/* org ids that may be "" (pending, no org) but otherwise fit. */
static int check_opt_id(const char *id)
{
        return id && !id[0] ? 0 : check_id(id);
}

static int check_gh_install(const struct gh_install_row *row)
{
        int r;
        if (!row || !row->repos_json)
                return -EINVAL;
        if ((r = check_id(row->id)) < 0 || (r = CHECK_FIELD(row, account_login)) < 0 ||
            (r = CHECK_FIELD(row, account_type)) < 0 || (r = CHECK_FIELD(row, status)) < 0)
                return r;
        return 0;
}

int store_gh_install_put(struct store *s, const struct gh_install_row *row)
{
        STORE_CALL(s, true, row ? row->id : NULL, check_gh_install(row) ?: s->ops->gh_install_put(s, row));
}

int store_gh_install_get(struct store *s, const char *id, struct gh_install_row *ret)
{
        STORE_CALL(s, ret, id, s->ops->gh_install_get(s, id, ret));
}

int store_gh_install_delete(struct store *s, const char *id)
{
        STORE_CALL(s, true, id, s->ops->gh_install_delete(s, id));
}

int store_gh_install_link(struct store *s, const char *id, const char *from_org, const char *to_org, uint64_t at)
{
        int r = check_opt_id(from_org) ?: check_opt_id(to_org);
        if (r < 0)
                return r;
        STORE_CALL(s, at <= INT64_MAX, id, s->ops->gh_install_link(s, id, from_org, to_org, at));
}

int store_gh_install_each(struct store *s, const char *org_id, bool pending,
                          void (*fn)(const struct gh_install_row *row, void *userdata), void *userdata)
{
        _cleanup_(store_rows_done) struct store_rows l = { .size = sizeof(struct gh_install_row),
                                                           .done = gh_install_item_done };
        int r = !s || !fn ? -EINVAL : check_id(org_id);
        if (r < 0)
                return r;
        {
                STORE_GUARD(s);
                r = s->ops->gh_install_list(s, org_id, pending, &l);
        }
        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(rows_at(&l, i), userdata);
        return r;
}

int store_gh_settings_get(struct store *s, const char *org_id, char **ret_json, uint64_t *ret_updated_at)
{
        STORE_CALL(s, ret_json && ret_updated_at, org_id, s->ops->gh_settings_get(s, org_id, ret_json, ret_updated_at));
}

int store_gh_settings_put(struct store *s, const char *org_id, const char *json, uint64_t updated_at)
{
        STORE_CALL(s, json && updated_at <= INT64_MAX, org_id, s->ops->gh_settings_put(s, org_id, json, updated_at));
}

static int check_gh_event(const struct gh_event_row *row)
{
        int r;
        if (!row)
                return -EINVAL;
        if ((r = check_id(row->id)) < 0 || (r = CHECK_FIELD(row, delivery_id)) < 0 ||
            (r = check_opt_id(row->org_id)) < 0 || (r = CHECK_FIELD(row, installation_id)) < 0 ||
            (r = CHECK_FIELD(row, event)) < 0 || (r = CHECK_FIELD(row, action)) < 0 || (r = CHECK_FIELD(row, repo)) < 0 ||
            (r = CHECK_FIELD(row, status)) < 0 || (r = CHECK_FIELD(row, error)) < 0 ||
            (r = CHECK_FIELD(row, detail)) < 0 || (r = CHECK_FIELD(row, sandbox_id)) < 0)
                return r;
        return row->pr_number > INT64_MAX || row->received_at > INT64_MAX ? -ERANGE : 0;
}

int store_gh_event_insert(struct store *s, const struct gh_event_row *row, uint64_t keep)
{
        STORE_CALL(s, keep >= 1 && keep <= INT64_MAX, row ? row->id : NULL,
                   check_gh_event(row) ?: s->ops->gh_event_insert(s, row, keep));
}

int store_gh_event_update(struct store *s, const struct gh_event_row *row)
{
        STORE_CALL(s, true, row ? row->id : NULL, check_gh_event(row) ?: s->ops->gh_event_update(s, row));
}

int store_gh_event_each(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                        void (*fn)(const struct gh_event_row *row, void *userdata), void *userdata,
                        uint64_t *ret_total)
{
        _cleanup_(store_rows_done) struct store_rows l = { .size = sizeof(struct gh_event_row) };
        int r = fn ? org_page(s, org_id, limit, offset, s ? s->ops->gh_event_list : NULL, &l, ret_total) : -EINVAL;
        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(rows_at(&l, i), userdata);
        return r;
}

int store_gh_event_stats(struct store *s, const char *org_id, uint64_t since, struct gh_event_stats *ret)
{
        STORE_CALL(s, ret && since <= INT64_MAX, org_id, s->ops->gh_event_stats(s, org_id, since, ret));
}

int store_gh_event_sandboxes(struct store *s, const char *org_id, const char *repo, uint64_t pr_number,
                             void (*fn)(const struct gh_event_row *row, void *userdata), void *userdata)
{
        _cleanup_(store_rows_done) struct store_rows l = { .size = sizeof(struct gh_event_row) };
        int r = !s || !fn || !repo || pr_number > INT64_MAX ? -EINVAL : check_id(org_id);
        if (r < 0)
                return r;
        {
                STORE_GUARD(s);
                r = s->ops->gh_event_sandboxes(s, org_id, repo, pr_number, &l);
        }
        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(rows_at(&l, i), userdata);
        return r;
}

/* ---- egress policies and audit --------------------------------------- */

void egress_policy_row_done(struct egress_policy_row *r)
{
        if (!r)
                return;
        free(r->doc);
        r->doc = NULL;
}

static void egress_policy_item_done(void *item)
{
        egress_policy_row_done(item);
}

static int check_egress_policy(const struct egress_policy_row *row)
{
        int r;

        if (!row || !row->doc)
                return -EINVAL;
        if ((r = check_id(row->org_id)) < 0)
                return r;
        return 0;
}

int store_egress_policy_create(struct store *s, const struct egress_policy_row *row)
{
        STORE_CALL(s, true, row ? row->id : NULL, check_egress_policy(row) ?: s->ops->egress_policy_create(s, row));
}

int store_egress_policy_update(struct store *s, const struct egress_policy_row *row)
{
        STORE_CALL(s, true, row ? row->id : NULL, check_egress_policy(row) ?: s->ops->egress_policy_update(s, row));
}

int store_egress_policy_delete(struct store *s, const char *org_id, const char *id)
{
        int r = check_id(org_id);
        if (r < 0)
                return r;
        STORE_CALL(s, true, id, s->ops->egress_policy_delete(s, org_id, id));
}

int store_egress_policy_each(struct store *s, const char *org_id,
                             void (*fn)(const struct egress_policy_row *row, void *userdata), void *userdata)
{
        _cleanup_(store_rows_done) struct store_rows l = { .size = sizeof(struct egress_policy_row),
                                                           .done = egress_policy_item_done };
        if (!s || !fn || (org_id && check_id(org_id) < 0))
                return -EINVAL;
        int r;
        {
                STORE_GUARD(s);
                r = s->ops->egress_policy_list(s, org_id, &l);
        }
        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(rows_at(&l, i), userdata);
        return r;
}

static int check_egress_audit(const struct egress_audit_row *row)
{
        int r;

        if (!row)
                return -EINVAL;
        if ((r = check_id(row->org_id)) < 0 || (r = CHECK_FIELD(row, sandbox_id)) < 0 || (r = CHECK_FIELD(row, host)) < 0 ||
            (r = CHECK_FIELD(row, protocol)) < 0 || (r = CHECK_FIELD(row, decision)) < 0 ||
            (r = CHECK_FIELD(row, mode)) < 0 || (r = CHECK_FIELD(row, reason)) < 0)
                return r;
        return 0;
}

int store_egress_audit_insert(struct store *s, const struct egress_audit_row *row)
{
        STORE_CALL(s, true, row ? row->org_id : NULL, check_egress_audit(row) ?: s->ops->egress_audit_insert(s, row));
}

int store_egress_audit_each(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                            void (*fn)(const struct egress_audit_row *row, void *userdata), void *userdata,
                            uint64_t *ret_total)
{
        _cleanup_(store_rows_done) struct store_rows l = { .size = sizeof(struct egress_audit_row) };
        int r = fn ? org_page(s, org_id, limit, offset, s ? s->ops->egress_audit_list : NULL, &l, ret_total) : -EINVAL;

        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(rows_at(&l, i), userdata);
        return r;
}

int store_egress_audit_prune(struct store *s, uint64_t before)
{
        if (!s)
                return -EINVAL;
        STORE_GUARD(s);
        return s->ops->egress_audit_prune(s, before);
}

/* ---- single sign-on --------------------------------------------------- */

static int check_identity(const struct sso_identity_row *row)
{
        int r;

        if (!row || !row->issuer[0] || !row->subject[0])
                return -EINVAL;
        if ((r = check_str(row->issuer, sizeof(row->issuer))) < 0 ||
            (r = check_str(row->subject, sizeof(row->subject))) < 0 || (r = check_id(row->user_id)) < 0 ||
            (r = check_id(row->org_id)) < 0)
                return r;
        return 0;
}

int store_sso_identity_get(struct store *s, const char *issuer, const char *subject, struct sso_identity_row *ret)
{
        STORE_CALL(s, ret && issuer && subject && issuer[0] && subject[0], "-",
                   check_str(issuer, STORE_SSO_TEXT_MAX) ?: check_str(subject, STORE_SSO_TEXT_MAX)
                                                                   ?: s->ops->sso_identity_get(s, issuer, subject, ret));
}

int store_sso_identity_create(struct store *s, const struct sso_identity_row *row)
{
        STORE_CALL(s, true, row ? row->user_id : NULL, check_identity(row) ?: s->ops->sso_identity_create(s, row));
}

int store_sso_user_create(struct store *s, const struct org_row *new_org, const struct user_row *user,
                          const struct sso_identity_row *ident)
{
        STORE_CALL(s, user, user ? user->id : NULL,
                   check_identity(ident) ?: check_id(user->org_id)
                                                     ?: (new_org ? check_id(new_org->id) : 0)
                                                                ?: s->ops->sso_user_create(s, new_org, user, ident));
}

int store_sso_link_get(struct store *s, const char *org_id, struct sso_link_row *ret)
{
        STORE_CALL(s, ret, org_id, s->ops->sso_link_get(s, org_id, ret));
}

int store_sso_link_find(struct store *s, const char *value, bool by_domain, struct sso_link_row *ret)
{
        STORE_CALL(s, ret && value && value[0], "-",
                   check_str(value, STORE_SSO_TEXT_MAX) ?: s->ops->sso_link_find(s, value, by_domain, ret));
}

int store_sso_link_put(struct store *s, const struct sso_link_row *row)
{
        STORE_CALL(s, row, row ? row->org_id : NULL,
                   check_str(row->provider_org_id, sizeof(row->provider_org_id))
                           ?: check_str(row->domain, sizeof(row->domain)) ?: s->ops->sso_link_put(s, row));
}

int store_sso_link_delete(struct store *s, const char *org_id)
{
        STORE_CALL(s, true, org_id, s->ops->sso_link_delete(s, org_id));
}
/* ---- for the core's other files (backend.h) ---------------------------- */

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
        return store_lock(s);
}

void store_core_unlockp(pthread_mutex_t **m)
{
        unlockp(m);
}
