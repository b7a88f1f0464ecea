/* A client of a sandboxd server over HTTP (libcurl): what the command-line
 * client (src/cli/) and the MCP server (src/mcp/) stand on. It knows the
 * three APIs only as paths and JSON; nothing of the daemon's own code.
 *
 * Where the server and key come from, first found wins:
 *   1. flags (--url, --key),
 *   2. the environment: SANDBOXD_URL; SANDBOXD_API_KEY, then SANDBOX_API_KEY,
 *   3. a config file: $SANDBOXD_CLIENT_CONFIG, else
 *      $XDG_CONFIG_HOME/sandboxd/client.conf (~/.config/… without XDG), with
 *      `url = …` and `key = …` lines (# comments),
 *   4. the local server at its default address, http://127.0.0.1:8787, no key. */
#pragma once

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define CLIENT_DEFAULT_URL "http://127.0.0.1:8787"

struct client_config {
        char url[512];          /* without a trailing slash */
        char key[512];          /* "" = none */
        char source[64];        /* where url came from: "flag", "env", a file path, "default" */
};

/* Fills cfg from flag_url/flag_key (either may be NULL) and the places above.
 * A config file that exists but cannot be read or parsed is an error (the
 * user meant it); a missing one is not. */
int client_config_resolve(struct client_config *cfg, const char *flag_url, const char *flag_key, struct err *err);

struct client;

int client_new(const struct client_config *cfg, struct client **ret);
void client_free(struct client *c);
/* The server's base URL, e.g. "http://127.0.0.1:8787". */
const char *client_url(const struct client *c);

/* What a server answered. json is the parsed body when it was JSON. */
struct client_reply {
        long status;
        char *body;             /* NUL-terminated */
        size_t len;
        json_t *json;           /* or NULL */
        char content_type[128];
};
void client_reply_clear(struct client_reply *r);
/* A one-line human message for a non-2xx reply: the API's own message
 * (`message`, `error`, `error.message`) and code when the body has them. */
void client_reply_message(const struct client_reply *r, char *out, size_t len);

/* Called as bytes move; total 0 = unknown. */
typedef void (*client_progress_fn)(void *cls, uint64_t done, uint64_t total);

/* method + path (starting with '/', query allowed); body (may be NULL) is
 * sent as application/json. Fails (err: ERR_UNAVAILABLE) only when no
 * answer came; any HTTP status is an answer. */
int client_json(struct client *c, const char *method, const char *path, json_t *body, struct client_reply *out,
                struct err *err);

/* Extra request headers, "Name: value"; NULL-terminated array or NULL. */
struct client_request {
        const char *method;
        const char *path;
        const char *const *headers;
        /* body: either bytes (data,len) or an fd read to EOF (size for the
         * progress total and Content-Length; 0 = chunked, unknown) */
        const void *data;
        size_t len;
        int in_fd;              /* -1 = none */
        uint64_t in_size;
        const char *content_type;
        /* answer: into out_fd when >= 0 and the status is 2xx, else kept in
         * the reply's body */
        int out_fd;
        client_progress_fn progress;
        void *progress_cls;
};
int client_request(struct client *c, const struct client_request *rq, struct client_reply *out, struct err *err);

/* Server-sent events: fn is called once per event (event name "message"
 * when unnamed; data joined with '\n'); a non-zero return stops reading
 * (the request is then aborted, and that value is returned). A non-2xx
 * answer is returned in out (no event is delivered). */
typedef int (*client_sse_fn)(void *cls, const char *event, const char *data, size_t len);
int client_sse(struct client *c, const char *method, const char *path, json_t *body, client_sse_fn fn, void *cls,
               struct client_reply *out, struct err *err);

/* client_sse that also stops when *stop becomes true (checked as bytes
 * arrive and about once a second while the server is silent): the request
 * is aborted and -ECANCELED returned (err untouched). stop may be NULL. */
int client_sse_stoppable(struct client *c, const char *method, const char *path, json_t *body, client_sse_fn fn,
                         void *cls, const atomic_bool *stop, struct client_reply *out, struct err *err);

/* The path with every byte outside [A-Za-z0-9._~/-] percent-encoded into out. */
int client_escape_path(const char *in, char *out, size_t len);
