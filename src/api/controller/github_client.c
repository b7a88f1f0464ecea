/* GitHub's REST API, as much of it as the PR automation needs: an App JWT
 * (RS256 over the App's private key, RFC 7519; GitHub wants iat a minute
 * in the past and exp at most ten minutes ahead), an installation access
 * token bought with it (POST /app/installations/:id/access_tokens), and a
 * comment posted with that token (POST /repos/:owner/:repo/issues/:n/
 * comments). The base URL is controller.github_api_url, so the tests point
 * it at a fake API on loopback. A token is bought per comment: comments
 * are rare (one per PR sandbox), and no token outlives its use. */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/pem.h>

#include "api/app.h"
#include "api/controller/controller.h"
#include "api/controller/github.h"
#include "base/buf.h"
#include "base/time.h"
#include "base/util.h"
#include "tenant/jwt.h"

#define GH_REPLY_MAX (1u << 20)   /* bytes of an API answer kept */
#define GH_USER_AGENT "sandboxd-github-app"

bool gh_app_configured(const struct app *app)
{
        return app->cfg->ctl_github_app_id[0] && app->cfg->ctl_github_private_key[0];
}

static void pkey_freep(EVP_PKEY **k)
{
        EVP_PKEY_free(*k);
}

static void md_ctx_freep(EVP_MD_CTX **c)
{
        EVP_MD_CTX_free(*c);
}

static int load_key(const char *path, EVP_PKEY **ret)
{
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        *ret = PEM_read_PrivateKey(f, NULL, NULL, NULL);
        return *ret ? 0 : -EINVAL;
}

/* base64url of len bytes as a new string. */
static char *b64url_dup(const void *data, size_t len)
{
        char *out = malloc(4 * ((len + 2) / 3) + 1);
        if (out)
                b64url_encode(data, len, out);
        return out;
}

/* The App's JWT: header.payload.signature, RS256. */
static int app_jwt(const struct app *app, char **ret, struct err *err)
{
        _cleanup_(pkey_freep) EVP_PKEY *key = NULL;
        int r = load_key(app->cfg->ctl_github_private_key, &key);
        if (r < 0)
                return err_set(err, ERR_INTERNAL, -r, "cannot read the GitHub App private key");
        uint64_t now = wall_ms() / 1000;
        char payload[256];
        int n = snprintf(payload, sizeof(payload), "{\"iat\":%llu,\"exp\":%llu,\"iss\":\"%s\"}",
                         (unsigned long long)(now - 60), (unsigned long long)(now + 540), app->cfg->ctl_github_app_id);
        static const char header[] = "{\"alg\":\"RS256\",\"typ\":\"JWT\"}";
        _cleanup_free_ char *h64 = b64url_dup(header, strlen(header));
        _cleanup_free_ char *p64 = n > 0 && (size_t)n < sizeof(payload) ? b64url_dup(payload, (size_t)n) : NULL;
        _cleanup_free_ char *signing = NULL;
        if (!h64 || !p64 || asprintf(&signing, "%s.%s", h64, p64) < 0)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        _cleanup_(md_ctx_freep) EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        unsigned char sig[1024];
        size_t siglen = sizeof(sig);
        if (!ctx || EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key) != 1 ||
            EVP_DigestSign(ctx, sig, &siglen, (const unsigned char *)signing, strlen(signing)) != 1)
                return err_set(err, ERR_INTERNAL, EINVAL, "cannot sign the GitHub App JWT (an RSA key is needed)");
        _cleanup_free_ char *s64 = b64url_dup(sig, siglen);
        if (!s64 || asprintf(ret, "%s.%s", signing, s64) < 0)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        return 0;
}

static size_t on_write(char *data, size_t size, size_t n, void *userdata)
{
        struct buf *b = userdata;
        size_t len = size * n;
        return buf_append(b, data, len) < 0 ? 0 : len;
}

