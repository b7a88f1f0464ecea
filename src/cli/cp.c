/* `sandboxd cp [-r] [-q] SRC DST`: files and folders to or from a sandbox
 * over the bridge's file routes (docs/bridge/files.md).
 *
 * Files move as raw bytes (PUT/GET /file/workspace/<path>), streamed
 * from/to an fd. Folders move as tar: up, a tar of the local folder with
 * every entry renamed under the remote path, merged by POST /hydrate (which
 * merges at /workspace's root, hence the renaming); down, POST /persist
 * (the bridge only tars all of /workspace) into an unnamed temp file, of
 * which only the remote path's subtree is extracted, tar-slip proof
 * (cli/cp_tar.c). `-` as the local side is a tar on stdin or stdout. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "cli/cp.h"

#define CP_USAGE                                                                                                       \
        "Usage: sandboxd cp [-r] [-q] SRC DST\n"                                                                        \
        "Copies files and folders to or from a sandbox: one side is SANDBOX:PATH (a relative\n"                        \
        "PATH is under /workspace; `SANDBOX:` is /workspace), the other a local path or `-`.\n\n"                      \
        "  -r, --recursive  copy a folder (a local folder is detected without it)\n"                                    \
        "  -q, --quiet      no progress bar (there is none when stderr is not a terminal)\n"                            \
        "  --json           print {bytes, files, path} when done\n\n"                                                  \
        "Up: a folder lands AT the remote PATH (inside it when PATH ends with '/').\n"                                  \
        "Down: into a local folder that exists, else AS the local path.\n"                                              \
        "`-` reads a tar from stdin (up) or writes one to stdout (down).\n"                                             \
        "Downloads refuse absolute and '..' names, symlinks leaving the copied folder and\n"                           \
        "anything that would be written through a symlink.\n"

struct cp {
        struct cli_ctx *ctx;
        bool recursive, quiet;
        const char *id;
        char rel[PATH_MAX];     /* the remote path below /workspace, "" = /workspace */
        bool into;              /* the remote path names a folder to copy into */
        const char *local;      /* or "-" */
        char dest[2 * PATH_MAX]; /* where it landed, for --json */
        struct cp_stats st;
};

/* ---- arguments ---- */

/* SANDBOX:PATH? The sandbox part is an id ([A-Za-z0-9._-]); a local path
 * with a colon can be written ./a:b. */
static bool split_remote(const char *arg, const char **colon)
{
        *colon = strchr(arg, ':');
        if (!*colon || *colon == arg)
                return false;
        for (const char *p = arg; p < *colon; p++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", *p))
                        return false;
        return true;
}

static int set_remote(struct cp *c, char *arg, const char *colon)
{
        const char *path = colon + 1;
        static char id[256];
        snprintf(id, sizeof(id), "%.*s", (int)(colon - arg), arg);
        c->id = id;
        if (path[0] == '/') {
                if (strncmp(path, "/workspace", 10) || (path[10] && path[10] != '/'))
                        return cli_usage_error(c->ctx, "%s: a sandbox path must be under /workspace", path);
                path += 10;
        }
        size_t n = strlen(path);
        c->into = n == 0 || path[n - 1] == '/';
        if (cp_norm_path(path, true, c->rel, sizeof(c->rel)) < 0)
                return cli_usage_error(c->ctx, "%s: a sandbox path must stay under /workspace (no '..')", colon + 1);
        c->into = c->into || !c->rel[0];
        return 0;
}

static int parse_args(struct cp *c, int argc, char **argv, bool *upload)
{
        char *pos[2];
        int npos = 0;
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];
                if (!strcmp(a, "-r") || !strcmp(a, "-R") || !strcmp(a, "--recursive"))
                        c->recursive = true;
                else if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
                        c->quiet = true;
                else if (a[0] == '-' && a[1])
                        return cli_usage_error(c->ctx, "unknown option %s", a);
                else if (npos < 2)
                        pos[npos++] = argv[i];
                else
                        return cli_usage_error(c->ctx, "one SRC and one DST");
        }
        if (npos != 2)
                return cli_usage_error(c->ctx, "SRC and DST, one of them SANDBOX:PATH");
        const char *c0, *c1;
        bool r0 = split_remote(pos[0], &c0), r1 = split_remote(pos[1], &c1);
        if (r0 == r1)
                return cli_usage_error(c->ctx, "exactly one side must be SANDBOX:PATH");
        *upload = r1;
        c->local = r1 ? pos[0] : pos[1];
        return r1 ? set_remote(c, pos[1], c1) : set_remote(c, pos[0], c0);
}

