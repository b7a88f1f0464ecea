/* The OpenID Connect provider's documents, fetched with libcurl: discovery,
 * the token endpoint, the JWKS. Replies are capped, redirects are not
 * followed, only http(s) is spoken, and plain http only to a loopback
 * host (the tests' provider). Discovery and the JWKS are cached per
 * process (one provider is configured per daemon). */
#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "api/controller/sso.h"
#include "base/cleanup.h"
#include "base/util.h"
#include "config/config.h"
#include "http/server.h"

#define REPLY_MAX (256 * 1024)
#define DISCOVERY_TTL_MS (3600 * 1000ULL)
#define JWKS_TTL_MS (3600 * 1000ULL)
#define JWKS_REFRESH_MIN_MS (5 * 1000ULL)
#define FETCH_TIMEOUT_MS 10000L

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_start(void)
{
        curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* The one provider's cached documents, keyed by its issuer. */
static struct {
        pthread_mutex_t lock;
        char issuer[512];
        struct sso_provider doc;
        uint64_t doc_at;
        json_t *jwks;
        uint64_t jwks_at;
} cache = { .lock = PTHREAD_MUTEX_INITIALIZER };

bool sso_enabled(const struct config *cfg)
{
        return cfg->ctl_oidc_issuer[0] && cfg->ctl_oidc_client_id[0] && cfg->ctl_oidc_redirect_uri[0];
}

bool sso_url_allowed(const char *url)
{
        if (strncmp(url, "https://", 8) == 0)
                return url[8] != '\0';
        if (strncmp(url, "http://", 7) != 0)
                return false;
        const char *host = url + 7, *end = host + strcspn(host, "/?#");
        char h[256];
        size_t n = (size_t)(end - host);
        if (n == 0 || n >= sizeof(h) || memchr(host, '@', n))
                return false;
        memcpy(h, host, n);
        h[n] = '\0';
        /* Strip the port: "[::1]:80" → "[::1]", "127.0.0.1:80" → "127.0.0.1". */
        char *colon = strrchr(h, ':');
        if (colon && (h[0] != '[' || colon > strchr(h, ']')))
                *colon = '\0';
        if (h[0] == '[') {
                size_t l = strlen(h);
                if (l < 2 || h[l - 1] != ']')
                        return false;
                memmove(h, h + 1, l - 2);
                h[l - 2] = '\0';
        }
        return http_host_is_loopback(h);
}

struct reply {
        char *buf;
        size_t len;
        bool over;
};

static size_t on_write(char *data, size_t size, size_t n, void *cls)
{
        struct reply *r = cls;
        size_t add = size * n;
        if (r->len + add > REPLY_MAX) {
                r->over = true;
                return 0;
        }
        char *nb = realloc(r->buf, r->len + add + 1);
        if (!nb)
                return 0;
        memcpy(nb + r->len, data, add);
        r->buf = nb;
        r->len += add;
        r->buf[r->len] = '\0';
        return add;
}

/* GET url (form NULL) or POST form to it; *ret_json the reply's JSON
 * object (owned) whatever the status, *ret_status the status. */
static int fetch(const char *url, const char *form, const char *user, const char *password, long *ret_status,
                 json_t **ret_json, struct err *err)
{
        if (!sso_url_allowed(url))
                return err_set(err, ERR_UNAVAILABLE, EPERM, "provider URL not allowed (https, or http on loopback): %s",
                               url);
        pthread_once(&curl_once, curl_start);
        CURL *h = curl_easy_init();
        struct curl_slist *hdrs = curl_slist_append(NULL, "Accept: application/json");
        struct reply r = {};
        if (!h || !hdrs) {
                curl_slist_free_all(hdrs);
                curl_easy_cleanup(h);
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        }
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_NOPROXY, "localhost,127.0.0.1,::1");
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, FETCH_TIMEOUT_MS);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, FETCH_TIMEOUT_MS / 2);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
        if (form)
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, form);
        if (user) {
                curl_easy_setopt(h, CURLOPT_USERNAME, user);
                curl_easy_setopt(h, CURLOPT_PASSWORD, password);
        }
        CURLcode rc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, ret_status);
        curl_slist_free_all(hdrs);
        curl_easy_cleanup(h);
        _cleanup_free_ char *body = r.buf;
        if (rc != CURLE_OK)
                return err_set(err, ERR_UNAVAILABLE, EIO, "the identity provider did not answer (%s): %s",
                               r.over ? "reply too large" : curl_easy_strerror(rc), url);
        json_t *j = body ? json_loads(body, JSON_REJECT_DUPLICATES, NULL) : NULL;
        if (!json_is_object(j)) {
                json_decref(j);
                return err_set(err, ERR_UNAVAILABLE, EPROTO, "the identity provider's reply is not a JSON object: %s",
                               url);
        }
        *ret_json = j;
        return 0;
}