static void curl_start(void)
{
        curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void curl_cleanupp(CURL **h)
{
        if (*h)
                curl_easy_cleanup(*h);
}

static void slist_freep(struct curl_slist **l)
{
        curl_slist_free_all(*l);
}

/* POSTs body (JSON) to the API's path with Authorization auth; *ret the
 * answer's JSON (owned; NULL when not JSON) when it is a 2xx, else err
 * (ERR_UNAVAILABLE) names the status. */
static int api_post(const struct app *app, const char *path, const char *auth, json_t *body, json_t **ret,
                    struct err *err)
{
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, curl_start);
        _cleanup_free_ char *url = NULL, *text = json_dumps(body, JSON_COMPACT), *auth_line = NULL;
        const char *base = app->cfg->ctl_github_api_url;
        size_t blen = strlen(base);
        while (blen && base[blen - 1] == '/')
                blen--;
        if (!text || asprintf(&url, "%.*s%s", (int)blen, base, path) < 0 ||
            asprintf(&auth_line, "Authorization: %s", auth) < 0)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        _cleanup_(curl_cleanupp) CURL *h = curl_easy_init();
        _cleanup_(slist_freep) struct curl_slist *hdrs = NULL;
        const char *const lines[] = { auth_line, "Accept: application/vnd.github+json",
                                      "Content-Type: application/json", "X-GitHub-Api-Version: 2022-11-28" };
        for (size_t i = 0; i < ARRAY_SIZE(lines); i++) {
                struct curl_slist *l = curl_slist_append(hdrs, lines[i]);
                if (!l)
                        return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
                hdrs = l;
        }
        _cleanup_(buf_free) struct buf reply = {};
        buf_init(&reply, GH_REPLY_MAX);
        if (!h)
                return err_set(err, ERR_INTERNAL, ENOMEM, "cannot start a GitHub API call");
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
        curl_easy_setopt(h, CURLOPT_USERAGENT, GH_USER_AGENT);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)app->cfg->ctl_github_api_timeout_ms);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &reply);
        CURLcode rc = curl_easy_perform(h);
        if (rc != CURLE_OK)
                return err_set(err, ERR_UNAVAILABLE, EIO, "GitHub API %s: %s", path, curl_easy_strerror(rc));
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        if (status < 200 || status > 299)
                return err_set(err, ERR_UNAVAILABLE, EIO, "GitHub API %s answered HTTP %ld", path, status);
        *ret = reply.len ? json_loadb(reply.data, reply.len, 0, NULL) : NULL;
        return 0;
}

/* An installation access token (a new string) for installation_id. */
static int installation_token(const struct app *app, const char *installation_id, char **ret, struct err *err)
{
        _cleanup_free_ char *jwt = NULL, *auth = NULL, *path = NULL;
        int r = app_jwt(app, &jwt, err);
        if (r < 0)
                return r;
        if (asprintf(&auth, "Bearer %s", jwt) < 0 ||
            asprintf(&path, "/app/installations/%s/access_tokens", installation_id) < 0)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        _cleanup_json_ json_t *body = json_object(), *reply = NULL;
        if ((r = api_post(app, path, auth, body, &reply, err)) < 0)
                return r;
        const char *token = json_string_value(json_object_get(reply, "token"));
        if (!token || !token[0] || strcspn(token, "\r\n") != strlen(token))
                return err_set(err, ERR_UNAVAILABLE, EPROTO, "GitHub API gave no installation token");
        *ret = strdup(token);
        return *ret ? 0 : err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
}

int gh_post_comment(struct app *app, const char *installation_id, const char *repo, uint64_t number,
                    const char *text, struct err *err)
{
        if (!gh_app_configured(app))
                return -ENOKEY;
        _cleanup_free_ char *token = NULL, *auth = NULL, *path = NULL;
        int r = installation_token(app, installation_id, &token, err);
        if (r < 0)
                return r;
        if (asprintf(&auth, "token %s", token) < 0 ||
            asprintf(&path, "/repos/%s/issues/%llu/comments", repo, (unsigned long long)number) < 0)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        _cleanup_json_ json_t *body = json_pack("{s:s}", "body", text), *reply = NULL;
        return api_post(app, path, auth, body, &reply, err);
}
