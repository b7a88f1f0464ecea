/* The command-line client: `sandboxd <command> …` beside serving (a bare
 * `sandboxd --listen …`, or `sandboxd serve …`, serves). Every command is a
 * client of a sandboxd server over HTTP (src/client/), found as client.h
 * says: --url/--key flags, SANDBOXD_URL/SANDBOXD_API_KEY, the client config
 * file, else the local server at 127.0.0.1:8787.
 *
 * Exit statuses: 0 success; 1 a failure (the server's message on stderr);
 * 2 a usage error; `exec` and `shell` exit with the command's own status
 * (128 + signal when it was killed). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "client/client.h"

struct cli_command {
        const char *name;
        const char *args;       /* one-line synopsis of the arguments */
        const char *summary;    /* one line for `sandboxd help` */
        int (*run)(int argc, char **argv);  /* argv[0] is the command's name */
};

/* True when name is a command (so main does not parse server flags). */
bool cli_is_command(const char *name);
/* True when argv holds a client command, after global client options or
 * not; it is then moved to argv[1]. `serve` is not a client command. */
bool cli_take_command(int argc, char **argv);
/* Runs argv[1] (argv[0] is the program). Returns the exit status. */
int cli_main(int argc, char **argv);

/* ---- shared by the commands (cli/common.c) ---- */

/* What every command gets from the global options, which may come before or
 * after its own: --url URL, --key KEY, --json, -h/--help. */
struct cli_ctx {
        const char *name;               /* the command's name, for messages */
        struct client_config cfg;
        struct client *client;
        bool json;                      /* machine-readable output on stdout */
        bool help;                      /* -h/--help was given */
        bool tty_out, tty_err;          /* stdout / stderr is a terminal */
};

/* Removes the global options from argv (argc updated) and, unless help was
 * asked for, opens the client. Returns 0, or an exit status (2) after
 * printing why. */
int cli_ctx_open(struct cli_ctx *ctx, const char *name, int *argc, char **argv);
void cli_ctx_close(struct cli_ctx *ctx);

/* "sandboxd <cmd>: <message>" on stderr; returns 1 (the exit status). */
int cli_fail(const struct cli_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same for an answer that was not 2xx (the API's own message) or no
 * answer at all (err). */
int cli_fail_reply(const struct cli_ctx *ctx, const struct client_reply *r);
int cli_fail_err(const struct cli_ctx *ctx, const struct err *err);
/* A usage error: the message and the command's usage line; returns 2. */
int cli_usage_error(const struct cli_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Pretty JSON on stdout (the --json output). */
void cli_print_json(const json_t *j);

/* One call to the server with a JSON body (may be NULL); on a non-2xx answer
 * or none, prints why and returns 1; else 0 with the reply in out. */
int cli_call(struct cli_ctx *ctx, const char *method, const char *path, json_t *body, struct client_reply *out);

/* ---- progress bars (cli/progress.c) ---- */

/* One line on stderr redrawn with '\r' (at most every 100 ms): label, bar,
 * percent, bytes done/total, rate, ETA; without a total, bytes and rate.
 * Draws nothing unless on (callers pass: stderr is a terminal and no
 * --quiet). */
struct cli_progress {
        bool on, drawn;
        char label[64];
        uint64_t done, total;   /* total 0 = unknown */
        uint64_t start_ms, drawn_ms;
};
void cli_progress_start(struct cli_progress *p, bool on, const char *label, uint64_t total);
/* total 0 keeps the one known. */
void cli_progress_update(struct cli_progress *p, uint64_t done, uint64_t total);
void cli_progress_add(struct cli_progress *p, uint64_t n);
/* A client_progress_fn; cls is the struct cli_progress. */
void cli_progress_fn(void *cls, uint64_t done, uint64_t total);
/* The last draw and its newline (nothing when off). */
void cli_progress_end(struct cli_progress *p);

/* ---- sandbox references (cli/sandbox_ref.c) ---- */

/* Fails (exit status 1, after saying so) unless the server lists the
 * sandbox id in GET /sandboxes: the bridge routes would create an unknown
 * id on first use, which a typo must not do. */
int cli_sandbox_check(struct cli_ctx *ctx, const char *id);

/* A command not written yet says so (exit 1). */
int cli_pending(const char *name);

/* ---- helpers of the core commands (cli/helpers.c) ---- */

struct option;
/* getopt_long() that reports a bad option as a usage error (printed) and
 * returns CLI_OPT_ERROR for it (exit status 2). Set optind = 0 before the
 * first call of a command. */
#define CLI_OPT_ERROR (-2)
int cli_getopt(const struct cli_ctx *ctx, int argc, char **argv, const char *shortopts, const struct option *longopts);
/* Prints a command's help (usage, options, examples) and the global
 * options; returns 0. */
int cli_print_help(const char *text);
/* "SANDBOX[:PATH]": the id into id; *ret_path = what follows the first ':'
 * or NULL. Returns 1 with a path, 0 without, -EINVAL for an empty or too
 * long id. */
int cli_target_split(const char *arg, char *id, size_t idlen, const char **ret_path);
/* A PATH of SANDBOX:PATH for the files API ("" and "/" are the workspace). */
const char *cli_workspace_path(const char *path);
/* "/languages/<lang>/sandboxes/<id escaped><sub>"; -ENAMETOOLONG. */
int cli_gateway_path(char *out, size_t len, const char *lang, const char *id, const char *sub);
/* Every sandbox of GET /sandboxes (all pages) as a new JSON array; or an
 * exit status (1) after printing why. */
int cli_sandboxes_all(struct cli_ctx *ctx, json_t **ret);
/* One sandbox's SandboxInfo (new reference), or 1 after printing why (not
 * found included). */
int cli_sandbox_find(struct cli_ctx *ctx, const char *id, json_t **ret);
/* An ISO time as "YYYY-MM-DD HH:MM:SS" in out (or "-"); returns the text. */
const char *cli_date(const char *iso, char *out, size_t len);
/* The whole of FILE or stdin ("-"), NUL-terminated (malloc); at most
 * CLI_INPUT_MAX bytes. 0, or 1 after printing why. */
/* cli_call that leaves a non-2xx answer to the caller: 0 (2xx), -1 (an
 * answer that is not 2xx, kept in reply, nothing printed), or 1 after
 * printing why no answer came (reply empty). Clear the reply after 0 or -1. */
int cli_call_raw(struct cli_ctx *ctx, const char *method, const char *path, json_t *body, struct client_reply *reply);
/* -e NAME=VALUE into the env object (NAME -> VALUE); 0, 2 (usage) or 1. */
int cli_env_add(const struct cli_ctx *ctx, json_t *env, const char *kv);
#define CLI_INPUT_MAX ((size_t)16 << 20)
int cli_read_input(const struct cli_ctx *ctx, const char *file, char **ret, size_t *ret_len);

/* The commands (one file each under src/cli/). */
int cli_run(int argc, char **argv);
int cli_exec(int argc, char **argv);
int cli_cp(int argc, char **argv);
int cli_shell(int argc, char **argv);
int cli_ls(int argc, char **argv);
int cli_rm(int argc, char **argv);
int cli_contexts(int argc, char **argv);
int cli_keys(int argc, char **argv);
int cli_completion(int argc, char **argv);
int cli_mcp(int argc, char **argv);