static int copy_endpoint(json_t *doc, const char *name, char *dst, struct err *err)
{
        const char *v = json_string_value(json_object_get(doc, name));
        if (!v || strlen(v) >= SSO_URL_MAX || !sso_url_allowed(v))
                return err_set(err, ERR_UNAVAILABLE, EPROTO, "the provider's discovery document has no usable %s",
                               name);
        snprintf(dst, SSO_URL_MAX, "%s", v);
        return 0;
}

static bool offers(json_t *doc, const char *list, const char *want)
{
        json_t *v;
        size_t i;
        json_array_foreach(json_object_get(doc, list), i, v) if (json_is_string(v) &&
                                                                 strcmp(json_string_value(v), want) == 0) return true;
        return false;
}

static int discover_fetch(const struct config *cfg, struct sso_provider *ret, struct err *err)
{
        char url[SSO_URL_MAX + 64];
        size_t n = strlen(cfg->ctl_oidc_issuer);
        while (n > 0 && cfg->ctl_oidc_issuer[n - 1] == '/')
                n--;
        snprintf(url, sizeof(url), "%.*s/.well-known/openid-configuration", (int)n, cfg->ctl_oidc_issuer);
        json_t *doc = NULL;
        long status = 0;
        int r = fetch(url, NULL, NULL, NULL, &status, &doc, err);
        if (r < 0)
                return r;
        struct sso_provider p = {};
        const char *iss = json_string_value(json_object_get(doc, "issuer"));
        if (status != 200)
                r = err_set(err, ERR_UNAVAILABLE, EPROTO, "discovery answered %ld", status);
        else if (!iss || strcmp(iss, cfg->ctl_oidc_issuer) != 0)
                r = err_set(err, ERR_UNAVAILABLE, EPROTO, "the discovery document names another issuer");
        else if ((r = copy_endpoint(doc, "authorization_endpoint", p.authorization_endpoint, err)) == 0 &&
                 (r = copy_endpoint(doc, "token_endpoint", p.token_endpoint, err)) == 0 &&
                 (r = copy_endpoint(doc, "jwks_uri", p.jwks_uri, err)) == 0) {
                p.secret_post = offers(doc, "token_endpoint_auth_methods_supported", "client_secret_post");
                *ret = p;
        }
        json_decref(doc);
        return r;
}

/* Forgets what was cached for another issuer (a reloaded config). */
static void cache_for(const char *issuer)
{
        if (strcmp(cache.issuer, issuer) == 0)
                return;
        snprintf(cache.issuer, sizeof(cache.issuer), "%s", issuer);
        cache.doc_at = cache.jwks_at = 0;
        json_decref(cache.jwks);
        cache.jwks = NULL;
}

int sso_discover(const struct config *cfg, struct sso_provider *ret, struct err *err)
{
        pthread_mutex_lock(&cache.lock);
        cache_for(cfg->ctl_oidc_issuer);
        uint64_t now = now_ms();
        int r = 0;
        if (!cache.doc_at || now - cache.doc_at > DISCOVERY_TTL_MS) {
                if ((r = discover_fetch(cfg, &cache.doc, err)) == 0)
                        cache.doc_at = now;
        }
        if (r == 0)
                *ret = cache.doc;
        pthread_mutex_unlock(&cache.lock);
        return r;
}

