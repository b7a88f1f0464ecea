/* The store's public functions for the controller platform's tables
 * (issue 15): artifacts, the request queue, checkpoints, snapshot profiles,
 * the GitHub integration, egress policies and single sign-on. The same
 * frame as store.c (arguments checked once for every backend, the backend
 * serialised when it needs it, *_each callbacks run after the rows were
 * read) through the core's helpers in store/core.h; kept apart so each file
 * holds one part of the store. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "store/core.h"
#include "store/store.h"

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
        if ((r = store_core_check_id(a->org_id)) < 0 || (r = CHECK_FIELD(a, sandbox_id)) < 0 || (r = CHECK_FIELD(a, state)) < 0 ||
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
        int r = store_core_check_id(org_id);
        if (r < 0)
                return r;
        STORE_CALL(s, ret, id, s->ops->artifact_get(s, org_id, id, ret));
}

int store_artifact_delete(struct store *s, const char *org_id, const char *id)
{
        int r = store_core_check_id(org_id);
        if (r < 0)
                return r;
        STORE_CALL(s, true, id, s->ops->artifact_delete(s, org_id, id));
}

int store_artifact_each(struct store *s, const struct artifact_filter *f, uint64_t limit, uint64_t offset,
                        void (*fn)(const struct artifact_row *row, void *userdata), void *userdata,
                        uint64_t *ret_total)
{
        _cleanup_(store_core_rows_done) struct store_rows l = { .size = sizeof(struct artifact_row),
                                                           .done = artifact_item_done };
        if (!s || !f || !fn || !ret_total || !f->state || !f->sandbox_id || !f->name_prefix || limit > INT64_MAX ||
            offset > INT64_MAX || f->now > INT64_MAX)
                return -EINVAL;
        int r = store_core_check_id(f->org_id);
        if (r < 0)
                return r;
        {
                STORE_GUARD(s);
                r = s->ops->artifact_list(s, f, limit, offset, &l, ret_total);
        }
        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(store_core_row(&l, i), userdata);
        return r;
}

int store_artifact_each_expired(struct store *s, uint64_t now,
                                void (*fn)(const struct artifact_row *row, void *userdata), void *userdata)
{
        _cleanup_(store_core_rows_done) struct store_rows l = { .size = sizeof(struct artifact_row),
                                                           .done = artifact_item_done };
        if (!s || !fn || now > INT64_MAX)
                return -EINVAL;
        int r;
        {
                STORE_GUARD(s);
                r = s->ops->artifact_list_expired(s, now, &l);
        }
        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(store_core_row(&l, i), userdata);
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
        if ((r = store_core_check_id(row->id)) < 0 || (r = store_core_check_id(row->org_id)) < 0)
                return r;
        return store_core_check_str(row->kind, sizeof(row->kind)) ?: store_core_check_str(row->status, sizeof(row->status));
}

int store_queue_insert(struct store *s, const struct queue_row *row)
{
        STORE_CALL(s, true, row ? row->id : NULL, check_queue_row(row) ?: s->ops->queue_insert(s, row));
}

int store_queue_get(struct store *s, const char *org_id, const char *id, struct queue_row *ret)
{
        int r = store_core_check_id(org_id);
        if (r < 0)
                return r;
        STORE_CALL(s, ret, id, s->ops->queue_get(s, org_id, id, ret));
}

int store_queue_update(struct store *s, const struct queue_row *row)
{
        STORE_CALL(s, true, row ? row->id : NULL, check_queue_row(row) ?: s->ops->queue_update(s, row));
}

int store_queue_start(struct store *s, const char *id, const char *node_id, uint64_t started_at)
{
        STORE_CALL(s, node_id && store_core_check_str(node_id, STORE_ID_MAX) == 0, id,
                   s->ops->queue_start(s, id, node_id, started_at));
}

int store_queue_fail_node(struct store *s, const char *node_id, uint32_t failed_status, const char *failed_body,
                          uint64_t now)
{
        STORE_CALL(s, failed_body, node_id, s->ops->queue_fail_node(s, node_id, failed_status, failed_body, now));
}

int store_queue_each(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                     void (*fn)(const struct queue_row *row, void *userdata), void *userdata, uint64_t *ret_total)
{
        _cleanup_(store_core_rows_done) struct store_rows l = { .size = sizeof(struct queue_row), .done = queue_item_done };
        int r = fn ? store_core_org_page(s, org_id, limit, offset, s ? s->ops->queue_list : NULL, &l, ret_total) : -EINVAL;
        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(store_core_row(&l, i), userdata);
        return r;
}

int store_queue_heads(struct store *s, void (*fn)(const struct queue_row *row, void *userdata), void *userdata)
{
        _cleanup_(store_core_rows_done) struct store_rows l = { .size = sizeof(struct queue_row), .done = queue_item_done };
        if (!s || !fn)
                return -EINVAL;
        int r;
        {
                STORE_GUARD(s);
                r = s->ops->queue_heads(s, &l);
        }
        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(store_core_row(&l, i), userdata);
        return r;
}

int store_queue_position(struct store *s, const char *org_id, const char *id, uint64_t *ret_ahead,
                         uint64_t *ret_depth)
{
        int r = store_core_check_id(org_id);
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
        if ((r = store_core_check_id(row->org_id)) < 0 || (r = store_core_check_id(row->sandbox_id)) < 0 ||
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
        int r = store_core_check_id(org_id);
        if (r < 0)
                return r;
        STORE_CALL(s, ret, id, s->ops->checkpoint_get(s, org_id, id, ret));
}

int store_checkpoint_delete(struct store *s, const char *org_id, const char *id)
{
        int r = store_core_check_id(org_id);
        if (r < 0)
                return r;
        STORE_CALL(s, true, id, s->ops->checkpoint_delete(s, org_id, id));
}

int store_checkpoint_each(struct store *s, const char *org_id, const char *sandbox_id, uint64_t limit,
                          uint64_t offset, void (*fn)(const struct checkpoint_row *row, void *userdata),
                          void *userdata, uint64_t *ret_total)
{
        _cleanup_(store_core_rows_done) struct store_rows l = { .size = sizeof(struct checkpoint_row),
                                                           .done = checkpoint_item_done };
        int r = !s || !fn || !ret_total || limit > INT64_MAX || offset > INT64_MAX ? -EINVAL : store_core_check_id(org_id);
        if (r == 0 && sandbox_id)
                r = store_core_check_id(sandbox_id);
        if (r < 0)
                return r;
        {
                STORE_GUARD(s);
                r = s->ops->checkpoint_list(s, org_id, sandbox_id, limit, offset, &l, ret_total);
        }
        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(store_core_row(&l, i), userdata);
        return r;
}

int store_checkpoint_usage(struct store *s, const char *org_id, uint64_t *ret_count, uint64_t *ret_bytes)
{
        STORE_CALL(s, ret_count && ret_bytes, org_id, s->ops->checkpoint_usage(s, org_id, ret_count, ret_bytes));
}

/* ---- snapshot profiles ------------------------------------------------ */