/* ---- helpers ---- */

static bool progress_on(const struct cp *c)
{
        return c->ctx->tty_err && !c->quiet;
}

static int temp_file(void)
{
        const char *dir = getenv("TMPDIR");
        if (!dir || !*dir)
                dir = "/tmp";
        int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0) {
                char path[PATH_MAX];
                snprintf(path, sizeof(path), "%s/sandboxd-cp-XXXXXX", dir);
                fd = mkostemp(path, O_CLOEXEC);
                if (fd >= 0)
                        unlink(path);
        }
        return fd < 0 ? -errno : fd;
}

/* One transfer: body from in_fd (size), answer into out_fd when 2xx. On a
 * non-2xx answer, the reply is kept in *rep (status > 0) and 1 returned. */
static int transfer(struct cp *c, const char *method, const char *path, int in_fd, uint64_t size, int out_fd,
                    const char *label, struct client_reply *rep)
{
        struct cli_progress p;
        struct err err = { 0 };
        cli_progress_start(&p, progress_on(c), label, size);
        struct client_request rq = {
                .method = method, .path = path, .in_fd = in_fd, .in_size = size, .out_fd = out_fd,
                .data = in_fd < 0 ? "" : NULL, .content_type = in_fd >= 0 ? "application/octet-stream" : NULL,
                .progress = cli_progress_fn, .progress_cls = &p,
        };
        int r = client_request(c->ctx->client, &rq, rep, &err);
        cli_progress_end(&p);
        if (r < 0) {
                r = cli_fail_err(c->ctx, &err);
                err_done(&err);
                return -r;
        }
        return rep->status >= 200 && rep->status < 300 ? 0 : 1;
}

/* A transfer that must succeed: 0, or the exit status after saying why. */
static int must(struct cp *c, const char *method, const char *path, int in_fd, uint64_t size, int out_fd,
                const char *label)
{
        struct client_reply rep;
        int r = transfer(c, method, path, in_fd, size, out_fd, label, &rep);
        if (r < 0)
                return -r;
        if (r > 0)
                r = cli_fail_reply(c->ctx, &rep);
        client_reply_clear(&rep);
        return r;
}