int sso_jwks(const struct config *cfg, const struct sso_provider *p, bool refresh, json_t **ret, struct err *err)
{
        pthread_mutex_lock(&cache.lock);
        cache_for(cfg->ctl_oidc_issuer);
        uint64_t now = now_ms();
        int r = 0;
        bool stale = !cache.jwks || now - cache.jwks_at > JWKS_TTL_MS ||
                     (refresh && now - cache.jwks_at > JWKS_REFRESH_MIN_MS);
        if (stale) {
                json_t *j = NULL;
                long status = 0;
                if ((r = fetch(p->jwks_uri, NULL, NULL, NULL, &status, &j, err)) == 0 &&
                    (status != 200 || !json_is_array(json_object_get(j, "keys")))) {
                        json_decref(j);
                        r = err_set(err, ERR_UNAVAILABLE, EPROTO, "the provider's JWKS is not a key set");
                } else if (r == 0) {
                        json_decref(cache.jwks);
                        cache.jwks = j;
                        cache.jwks_at = now;
                }
        }
        if (r == 0)
                *ret = json_incref(cache.jwks);
        pthread_mutex_unlock(&cache.lock);
        return r;
}

/* application/x-www-form-urlencoded name=value, appended with '&'. */
static int form_add(char *out, size_t cap, const char *name, const char *value)
{
        char *esc = curl_easy_escape(NULL, value, 0);
        if (!esc)
                return -ENOMEM;
        size_t len = strlen(out);
        int n = snprintf(out + len, cap - len, "%s%s=%s", len ? "&" : "", name, esc);
        curl_free(esc);
        return n < 0 || (size_t)n >= cap - len ? -E2BIG : 0;
}

static int token_reply(json_t *j, long status, char **ret, struct err *err)
{
        const char *id_token = json_string_value(json_object_get(j, "id_token"));
        if (status != 200) {
                const char *e = json_string_value(json_object_get(j, "error"));
                return err_set(err, ERR_PERMISSION, EACCES, "the provider refused the code (%ld %.64s)", status,
                               e ? e : "no error code");
        }
        if (!id_token)
                return err_set(err, ERR_PERMISSION, EACCES, "the provider's token reply has no id_token");
        if (!(*ret = strdup(id_token)))
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        return 0;
}

int sso_token(const struct config *cfg, const struct sso_provider *p, const char *code, const char *verifier,
              char **ret, struct err *err)
{
        _cleanup_free_ char *form = calloc(1, 8192);
        bool post_secret = cfg->ctl_oidc_client_secret[0] && p->secret_post;
        bool basic = cfg->ctl_oidc_client_secret[0] && !p->secret_post;
        if (!form)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        if (form_add(form, 8192, "grant_type", "authorization_code") < 0 || form_add(form, 8192, "code", code) < 0 ||
            form_add(form, 8192, "redirect_uri", cfg->ctl_oidc_redirect_uri) < 0 ||
            form_add(form, 8192, "client_id", cfg->ctl_oidc_client_id) < 0 ||
            form_add(form, 8192, "code_verifier", verifier) < 0 ||
            (post_secret && form_add(form, 8192, "client_secret", cfg->ctl_oidc_client_secret) < 0))
                return err_set(err, ERR_INVALID, E2BIG, "the authorization code is too long");
        json_t *j = NULL;
        long status = 0;
        int r = fetch(p->token_endpoint, form, basic ? cfg->ctl_oidc_client_id : NULL,
                      basic ? cfg->ctl_oidc_client_secret : NULL, &status, &j, err);
        explicit_bzero(form, 8192);
        if (r < 0)
                return r;
        r = token_reply(j, status, ret, err);
        json_decref(j);
        return r;
}