static int check_profile(const struct snapshot_profile_row *row)
{
        int r = -EINVAL;
        if (!row || (r = store_core_check_id(row->key)) < 0 ||
            (r = store_core_check_str(row->kernel_path, sizeof(row->kernel_path))) < 0 ||
            (r = store_core_check_str(row->rootfs_path, sizeof(row->rootfs_path))) < 0)
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
        _cleanup_(store_core_rows_done) struct store_rows l = { .size = sizeof(struct snapshot_profile_row) };
        int r;
        if (!s || !fn)
                return -EINVAL;
        {
                STORE_GUARD(s);
                r = s->ops->snapshot_profile_list(s, &l);
        }
        for (size_t i = 0; r == 0 && i < l.n; i++)
                fn(store_core_row(&l, i), userdata);
        return r;
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
        return id && !id[0] ? 0 : store_core_check_id(id);
}

static int check_gh_install(const struct gh_install_row *row)
{
        int r;
        if (!row || !row->repos_json)
                return -EINVAL;
        if ((r = store_core_check_id(row->id)) < 0 || (r = CHECK_FIELD(row, account_login)) < 0 ||
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
        _cleanup_(store_core_rows_done) struct store_rows l = { .size = sizeof(struct gh_install_row),
                                                           .done = gh_install_item_done };
        int r = !s || !fn ? -EINVAL : store_core_check_id(org_id);
        if (r < 0)
                return r;
        {
                STORE_GUARD(s);
                r = s->ops->gh_install_list(s, org_id, pending, &l);
        }
        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(store_core_row(&l, i), userdata);
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
        if ((r = store_core_check_id(row->id)) < 0 || (r = CHECK_FIELD(row, delivery_id)) < 0 ||
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
        _cleanup_(store_core_rows_done) struct store_rows l = { .size = sizeof(struct gh_event_row) };
        int r = fn ? store_core_org_page(s, org_id, limit, offset, s ? s->ops->gh_event_list : NULL, &l, ret_total) : -EINVAL;
        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(store_core_row(&l, i), userdata);
        return r;
}

int store_gh_event_stats(struct store *s, const char *org_id, uint64_t since, struct gh_event_stats *ret)
{
        STORE_CALL(s, ret && since <= INT64_MAX, org_id, s->ops->gh_event_stats(s, org_id, since, ret));
}

int store_gh_event_sandboxes(struct store *s, const char *org_id, const char *repo, uint64_t pr_number,
                             void (*fn)(const struct gh_event_row *row, void *userdata), void *userdata)
{
        _cleanup_(store_core_rows_done) struct store_rows l = { .size = sizeof(struct gh_event_row) };
        int r = !s || !fn || !repo || pr_number > INT64_MAX ? -EINVAL : store_core_check_id(org_id);
        if (r < 0)
                return r;
        {
                STORE_GUARD(s);
                r = s->ops->gh_event_sandboxes(s, org_id, repo, pr_number, &l);
        }
        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(store_core_row(&l, i), userdata);
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
        if ((r = store_core_check_id(row->org_id)) < 0)
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
        int r = store_core_check_id(org_id);
        if (r < 0)
                return r;
        STORE_CALL(s, true, id, s->ops->egress_policy_delete(s, org_id, id));
}

int store_egress_policy_each(struct store *s, const char *org_id,
                             void (*fn)(const struct egress_policy_row *row, void *userdata), void *userdata)
{
        _cleanup_(store_core_rows_done) struct store_rows l = { .size = sizeof(struct egress_policy_row),
                                                           .done = egress_policy_item_done };
        if (!s || !fn || (org_id && store_core_check_id(org_id) < 0))
                return -EINVAL;
        int r;
        {
                STORE_GUARD(s);
                r = s->ops->egress_policy_list(s, org_id, &l);
        }
        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(store_core_row(&l, i), userdata);
        return r;
}

static int check_egress_audit(const struct egress_audit_row *row)
{
        int r;

        if (!row)
                return -EINVAL;
        if ((r = store_core_check_id(row->org_id)) < 0 || (r = CHECK_FIELD(row, sandbox_id)) < 0 || (r = CHECK_FIELD(row, host)) < 0 ||
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
        _cleanup_(store_core_rows_done) struct store_rows l = { .size = sizeof(struct egress_audit_row) };
        int r = fn ? store_core_org_page(s, org_id, limit, offset, s ? s->ops->egress_audit_list : NULL, &l, ret_total) : -EINVAL;

        for (size_t i = 0; r >= 0 && i < l.n; i++)
                fn(store_core_row(&l, i), userdata);
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
        if ((r = store_core_check_str(row->issuer, sizeof(row->issuer))) < 0 ||
            (r = store_core_check_str(row->subject, sizeof(row->subject))) < 0 || (r = store_core_check_id(row->user_id)) < 0 ||
            (r = store_core_check_id(row->org_id)) < 0)
                return r;
        return 0;
}

int store_sso_identity_get(struct store *s, const char *issuer, const char *subject, struct sso_identity_row *ret)
{
        STORE_CALL(s, ret && issuer && subject && issuer[0] && subject[0], "-",
                   store_core_check_str(issuer, STORE_SSO_TEXT_MAX) ?: store_core_check_str(subject, STORE_SSO_TEXT_MAX)
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
                   check_identity(ident) ?: store_core_check_id(user->org_id)
                                                     ?: (new_org ? store_core_check_id(new_org->id) : 0)
                                                                ?: s->ops->sso_user_create(s, new_org, user, ident));
}

int store_sso_link_get(struct store *s, const char *org_id, struct sso_link_row *ret)
{
        STORE_CALL(s, ret, org_id, s->ops->sso_link_get(s, org_id, ret));
}

int store_sso_link_find(struct store *s, const char *value, bool by_domain, struct sso_link_row *ret)
{
        STORE_CALL(s, ret && value && value[0], "-",
                   store_core_check_str(value, STORE_SSO_TEXT_MAX) ?: s->ops->sso_link_find(s, value, by_domain, ret));
}

int store_sso_link_put(struct store *s, const struct sso_link_row *row)
{
        STORE_CALL(s, row, row ? row->org_id : NULL,
                   store_core_check_str(row->provider_org_id, sizeof(row->provider_org_id))
                           ?: store_core_check_str(row->domain, sizeof(row->domain)) ?: s->ops->sso_link_put(s, row));
}

int store_sso_link_delete(struct store *s, const char *org_id)
{
        STORE_CALL(s, true, org_id, s->ops->sso_link_delete(s, org_id));
}
