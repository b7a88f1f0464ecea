/* Single sign-on (issue 15): the seed's WorkOS routes over a generic
 * OpenID Connect provider. Shared by sso.c (routes) and sso_provider.c
 * (the provider's documents over libcurl) only. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "base/err.h"

struct config;

#define SSO_URL_MAX 1024

/* What discovery tells (<issuer>/.well-known/openid-configuration). */
struct sso_provider {
        char authorization_endpoint[SSO_URL_MAX];
        char token_endpoint[SSO_URL_MAX];
        char jwks_uri[SSO_URL_MAX];
        bool secret_post;   /* client_secret_post offered (else client_secret_basic) */
};

/* Issuer, client id and redirect URI are all configured. */
bool sso_enabled(const struct config *cfg);
/* http(s) URL this service may call: https, or http to a loopback host. */
bool sso_url_allowed(const char *url);

/* The provider's endpoints: cached for an hour. Its "issuer" must equal the
 * configured one. err: ERR_UNAVAILABLE when the provider cannot be read. */
int sso_discover(const struct config *cfg, struct sso_provider *ret, struct err *err);
/* Exchanges an authorization code (with its PKCE verifier) for the ID
 * token (*ret owned). err: ERR_PERMISSION when the provider refused (its
 * "error" quoted), ERR_UNAVAILABLE when it did not answer. */
int sso_token(const struct config *cfg, const struct sso_provider *p, const char *code, const char *verifier,
              char **ret, struct err *err);
/* The provider's JWKS (*ret a new reference), cached; refresh fetches it
 * again (at most every few seconds: a token naming an unknown key cannot
 * make us hammer the provider). */
int sso_jwks(const struct config *cfg, const struct sso_provider *p, bool refresh, json_t **ret, struct err *err);