static int file_url(const struct cp *c, const char *rel, char *out, size_t len)
{
        char esc[PATH_MAX * 3];
        if (client_escape_path(rel, esc, sizeof(esc)) < 0)
                return -ENAMETOOLONG;
        int n = snprintf(out, len, "/v1/sandbox/%s/file/workspace/%s", c->id, esc);
        return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static void report(struct cp *c)
{
        if (!c->ctx->json)
                return;
        json_t *j = json_pack("{s:I, s:I, s:s}", "bytes", (json_int_t)c->st.bytes, "files", (json_int_t)c->st.files,
                              "path", c->dest);
        cli_print_json(j);
        json_decref(j);
}

static const char *base_name(const char *path)
{
        static char copy[PATH_MAX];
        snprintf(copy, sizeof(copy), "%s", path);
        size_t n = strlen(copy);
        while (n > 1 && copy[n - 1] == '/')
                copy[--n] = '\0';
        return basename(copy);
}

/* ---- up ---- */

/* One part of an upload's archive (a cp_sink's flush). */
struct hydrate_part {
        struct cp *c;
        int status;             /* the exit status of a failed part */
};

static int hydrate(void *cls, int tar_fd)
{
        struct hydrate_part *h = cls;
        struct stat st;
        char path[256];
        if (fstat(tar_fd, &st) < 0 || lseek(tar_fd, 0, SEEK_SET) < 0)
                return h->status = cli_fail(h->c->ctx, "the archive: %s", strerror(errno));
        snprintf(path, sizeof(path), "/v1/sandbox/%s/hydrate", h->c->id);
        return h->status = must(h->c, "POST", path, tar_fd, (uint64_t)st.st_size, -1, "upload");
}

static int upload_tar(struct cp *c, const char *dest)
{
        _cleanup_close_ int tmp = temp_file();
        struct err err = { 0 };
        struct cli_progress p;
        struct hydrate_part part = { .c = c };
        struct cp_sink sink = { .fd = tmp, .flush = hydrate, .cls = &part };
        if (tmp < 0)
                return cli_fail(c->ctx, "no temp file for the archive: %s", strerror(-tmp));
        cli_progress_start(&p, progress_on(c), "archive", 0);
        int r = strcmp(c->local, "-") ? cp_tar_local(c->local, dest, &sink, &p, &c->st, &err)
                                      : cp_tar_stream(STDIN_FILENO, dest, &sink, &p, &c->st, &err);
        cli_progress_end(&p);
        if (r == -ECANCELED)
                r = part.status;
        else if (r < 0)
                r = cli_fail(c->ctx, "%s", err.msg);
        err_done(&err);
        return r;
}

static int upload_file(struct cp *c, const char *dest)
{
        _cleanup_close_ int fd = open(c->local, O_RDONLY | O_CLOEXEC);
        struct stat st;
        char path[PATH_MAX * 4];
        if (fd < 0 || fstat(fd, &st) < 0)
                return cli_fail(c->ctx, "%s: %s", c->local, strerror(errno));
        if (file_url(c, dest, path, sizeof(path)) < 0)
                return cli_fail(c->ctx, "path too long: %s", dest);
        int r = must(c, "PUT", path, fd, (uint64_t)st.st_size, -1, "upload");
        if (r == 0) {
                c->st.bytes = (uint64_t)st.st_size;
                c->st.files = 1;
        }
        return r;
}

static int upload(struct cp *c)
{
        char dest[PATH_MAX];
        struct stat st;
        bool stream = !strcmp(c->local, "-");
        if (!stream && stat(c->local, &st) < 0)
                return cli_fail(c->ctx, "%s: %s", c->local, strerror(errno));
        const char *name = stream ? "" : base_name(c->local);
        if (!strcmp(name, "/") || !strcmp(name, ".") || !strcmp(name, ".."))
                name = "";
        /* A stream's entries carry their own names: they land in PATH. */
        int n = snprintf(dest, sizeof(dest), "%s%s%s", c->rel, c->into && *c->rel && *name ? "/" : "",
                         c->into ? name : "");
        if (n < 0 || (size_t)n >= sizeof(dest))
                return cli_fail(c->ctx, "path too long");
        if (!stream && !S_ISDIR(st.st_mode) && !*dest)
                return cli_fail(c->ctx, "%s: name the file in the sandbox (SANDBOX:PATH)", c->local);
        snprintf(c->dest, sizeof(c->dest), "/workspace%s%s", *dest ? "/" : "", dest);
        if (stream || S_ISDIR(st.st_mode))
                return upload_tar(c, dest);
        if (!S_ISREG(st.st_mode))
                return cli_fail(c->ctx, "%s: not a file or a folder", c->local);
        return upload_file(c, dest);
}

/* ---- down ---- */

/* Where a download lands: a folder that exists and the name in it. */
static int local_target(struct cp *c, char *dir, size_t dlen, char *leaf, size_t llen)
{
        struct stat st;
        const char *remote_name = *c->rel ? base_name(c->rel) : "workspace";
        size_t n = strlen(c->local);
        if (stat(c->local, &st) == 0 && S_ISDIR(st.st_mode)) {
                snprintf(dir, dlen, "%s", c->local);
                snprintf(leaf, llen, "%s", remote_name);
        } else if (n > 0 && c->local[n - 1] == '/') {
                return cli_fail(c->ctx, "%s: no such folder", c->local);
        } else {
                char copy[PATH_MAX];
                snprintf(copy, sizeof(copy), "%s", c->local);
                snprintf(dir, dlen, "%s", dirname(copy));
                snprintf(leaf, llen, "%s", base_name(c->local));
                if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
                        return cli_fail(c->ctx, "%s: no such folder", dir);
                snprintf(c->dest, sizeof(c->dest), "%s", c->local);
                return 0;
        }
        snprintf(c->dest, sizeof(c->dest), "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", leaf);
        return 0;
}

/* A downloaded file gets the mode a new file gets, then its name. */
static int finish_file(struct cp *c, int fd, const char *tmp)
{
        struct stat st;
        mode_t um = umask(0);
        umask(um);
        if (fchmod(fd, 0666 & ~um) < 0 || fstat(fd, &st) < 0 || rename(tmp, c->dest) < 0)
                return cli_fail(c->ctx, "%s: %s", c->dest, strerror(errno));
        c->st.bytes = (uint64_t)st.st_size;
        c->st.files = 1;
        return 0;
}

/* The file's bytes into a temp file beside the target, renamed over it:
 * -1 when the remote path is a folder (the caller goes the tar way). */
static int download_file(struct cp *c, const char *dir, const char *leaf)
{
        char path[PATH_MAX * 4], tmp[PATH_MAX + NAME_MAX + 64];
        struct client_reply rep;
        if (file_url(c, c->rel, path, sizeof(path)) < 0)
                return cli_fail(c->ctx, "path too long: %s", c->rel);
        snprintf(tmp, sizeof(tmp), "%s/.%s.sandboxd-XXXXXX", dir, leaf);
        _cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0)
                return cli_fail(c->ctx, "%s: %s", dir, strerror(errno));
        int r = transfer(c, "GET", path, -1, 0, fd, "download", &rep);
        if (r < 0) {
                r = -r;
        } else if (r == 0) {
                r = finish_file(c, fd, tmp);
        } else if (rep.status == 400 && rep.json &&
                   !strncmp(json_string_value(json_object_get(rep.json, "error")) ?: "", "Is a directory", 14)) {
                r = -1;
        } else {
                r = cli_fail_reply(c->ctx, &rep);
        }
        if (r != 0)
                unlink(tmp);
        client_reply_clear(&rep);
        return r;
}

