/* The controller's GitHub integration (seed 003 "GitHub Integrations";
 * issue 15 item 8), shared by its three files: github.c (the org's routes:
 * installations, settings, events, health), github_webhook.c (the public
 * webhook receiver and the PR automation) and github_client.c (GitHub's
 * REST API over libcurl: App JWT, installation token, PR comment). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "http/server.h"
#include "store/store.h"

struct app;

/* An org's automation settings (GET/PUT /github/settings). */
struct gh_settings {
        bool auto_create_sandbox_on_pr;     /* pull_request opened/reopened/synchronize → a sandbox */
        bool auto_pr_comment_on_sandbox;    /* … and a comment on the PR naming it */
        bool auto_stop_sandbox_on_pr_close; /* pull_request closed → its sandboxes stopped */
};
/* The org's settings (the defaults when it never set any). 0 or -errno. */
int gh_settings_load(struct app *app, const char *org_id, struct gh_settings *ret, uint64_t *ret_updated_at);

/* POST /api/v1/github/webhook (public: the signature is the auth). */
void gh_webhook(struct http_request *req, struct http_response *res);

/* Whether HMAC-SHA256(secret, body) is sig ("sha256=<64 hex>", any case),
 * compared in constant time. */
bool gh_signature_ok(const char *secret, const void *body, size_t len, const char *sig);

/* Posts text as a comment on repo's (owner/name) issue or PR number, as
 * installation_id of the App configured (controller.github_app_id and
 * controller.github_private_key): an App JWT (RS256) buys an installation
 * token at the API, which posts the comment. -ENOKEY when the App is not
 * configured; other failures -errno with err filled (ERR_UNAVAILABLE with
 * GitHub's status). */
int gh_post_comment(struct app *app, const char *installation_id, const char *repo, uint64_t number,
                    const char *text, struct err *err);
/* Whether gh_post_comment has what it needs. */
bool gh_app_configured(const struct app *app);