static int download_tar(struct cp *c, const char *dir, const char *leaf, int out_fd)
{
        _cleanup_close_ int tmp = temp_file();
        char path[256];
        struct err err = { 0 };
        struct cli_progress p;
        if (tmp < 0)
                return cli_fail(c->ctx, "no temp file for the archive: %s", strerror(-tmp));
        snprintf(path, sizeof(path), "/v1/sandbox/%s/persist", c->id);
        int r = must(c, "POST", path, -1, 0, tmp, "download");
        struct stat st;
        if (r == 0 && (fstat(tmp, &st) < 0 || lseek(tmp, 0, SEEK_SET) < 0))
                r = cli_fail(c->ctx, "the archive: %s", strerror(errno));
        if (r != 0)
                return r;
        cli_progress_start(&p, progress_on(c), out_fd < 0 ? "extract" : "archive", (uint64_t)st.st_size);
        r = cp_tar_extract(tmp, c->rel, dir, leaf, out_fd, &p, &c->st, &err);
        cli_progress_end(&p);
        if (r < 0) {
                r = cli_fail(c->ctx, "%s", err.msg);
                err_done(&err);
                return r;
        }
        if (c->st.matched == 0)
                return cli_fail(c->ctx, "no such file or folder in the sandbox: /workspace%s%s", *c->rel ? "/" : "",
                                c->rel);
        if (c->st.refused)
                return cli_fail(c->ctx, "%u entries refused (above)", c->st.refused);
        return 0;
}

static int download(struct cp *c)
{
        char dir[PATH_MAX], leaf[NAME_MAX + 1];
        if (!strcmp(c->local, "-")) {
                snprintf(c->dest, sizeof(c->dest), "-");
                return download_tar(c, ".", *c->rel ? base_name(c->rel) : "workspace", STDOUT_FILENO);
        }
        int r = local_target(c, dir, sizeof(dir), leaf, sizeof(leaf));
        if (r != 0)
                return r;
        if (!c->recursive && *c->rel) {
                r = download_file(c, dir, leaf);
                if (r != -1)
                        return r;
        }
        return download_tar(c, dir, leaf, -1);
}

int cli_cp(int argc, char **argv)
{
        struct cli_ctx ctx;
        int rc = cli_ctx_open(&ctx, "cp", &argc, argv);
        if (rc != 0 || ctx.help) {
                if (ctx.help)
                        fputs(CP_USAGE, stdout);
                return rc;
        }
        struct cp c = { .ctx = &ctx };
        bool up = false;
        rc = parse_args(&c, argc, argv, &up);
        if (rc == 0)
                rc = cli_sandbox_check(&ctx, c.id);
        if (rc == 0)
                rc = up ? upload(&c) : download(&c);
        if (rc == 0)
                report(&c);
        cli_ctx_close(&ctx);
        return rc;
}
