/* The files API on one sandbox workspace (see files.h for the contract).
 *
 * Confinement model. The workspace is guest-writable, so every name in it is
 * attacker-controlled and may change between any two system calls. We never
 * build host paths: every lookup is openat2() beneath root_fd with
 * RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS, and mutating
 * ops resolve the *parent* directory that way and then act on the final
 * component with *at() calls (which never follow a trailing symlink when
 * used as below). The files API therefore does not follow symbolic links at
 * all, not even ones that stay inside the workspace: a path that crosses a
 * symlink, or reads/writes one, is 403 PERMISSION_DENIED. Links themselves
 * can still be listed (as type "file", size 0), renamed and deleted, since
 * those act on the link, never on its target. A guest racing us (swapping a
 * directory for a symlink between check and use) can at worst make the
 * operation fail.
 *
 * Identity. When the daemon runs as root, all file system access happens
 * with fsuid/fsgid set to the jail user (per thread on Linux), so new files
 * belong to the guest and root's DAC override cannot be used to read or
 * clobber root-owned objects that happen to sit in the workspace.
 *
 * Limits of 0 (or a NULL limits pointer) mean "no limit". */
#include "sandbox/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "base/util.h"

#define RESOLVE_FLAGS (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS)
#define ROOT_LEN (sizeof(FILES_ROOT) - 1)
/* A list answers at most this many entries; a workspace within its limits
 * never gets near it, this only bounds memory when the guest went beyond. */
#define LIST_MAX_ENTRIES 100000
/* Reads are capped by max_file_bytes; this is the cap when that is 0. */
#define READ_HARD_MAX (256 * MiB)
#define FILE_MODE 0644
#define DIR_MODE 0755

enum op {
        OP_READ,
        OP_WRITE,
        OP_MKDIR,
        OP_DELETE,
        OP_RENAME,
        OP_MOVE,
        OP_LIST,
        OP_EXISTS,
        _OP_MAX,
};

static const struct {
        const char *name;
        const char *operation;
} op_table[_OP_MAX] = {
        [OP_READ] = { "read", "file.read" },
        [OP_WRITE] = { "write", "file.write" },
        [OP_MKDIR] = { "mkdir", "directory.create" },
        [OP_DELETE] = { "delete", "file.delete" },
        [OP_RENAME] = { "rename", "file.rename" },
        [OP_MOVE] = { "move", "file.move" },
        [OP_LIST] = { "list", "directory.list" },
        [OP_EXISTS] = { "exists", "file.stat" },
};

static const struct {
        const char *ext;
        const char *type;
} mime_table[] = {
        { ".json", "application/json" }, { ".js", "text/javascript" },
        { ".mjs", "text/javascript" },   { ".py", "text/x-python" },
        { ".pl", "text/x-perl" },        { ".rb", "text/x-ruby" },
        { ".txt", "text/plain" },        { ".md", "text/markdown" },
        { ".html", "text/html" },        { ".css", "text/css" },
        { ".csv", "text/csv" },          { ".png", "image/png" },
        { ".jpg", "image/jpeg" },        { ".jpeg", "image/jpeg" },
        { ".gif", "image/gif" },         { ".svg", "image/svg+xml" },
        { ".pdf", "application/pdf" },   { ".wasm", "application/wasm" },
        { ".zip", "application/zip" },   { ".gz", "application/gzip" },
};

/* One parsed request. path/new_path are normalized ("/workspace/…"); rel and
 * new_rel point into them past "/workspace/" ("" for the root). */
struct req {
        enum op op;
        const char *operation;
        int root_fd;
        const struct files_limits *lim;
        uint64_t created_at_ms;
        char timestamp[32];

        const char *raw_path;
        size_t raw_path_len;
        char path[PATH_MAX];
        const char *rel;

        const char *raw_new_path;
        size_t raw_new_path_len;
        char new_path[PATH_MAX];
        const char *new_rel;

        const char *content;
        size_t content_len;
        bool base64;
        bool recursive;
        bool force;
        bool include_hidden;
};

/* jansson ships json_decrefp() for exactly this. */
#define _cleanup_json_ _cleanup_(json_decrefp)

void files_error_done(struct files_error *e)
{
        if (!e)
                return;
        json_decref(e->context);
        e->context = NULL;
}

/* ---- error reporting ---------------------------------------------------- */

/* Formats into err->message. The message is later put into a JSON string, so
 * truncation must not split a UTF-8 sequence (jansson would reject it). */
static void set_message(struct files_error *err, const char *fmt, va_list ap)
        __attribute__((format(printf, 2, 0)));
static void set_message(struct files_error *err, const char *fmt, va_list ap)
{
        _cleanup_free_ char *tmp = NULL;
        int n = vasprintf(&tmp, fmt, ap);
        if (n < 0) {
                snprintf(err->message, sizeof(err->message), "Out of memory");
                return;
        }
        size_t len = (size_t)n;
        if (len >= sizeof(err->message)) {
                len = sizeof(err->message) - 1;
                while (len > 0 && ((unsigned char)tmp[len] & 0xC0) == 0x80)
                        len--;
        }
        memcpy(err->message, tmp, len);
        err->message[len] = '\0';
}

static json_t *fail_validation(struct files_error *err, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
static json_t *fail_validation(struct files_error *err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        set_message(err, fmt, ap);
        va_end(ap);
        err->http_status = 400;
        err->code = "VALIDATION_FAILED";
        err->operation = NULL;
        json_decref(err->context);
        err->context = json_object();
        return NULL;
}

/* ELOOP is what the resolver reports for a symlink we refuse to follow; to
 * clients that is plain EACCES (PERMISSION_DENIED). */
static int shown_errno(int e)
{
        return e == ELOOP ? EACCES : e;
}

static void classify(int e, enum op op, int *ret_status, const char **ret_code)
{
        int status = 500;
        const char *code = "FILESYSTEM_ERROR";
        switch (e) {
        case ENOENT:
                status = 404, code = "FILE_NOT_FOUND";
                break;
        case EEXIST:
                status = 409, code = "FILE_EXISTS";
                break;
        case EACCES:
        case EPERM:
                status = 403, code = "PERMISSION_DENIED";
                break;
        case EISDIR:
                status = 400, code = "IS_DIRECTORY";
                break;
        case ENOTDIR:
                status = 400, code = "NOT_DIRECTORY";
                break;
        case EFBIG:
                status = 413, code = "FILE_TOO_LARGE";
                break;
        case ENOSPC:
        case EDQUOT:
                status = 500, code = "NO_SPACE";
                break;
        default:
                break;
        }
        /* The SDK reports every failed mkdir (missing parent, existing path,
         * non-directory component) as FILESYSTEM_ERROR; errno stays in the
         * context. Permission and space failures keep their own codes. */
        if (op == OP_MKDIR && e != EACCES && e != EPERM && e != ENOSPC && e != EDQUOT)
                status = 500, code = "FILESYSTEM_ERROR";
        *ret_status = status;
        *ret_code = code;
}

static const char *errno_name(int e)
{
        const char *n = strerrorname_np(e);
        return n ? n : "EIO";
}

static void set_messagef(struct files_error *err, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
static void set_messagef(struct files_error *err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        set_message(err, fmt, ap);
        va_end(ap);
}

static void default_message(struct files_error *err, int e, const char *p)
{
        if (e == ELOOP)
                set_messagef(err, "Permission denied: '%s' (the files API does not follow symbolic links)", p);
        else if (e == EEXIST)
                set_messagef(err, "Already exists: %s", p);
        else
                set_messagef(err, "%s: %s", strerrordesc_np(e) ? strerrordesc_np(e) : "Unknown error", p);
}

/* Fills err for a file system failure of rq (e: positive errno). extra (may
 * be NULL; the reference is stolen) adds context fields before "errno". A
 * NULL fmt gives a default message naming msg_path (or the request path).
 * Always returns NULL so callers can `return fail_fs(…)`. */
static json_t *fail_fs(struct files_error *err, const struct req *rq, int e, json_t *extra,
                       const char *msg_path, const char *fmt, ...)
        __attribute__((format(printf, 6, 7)));
static json_t *fail_fs(struct files_error *err, const struct req *rq, int e, json_t *extra,
                       const char *msg_path, const char *fmt, ...)
{
        _cleanup_json_ json_t *extra_owned = extra;
        int shown = shown_errno(e);

        if (fmt) {
                va_list ap;
                va_start(ap, fmt);
                set_message(err, fmt, ap);
                va_end(ap);
        } else {
                default_message(err, e, msg_path ? msg_path : rq->path);
        }
        classify(shown, rq->op, &err->http_status, &err->code);
        err->operation = rq->operation;

        json_t *ctx = json_object();
        if (ctx) {
                /* Before normalization succeeded there is only the raw path. */
                if (rq->path[0])
                        json_object_set_new(ctx, "path", json_string(rq->path));
                else
                        json_object_set_new(ctx, "path", json_stringn(rq->raw_path, rq->raw_path_len));
                json_object_set_new(ctx, "operation", json_string(rq->operation));
                if (rq->new_path[0])
                        json_object_set_new(ctx, "newPath", json_string(rq->new_path));
                if (extra)
                        json_object_update(ctx, extra);
                json_object_set_new(ctx, "errno", json_string(errno_name(shown)));
        }
        json_decref(err->context);
        err->context = ctx;
        return NULL;
}

/* ---- path normalization ------------------------------------------------- */

int files_normalize(const char *path, char *out, size_t outlen)
{
        size_t len = strlen(path);
        if (!utf8_valid(path, len))
                return -EINVAL;
        if (len >= PATH_MAX)
                return -ENAMETOOLONG;

        /* Relative paths resolve against the fixed cwd /workspace. */
        char base[ROOT_LEN + 1 + PATH_MAX];
        if (path[0] == '/')
                memcpy(base, path, len + 1);
        else
                snprintf(base, sizeof(base), "%s/%s", FILES_ROOT, path);

        /* res only ever shrinks relative to base, so it cannot overflow. */
        char res[sizeof(base)];
        size_t rlen = 0;
        for (const char *seg = base; *seg;) {
                const char *end = strchrnul(seg, '/');
                size_t slen = (size_t)(end - seg);
                if (slen == 0 || (slen == 1 && seg[0] == '.')) {
                        /* skipped */
                } else if (slen == 2 && seg[0] == '.' && seg[1] == '.') {
                        if (rlen == 0)
                                return -EACCES; /* above "/" */
                        while (rlen > 0 && res[rlen - 1] != '/')
                                rlen--;
                        rlen--; /* the '/' itself */
                } else {
                        if (slen > NAME_MAX)
                                return -ENAMETOOLONG;
                        res[rlen++] = '/';
                        memcpy(res + rlen, seg, slen);
                        rlen += slen;
                }
                seg = *end ? end + 1 : end;
        }
        res[rlen] = '\0';

        if (strncmp(res, FILES_ROOT, ROOT_LEN) != 0 || (res[ROOT_LEN] != '\0' && res[ROOT_LEN] != '/'))
                return -EACCES;
        if (rlen + 1 > outlen || rlen >= PATH_MAX)
                return -ENAMETOOLONG;
        memcpy(out, res, rlen + 1);
        return 0;
}

/* "/workspace/a/b" → "a/b"; "/workspace" → "". */
static const char *rel_of(const char *normalized)
{
        return normalized[ROOT_LEN] == '/' ? normalized + ROOT_LEN + 1 : normalized + ROOT_LEN;
}

/* ---- confined resolution ------------------------------------------------ */

/* openat2() beneath dir_fd, never following any symlink. rel "" is dir_fd
 * itself. A symlink anywhere on the way yields -ELOOP (RESOLVE_BENEATH's
 * -EXDEV for escapes is folded into it: both mean "refused by confinement").
 * -EAGAIN (the kernel saw a concurrent rename and refused to guess) is
 * retried a few times. Returns the fd or -errno. */
static int resolve_at(int dir_fd, const char *rel, uint64_t flags)
{
        struct open_how how = {
                .flags = flags | O_CLOEXEC,
                .resolve = RESOLVE_FLAGS,
        };
        for (int attempt = 0; attempt < 8; attempt++) {
                long fd = syscall(SYS_openat2, dir_fd, *rel ? rel : ".", &how, sizeof(how));
                if (fd >= 0)
                        return (int)fd;
                if (errno == EAGAIN || errno == EINTR)
                        continue;
                return errno == EXDEV ? -ELOOP : -errno;
        }
        return -EAGAIN;
}

/* Opens the parent directory of rel (non-empty) as an O_PATH fd and points
 * *ret_name at the final component inside rel. */
static int open_parent(int root_fd, const char *rel, const char **ret_name)
{
        const char *slash = strrchr(rel, '/');
        char parent[PATH_MAX];
        if (slash) {
                size_t n = (size_t)(slash - rel);
                memcpy(parent, rel, n);
                parent[n] = '\0';
        } else {
                parent[0] = '\0';
        }
        int fd = resolve_at(root_fd, parent, O_PATH | O_DIRECTORY);
        if (fd < 0)
                return fd;
        *ret_name = slash ? slash + 1 : rel;
        return fd;
}

/* lstat of one entry in dir_fd: never follows. */
static int stat_entry(int dir_fd, const char *name, struct stat *st)
{
        return fstatat(dir_fd, name, st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

/* Makes directory entries created/removed under dir_fd durable. dir_fd is
 * usually O_PATH, which fsync() rejects, so reopen "." for it. A directory
 * the jail user can search but not read cannot be opened; that corner
 * stays best effort rather than failing an operation that did succeed. */
static int fsync_dir(int dir_fd)
{
        _cleanup_close_ int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return errno == EACCES ? 0 : -errno;
        return fsync(fd) < 0 ? -errno : 0;
}

/* ---- identity ------------------------------------------------------------ */

struct identity {
        bool switched;
        uid_t old_uid;
        gid_t old_gid;
};

/* Switches fsuid/fsgid (thread-local) to the jail user when running as
 * root. setfsuid() cannot report failure directly, so read the value back. */
static int identity_enter(struct identity *id, unsigned uid, unsigned gid)
{
        *id = (struct identity){ 0 };
        if (geteuid() != 0)
                return 0;
        id->old_gid = (gid_t)setfsgid((gid_t)gid);
        id->old_uid = (uid_t)setfsuid((uid_t)uid);
        id->switched = true;
        if ((unsigned)setfsuid((uid_t)-1) != uid || (unsigned)setfsgid((gid_t)-1) != gid)
                return -EPERM;
        return 0;
}

static void identity_leave(struct identity *id)
{
        if (!id->switched)
                return;
        setfsuid(id->old_uid);
        setfsgid(id->old_gid);
        id->switched = false;
}

/* ---- content encodings --------------------------------------------------- */

static bool is_b64_char(unsigned char c)
{
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
               c == '/';
}

/* Decodes base64 exactly as atob() (WHATWG "forgiving-base64") accepts it,
 * which is what the reference uses: ASCII whitespace is ignored, padding is
 * optional but must be right when present, anything else is -EINVAL.
 * EVP_DecodeBlock is lenient in other ways and counts padding as output
 * bytes, so the input is validated and re-padded here first. */
static int b64_decode(const char *in, size_t len, unsigned char **ret, size_t *ret_len)
{
        if (len > (size_t)INT_MAX - 4)
                return -EFBIG;
        _cleanup_free_ char *clean = malloc(len + 4);
        if (!clean)
                return -ENOMEM;
        size_t n = 0;
        for (size_t i = 0; i < len; i++) {
                char c = in[i];
                if (c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r')
                        continue;
                clean[n++] = c;
        }
        if (n % 4 == 0 && n > 0 && clean[n - 1] == '=') {
                n--;
                if (clean[n - 1] == '=')
                        n--;
        }
        if (n % 4 == 1)
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (!is_b64_char((unsigned char)clean[i]))
                        return -EINVAL;
        size_t pad = (4 - n % 4) % 4;
        memset(clean + n, '=', pad);
        n += pad;

        _cleanup_free_ unsigned char *out = malloc(n / 4 * 3 + 1);
        if (!out)
                return -ENOMEM;
        int k = EVP_DecodeBlock(out, (const unsigned char *)clean, (int)n);
        if (k < 0 || (size_t)k < pad)
                return -EINVAL;
        *ret_len = (size_t)k - pad;
        *ret = TAKE_PTR(out);
        return 0;
}

static char *b64_encode(const unsigned char *in, size_t len)
{
        if (len > (size_t)INT_MAX / 4 * 3 - 3)
                return NULL;
        char *out = malloc((len + 2) / 3 * 4 + 1);
        if (!out)
                return NULL;
        EVP_EncodeBlock((unsigned char *)out, in, (int)len);
        return out;
}

static void put_utf8(char *out, size_t *o, uint32_t cp)
{
        if (cp < 0x80) {
                out[(*o)++] = (char)cp;
        } else if (cp < 0x800) {
                out[(*o)++] = (char)(0xC0 | (cp >> 6));
                out[(*o)++] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
                out[(*o)++] = (char)(0xE0 | (cp >> 12));
                out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                out[(*o)++] = (char)(0x80 | (cp & 0x3F));
        } else {
                out[(*o)++] = (char)(0xF0 | (cp >> 18));
                out[(*o)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                out[(*o)++] = (char)(0x80 | (cp & 0x3F));
        }
}

/* Lossy UTF-8 decoding exactly as the reference's TextDecoder("utf-8")
 * does it (WHATWG Encoding §4.2): a leading BOM is dropped and each maximal
 * invalid subpart becomes one U+FFFD. util.h's utf8_sanitize replaces per
 * byte, which differs for truncated sequences ("\xE2\x82" is one U+FFFD
 * here). out needs 3*len+1 bytes. Returns the output length. */
static size_t utf8_decode_lossy(const unsigned char *s, size_t len, char *out)
{
        size_t i = 0, o = 0;
        unsigned needed = 0, seen = 0;
        uint32_t cp = 0;
        unsigned char lower = 0x80, upper = 0xBF;

        if (len >= 3 && s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF)
                i = 3;
        while (i < len) {
                unsigned char b = s[i];
                if (needed == 0) {
                        i++;
                        if (b <= 0x7F) {
                                out[o++] = (char)b;
                        } else if (b >= 0xC2 && b <= 0xDF) {
                                needed = 1, cp = b & 0x1F;
                        } else if (b >= 0xE0 && b <= 0xEF) {
                                if (b == 0xE0)
                                        lower = 0xA0;
                                if (b == 0xED)
                                        upper = 0x9F;
                                needed = 2, cp = b & 0x0F;
                        } else if (b >= 0xF0 && b <= 0xF4) {
                                if (b == 0xF0)
                                        lower = 0x90;
                                if (b == 0xF4)
                                        upper = 0x8F;
                                needed = 3, cp = b & 0x07;
                        } else {
                                put_utf8(out, &o, 0xFFFD);
                        }
                        continue;
                }
                if (b < lower || b > upper) {
                        /* Emit one U+FFFD for the broken prefix and
                         * reprocess b as the start of something new. */
                        needed = seen = 0, cp = 0, lower = 0x80, upper = 0xBF;
                        put_utf8(out, &o, 0xFFFD);
                        continue;
                }
                i++;
                lower = 0x80, upper = 0xBF;
                cp = (cp << 6) | (b & 0x3F);
                if (++seen == needed) {
                        put_utf8(out, &o, cp);
                        needed = seen = 0, cp = 0;
                }
        }
        if (needed)
                put_utf8(out, &o, 0xFFFD);
        out[o] = '\0';
        return o;
}

static const char *mime_type_for(const char *path, bool binary)
{
        /* Same as /\.[^./]+$/ on the path: the last dot of the last name. */
        const char *slash = strrchr(path, '/');
        const char *dot = strrchr(slash ? slash : path, '.');
        if (dot && dot[1] != '\0')
                for (size_t i = 0; i < ARRAY_SIZE(mime_table); i++)
                        if (strcasecmp(dot, mime_table[i].ext) == 0)
                                return mime_table[i].type;
        return binary ? "application/octet-stream" : "text/plain";
}

/* ---- tree walking -------------------------------------------------------- */

typedef int (*walk_fn)(void *userdata, const char *rel, const char *name, const struct stat *st);

struct walk {
        int root_fd;
        char path[PATH_MAX]; /* current directory relative to root_fd */
        size_t base_len;     /* length of the walked directory's own path */
        bool recursive;
        bool include_hidden;
        walk_fn fn;
        void *userdata;
};

static void strv_free(char **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

/* Appends "/name" (or "name" at the root) to w->path; returns the old length. */
static int path_push(struct walk *w, size_t len, const char *name)
{
        size_t nlen = strlen(name);
        size_t need = len + (len ? 1 : 0) + nlen;
        if (need >= sizeof(w->path))
                return -ENAMETOOLONG;
        if (len)
                w->path[len++] = '/';
        memcpy(w->path + len, name, nlen + 1);
        return 0;
}

/* Visits one directory (w->path[0..len)). Child directories are collected
 * and visited after the stream is closed, each re-resolved from root_fd
 * with openat2: no fd is held per level, so depth does not eat fds, and a
 * directory swapped for a symlink meanwhile is simply not entered. */
static int walk_level(struct walk *w, size_t len)
{
        w->path[len] = '\0';
        int fd = resolve_at(w->root_fd, w->path, O_RDONLY | O_DIRECTORY);
        if (fd < 0) {
                /* Below the walked directory, vanished/swapped/unreadable
                 * entries are skipped; the walked directory itself fails. */
                if (len > w->base_len && (fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP || fd == -EACCES))
                        return 0;
                return fd;
        }
        DIR *d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                close(fd);
                return r;
        }

        char **subdirs = NULL;
        size_t nsub = 0, capsub = 0;
        int r = 0;
        struct dirent *de;
        size_t rel_off = w->base_len ? w->base_len + 1 : 0;
        while ((errno = 0, de = readdir(d))) {
                const char *name = de->d_name;
                if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                        continue;
                /* A hidden directory hides its whole subtree, since every
                 * descendant's relativePath has that segment. */
                if (!w->include_hidden && name[0] == '.')
                        continue;
                struct stat st;
                r = stat_entry(dirfd(d), name, &st);
                if (r == -ENOENT) {
                        r = 0;
                        continue;
                }
                if (r < 0)
                        break;
                r = path_push(w, len, name);
                if (r < 0)
                        break;
                r = w->fn(w->userdata, w->path + rel_off, name, &st);
                w->path[len] = '\0';
                if (r < 0)
                        break;
                if (w->recursive && S_ISDIR(st.st_mode)) {
                        if (nsub == capsub) {
                                size_t ncap = capsub ? capsub * 2 : 8;
                                char **nv = realloc(subdirs, ncap * sizeof(*nv));
                                if (!nv) {
                                        r = -ENOMEM;
                                        break;
                                }
                                subdirs = nv, capsub = ncap;
                        }
                        subdirs[nsub] = strdup(name);
                        if (!subdirs[nsub]) {
                                r = -ENOMEM;
                                break;
                        }
                        nsub++;
                }
        }
        if (r == 0 && errno != 0)
                r = -errno;
        closedir(d);

        for (size_t i = 0; r == 0 && i < nsub; i++) {
                r = path_push(w, len, subdirs[i]);
                if (r == 0)
                        r = walk_level(w, strlen(w->path));
                w->path[len] = '\0';
        }
        strv_free(subdirs, nsub);
        return r;
}

static int walk_tree(int root_fd, const char *rel, bool recursive, bool include_hidden, walk_fn fn,
                     void *userdata)
{
        _cleanup_free_ struct walk *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        size_t len = strlen(rel);
        if (len >= sizeof(w->path))
                return -ENAMETOOLONG;
        *w = (struct walk){ .root_fd = root_fd, .base_len = len, .recursive = recursive,
                            .include_hidden = include_hidden, .fn = fn, .userdata = userdata };
        memcpy(w->path, rel, len + 1);
        return walk_level(w, len);
}

struct usage {
        uint64_t entries;
        uint64_t bytes;
};

static int usage_visit(void *userdata, const char *rel UNUSED, const char *name UNUSED, const struct stat *st)
{
        struct usage *u = userdata;
        u->entries++;
        if (S_ISREG(st->st_mode))
                u->bytes += (uint64_t)st->st_size;
        return 0;
}

int files_usage(int root_fd, uint64_t *ret_entries, uint64_t *ret_bytes)
{
        struct usage u = { 0 };
        int r = walk_tree(root_fd, "", true, true, usage_visit, &u);
        if (r < 0)
                return r;
        if (ret_entries)
                *ret_entries = u.entries;
        if (ret_bytes)
                *ret_bytes = u.bytes;
        return 0;
}

/* ---- responses ----------------------------------------------------------- */

static json_t *response_new(const struct req *rq)
{
        json_t *o = json_object();
        if (!o)
                return NULL;
        json_object_set_new(o, "success", json_true());
        json_object_set_new(o, "path", json_string(rq->path));
        return o;
}

/* Appends the timestamp last (the reference's key order) and hands out o. */
static json_t *response_finish(const struct req *rq, json_t *o, struct files_error *err)
{
        if (!o || json_object_set_new(o, "timestamp", json_string(rq->timestamp)) < 0) {
                json_decref(o);
                return fail_fs(err, rq, ENOMEM, NULL, NULL, NULL);
        }
        return o;
}

static void iso_from_timespec(const struct timespec *ts, char buf[static 32])
{
        uint64_t ms = ts->tv_sec < 0 ? 0 : (uint64_t)ts->tv_sec * 1000ULL + (uint64_t)ts->tv_nsec / 1000000ULL;
        iso8601_ms(ms, buf);
}

/* ---- read ---------------------------------------------------------------- */

static uint64_t limit_or(uint64_t v, uint64_t dflt)
{
        return v ? v : dflt;
}

static json_t *too_large(struct files_error *err, const struct req *rq, uint64_t max, uint64_t actual)
{
        json_t *extra = json_pack("{s:I,s:I}", "maxSize", (json_int_t)max, "actualSize", (json_int_t)actual);
        return fail_fs(err, rq, EFBIG, extra, NULL, "File exceeds %llu bytes", (unsigned long long)max);
}

static json_t *op_read(struct req *rq, struct files_error *err)
{
        uint64_t max = limit_or(rq->lim ? rq->lim->max_file_bytes : 0, READ_HARD_MAX);
        /* O_NONBLOCK: a guest-planted FIFO must not hang the daemon; it is
         * refused below like every non-regular file. */
        _cleanup_close_ int fd = resolve_at(rq->root_fd, rq->rel, O_RDONLY | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return fail_fs(err, rq, -fd, NULL, NULL, NULL);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return fail_fs(err, rq, errno, NULL, NULL, NULL);
        if (S_ISDIR(st.st_mode))
                return fail_fs(err, rq, EISDIR, NULL, NULL, "Is a directory: %s", rq->path);
        if (!S_ISREG(st.st_mode))
                return fail_fs(err, rq, EACCES, NULL, NULL, "Permission denied: '%s' is not a regular file",
                               rq->path);
        if ((uint64_t)st.st_size > max)
                return too_large(err, rq, max, (uint64_t)st.st_size);

        struct buf b;
        buf_init(&b, (size_t)max);
        char chunk[65536];
        for (;;) {
                ssize_t n = read(fd, chunk, sizeof(chunk));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        int e = errno;
                        buf_free(&b);
                        return fail_fs(err, rq, e, NULL, NULL, NULL);
                }
                if (n == 0)
                        break;
                int r = buf_append(&b, chunk, (size_t)n);
                if (r < 0) {
                        /* Grew past the cap while we were reading. */
                        uint64_t actual = (uint64_t)b.len + (uint64_t)n;
                        buf_free(&b);
                        if (r == -ENOBUFS)
                                return too_large(err, rq, max, actual);
                        return fail_fs(err, rq, -r, NULL, NULL, NULL);
                }
        }
        const unsigned char *data = (const unsigned char *)(b.data ? b.data : "");
        size_t len = b.len;
        bool binary = !utf8_valid((const char *)data, len) || memchr(data, '\0', len) != NULL;

        _cleanup_free_ char *text = rq->base64 ? b64_encode(data, len) : malloc(3 * len + 1);
        if (!text) {
                buf_free(&b);
                return fail_fs(err, rq, ENOMEM, NULL, NULL, NULL);
        }
        size_t text_len = rq->base64 ? strlen(text) : utf8_decode_lossy(data, len, text);
        buf_free(&b);

        json_t *o = response_new(rq);
        if (o) {
                json_object_set_new(o, "content", json_stringn_nocheck(text, text_len));
                json_object_set_new(o, "encoding", json_string(rq->base64 ? "base64" : "utf-8"));
                json_object_set_new(o, "isBinary", json_boolean(binary));
                json_object_set_new(o, "mimeType", json_string(mime_type_for(rq->path, binary)));
                json_object_set_new(o, "size", json_integer((json_int_t)len));
        }
        return response_finish(rq, o, err);
}

/* ---- write --------------------------------------------------------------- */

static void random_name(char out[static 40])
{
        uint64_t v;
        if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
                v = now_ns() ^ ((uint64_t)getpid() << 32);
        snprintf(out, 40, ".sandboxd-%016llx.tmp", (unsigned long long)v);
}

/* Replaces dir_fd/name atomically: a hidden temp file in the same
 * directory is written and fsynced, renamed over the target, then the
 * directory is fsynced, so an acknowledged write survives a crash and a
 * reader never sees a half-written file. O_EXCL|O_NOFOLLOW keeps a guest
 * from pre-planting the temp name as a symlink. renameat() replaces the
 * directory entry itself and never follows a symlink at the target. */
static int write_atomic(int dir_fd, const char *name, const void *data, size_t len)
{
        char tmp[40];
        _cleanup_close_ int fd = -1;
        for (int attempt = 0; attempt < 16; attempt++) {
                random_name(tmp);
                fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, FILE_MODE);
                if (fd >= 0 || errno != EEXIST)
                        break;
        }
        if (fd < 0)
                return -errno;

        int r = 0;
        /* Independent of the daemon's umask: the contract says -rw-r--r--. */
        if (fchmod(fd, FILE_MODE) < 0)
                r = -errno;
        if (r == 0)
                r = write_all(fd, data, len);
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        if (r == 0 && renameat(dir_fd, tmp, dir_fd, name) < 0)
                r = -errno;
        if (r < 0) {
                (void)unlinkat(dir_fd, tmp, 0);
                return r;
        }
        return fsync_dir(dir_fd);
}

static int usage_of(const struct req *rq, uint64_t *entries, uint64_t *bytes)
{
        *entries = *bytes = 0;
        if (!rq->lim || (!rq->lim->max_total_bytes && !rq->lim->max_entries))
                return 0;
        return files_usage(rq->root_fd, entries, bytes);
}

static json_t *op_write(struct req *rq, struct files_error *err)
{
        if (!rq->rel[0])
                return fail_fs(err, rq, EISDIR, NULL, NULL, "Cannot write to the /workspace root");

        _cleanup_free_ unsigned char *decoded = NULL;
        const void *data = rq->content;
        size_t len = rq->content_len;
        if (rq->base64) {
                int r = b64_decode(rq->content, rq->content_len, &decoded, &len);
                if (r == -EINVAL)
                        return fail_fs(err, rq, EINVAL, NULL, NULL, "Invalid base64 content");
                if (r < 0)
                        return fail_fs(err, rq, -r, NULL, NULL, NULL);
                data = decoded;
        }
        /* The per-file limit is checked before anything touches the disk. */
        uint64_t max = rq->lim ? rq->lim->max_file_bytes : 0;
        if (max && len > max)
                return too_large(err, rq, max, len);

        const char *name;
        _cleanup_close_ int pfd = open_parent(rq->root_fd, rq->rel, &name);
        if (pfd < 0)
                return fail_fs(err, rq, -pfd, NULL, NULL, NULL);

        struct stat st;
        bool existing = false;
        uint64_t old_size = 0;
        int r = stat_entry(pfd, name, &st);
        if (r == 0) {
                existing = true;
                if (S_ISDIR(st.st_mode))
                        return fail_fs(err, rq, EISDIR, NULL, NULL, "Is a directory: %s", rq->path);
                /* Replacing the link would be harmless, but writing "through"
                 * a link is refused like every other symlink use. */
                if (S_ISLNK(st.st_mode))
                        return fail_fs(err, rq, ELOOP, NULL, NULL, NULL);
                if (S_ISREG(st.st_mode))
                        old_size = (uint64_t)st.st_size;
        } else if (r != -ENOENT) {
                return fail_fs(err, rq, -r, NULL, NULL, NULL);
        }

        uint64_t entries, bytes;
        r = usage_of(rq, &entries, &bytes);
        if (r < 0)
                return fail_fs(err, rq, -r, NULL, NULL, NULL);
        if (rq->lim && rq->lim->max_total_bytes &&
            bytes - (old_size < bytes ? old_size : bytes) + len > rq->lim->max_total_bytes)
                return fail_fs(err, rq, ENOSPC, NULL, NULL, "Workspace exceeds %llu bytes total",
                               (unsigned long long)rq->lim->max_total_bytes);
        if (rq->lim && rq->lim->max_entries && !existing && entries + 1 > rq->lim->max_entries)
                return fail_fs(err, rq, ENOSPC, NULL, NULL, "Workspace exceeds %llu entries",
                               (unsigned long long)rq->lim->max_entries);

        r = write_atomic(pfd, name, data, len);
        if (r < 0)
                return fail_fs(err, rq, -r, NULL, NULL, NULL);
        return response_finish(rq, response_new(rq), err);
}

/* ---- mkdir --------------------------------------------------------------- */

static int check_new_entries(const struct req *rq, uint64_t count)
{
        uint64_t entries, bytes;
        if (!rq->lim || !rq->lim->max_entries)
                return 0;
        int r = usage_of(rq, &entries, &bytes);
        if (r < 0)
                return r;
        return entries + count > rq->lim->max_entries ? -ENOSPC : 0;
}

/* mkdir -p beneath root_fd: walk the existing prefix (each step confined),
 * check the entry limit for what is missing, then create the rest. */
static int mkdir_parents(const struct req *rq)
{
        char comps[PATH_MAX];
        snprintf(comps, sizeof(comps), "%s", rq->rel);
        char *names[PATH_MAX / 2];
        size_t n = 0;
        char *save = NULL;
        for (char *c = strtok_r(comps, "/", &save); c; c = strtok_r(NULL, "/", &save))
                names[n++] = c;

        _cleanup_close_ int cur = resolve_at(rq->root_fd, "", O_PATH | O_DIRECTORY);
        if (cur < 0)
                return cur;
        size_t i = 0;
        for (; i < n; i++) {
                int fd = resolve_at(cur, names[i], O_PATH | O_DIRECTORY);
                if (fd == -ENOENT)
                        break;
                if (fd < 0)
                        return fd;
                close(cur);
                cur = fd;
        }
        if (i == n)
                return 0;
        int r = check_new_entries(rq, n - i);
        if (r < 0)
                return r;
        for (; i < n; i++) {
                if (mkdirat(cur, names[i], DIR_MODE) < 0 && errno != EEXIST)
                        return -errno;
                r = fsync_dir(cur);
                if (r < 0)
                        return r;
                /* EEXIST above may be a racing guest's file or symlink:
                 * the confined open sorts that out (ENOTDIR / ELOOP). */
                int fd = resolve_at(cur, names[i], O_PATH | O_DIRECTORY);
                if (fd < 0)
                        return fd;
                close(cur);
                cur = fd;
        }
        return 0;
}

static int mkdir_one(const struct req *rq)
{
        const char *name;
        _cleanup_close_ int pfd = open_parent(rq->root_fd, rq->rel, &name);
        if (pfd < 0)
                return pfd;
        struct stat st;
        int r = stat_entry(pfd, name, &st);
        if (r == 0)
                return -EEXIST;
        if (r != -ENOENT)
                return r;
        r = check_new_entries(rq, 1);
        if (r < 0)
                return r;
        if (mkdirat(pfd, name, DIR_MODE) < 0)
                return -errno;
        return fsync_dir(pfd);
}

static json_t *op_mkdir(struct req *rq, struct files_error *err)
{
        /* The root always exists: a no-op even without recursive. */
        if (rq->rel[0]) {
                int r = rq->recursive ? mkdir_parents(rq) : mkdir_one(rq);
                if (r == -ENOSPC)
                        return fail_fs(err, rq, ENOSPC, NULL, NULL, "Workspace exceeds %llu entries",
                                       (unsigned long long)rq->lim->max_entries);
                if (r < 0)
                        return fail_fs(err, rq, -r, NULL, NULL, NULL);
        }
        json_t *o = response_new(rq);
        if (o)
                json_object_set_new(o, "recursive", json_boolean(rq->recursive));
        return response_finish(rq, o, err);
}

/* ---- delete -------------------------------------------------------------- */

static json_t *op_delete(struct req *rq, struct files_error *err)
{
        if (!rq->rel[0])
                return fail_fs(err, rq, EACCES, NULL, NULL, "Cannot delete the /workspace root");

        const char *name;
        _cleanup_close_ int pfd = open_parent(rq->root_fd, rq->rel, &name);
        if (pfd == -ENOENT && rq->force)
                return response_finish(rq, response_new(rq), err);
        if (pfd < 0)
                return fail_fs(err, rq, -pfd, NULL, NULL, NULL);

        struct stat st;
        int r = stat_entry(pfd, name, &st);
        if (r == -ENOENT && rq->force)
                return response_finish(rq, response_new(rq), err);
        if (r < 0)
                return fail_fs(err, rq, -r, NULL, NULL, NULL);

        if (S_ISDIR(st.st_mode)) {
                if (!rq->recursive)
                        return fail_fs(err, rq, EISDIR, NULL, NULL,
                                       "Cannot delete directory with deleteFile() at '%s'. "
                                       "Pass { recursive: true } to delete a directory.",
                                       rq->path);
                /* rm_rf_at works on names relative to pfd and opens each
                 * subdirectory with O_NOFOLLOW, so links are unlinked, never
                 * followed, and a swapped-in link cannot redirect it. */
                r = rm_rf_at(pfd, name);
        } else {
                /* A symlink is removed itself; its target is untouched. */
                r = unlinkat(pfd, name, 0) < 0 ? -errno : 0;
                if (r == -ENOENT && rq->force)
                        r = 0;
        }
        if (r == 0)
                r = fsync_dir(pfd);
        if (r < 0)
                return fail_fs(err, rq, -r, NULL, NULL, NULL);
        return response_finish(rq, response_new(rq), err);
}

/* ---- rename / move ------------------------------------------------------- */

static json_t *op_rename(struct req *rq, struct files_error *err)
{
        if (!rq->rel[0])
                return fail_fs(err, rq, EACCES, NULL, NULL, "Cannot rename the /workspace root");
        if (!rq->new_rel[0])
                return fail_fs(err, rq, EACCES, NULL, NULL, "Cannot rename onto the /workspace root");

        const char *sname, *dname;
        _cleanup_close_ int spfd = open_parent(rq->root_fd, rq->rel, &sname);
        if (spfd < 0)
                return fail_fs(err, rq, -spfd, NULL, NULL, NULL);
        struct stat sst, dst;
        int r = stat_entry(spfd, sname, &sst);
        if (r < 0)
                return fail_fs(err, rq, -r, NULL, NULL, NULL);

        _cleanup_close_ int dpfd = open_parent(rq->root_fd, rq->new_rel, &dname);
        if (dpfd < 0)
                return fail_fs(err, rq, -dpfd, NULL, rq->new_path, NULL);
        r = stat_entry(dpfd, dname, &dst);
        if (r == 0) {
                /* rename(2) would say the same; checked up front for the
                 * reference's messages and because a same-inode rename is a
                 * no-op the kernel does not validate. */
                bool sdir = S_ISDIR(sst.st_mode), ddir = S_ISDIR(dst.st_mode);
                if (sdir && !ddir)
                        return fail_fs(err, rq, ENOTDIR, NULL, NULL, "Not a directory: %s", rq->new_path);
                if (!sdir && ddir)
                        return fail_fs(err, rq, EISDIR, NULL, NULL, "Is a directory: %s", rq->new_path);
        } else if (r != -ENOENT) {
                return fail_fs(err, rq, -r, NULL, rq->new_path, NULL);
        }

        if (renameat(spfd, sname, dpfd, dname) < 0) {
                int e = errno == EEXIST ? ENOTEMPTY : errno; /* some fs say EEXIST */
                return fail_fs(err, rq, e, NULL, e == ENOTEMPTY || e == EISDIR || e == ENOTDIR
                               ? rq->new_path : rq->path, NULL);
        }
        r = fsync_dir(dpfd);
        if (r == 0)
                r = fsync_dir(spfd);
        if (r < 0)
                return fail_fs(err, rq, -r, NULL, NULL, NULL);

        json_t *o = response_new(rq);
        if (o)
                json_object_set_new(o, "newPath", json_string(rq->new_path));
        return response_finish(rq, o, err);
}

/* ---- list ---------------------------------------------------------------- */

struct entry {
        char *rel;
        bool dir;
        uint64_t size;
        struct timespec mtime;
};

struct entries {
        struct entry *v;
        size_t n, cap;
};

static void entries_done(struct entries *e)
{
        for (size_t i = 0; i < e->n; i++)
                free(e->v[i].rel);
        free(e->v);
        *e = (struct entries){ 0 };
}

static int list_visit(void *userdata, const char *rel, const char *name UNUSED, const struct stat *st)
{
        struct entries *e = userdata;
        if (e->n >= LIST_MAX_ENTRIES)
                return -E2BIG;
        if (e->n == e->cap) {
                size_t ncap = e->cap ? e->cap * 2 : 32;
                struct entry *nv = realloc(e->v, ncap * sizeof(*nv));
                if (!nv)
                        return -ENOMEM;
                e->v = nv, e->cap = ncap;
        }
        char *copy = strdup(rel);
        if (!copy)
                return -ENOMEM;
        /* Only directories and regular files have a meaningful size; links
         * and other special files are reported as empty "file"s. */
        e->v[e->n++] = (struct entry){
                .rel = copy,
                .dir = S_ISDIR(st->st_mode),
                .size = S_ISREG(st->st_mode) ? (uint64_t)st->st_size : 0,
                .mtime = st->st_mtim,
        };
        return 0;
}

static int entry_cmp(const void *a, const void *b)
{
        return strcmp(((const struct entry *)a)->rel, ((const struct entry *)b)->rel);
}

static json_t *file_info(const struct req *rq, const struct entry *en)
{
        const char *slash = strrchr(en->rel, '/');
        char when[32];
        if (en->dir)
                iso8601_ms(rq->created_at_ms, when);
        else
                iso_from_timespec(&en->mtime, when);
        _cleanup_free_ char *abs = NULL;
        if (asprintf(&abs, "%s/%s", rq->path, en->rel) < 0)
                return NULL;
        return json_pack("{s:s,s:s,s:s,s:s,s:I,s:s,s:s,s:{s:b,s:b,s:b}}",
                         "name", slash ? slash + 1 : en->rel,
                         "absolutePath", abs,
                         "relativePath", en->rel,
                         "type", en->dir ? "directory" : "file",
                         "size", (json_int_t)en->size,
                         "modifiedAt", when,
                         "mode", en->dir ? "drwxr-xr-x" : "-rw-r--r--",
                         "permissions", "readable", 1, "writable", 1, "executable", en->dir ? 1 : 0);
}

static json_t *op_list(struct req *rq, struct files_error *err)
{
        /* Name the listed directory itself precisely: a file is ENOTDIR, a
         * symlink ELOOP (403), before walking. */
        _cleanup_close_ int fd = resolve_at(rq->root_fd, rq->rel, O_PATH | O_DIRECTORY);
        if (fd < 0)
                return fail_fs(err, rq, -fd, NULL, NULL, NULL);

        _cleanup_(entries_done) struct entries e = { 0 };
        int r = walk_tree(rq->root_fd, rq->rel, rq->recursive, rq->include_hidden, list_visit, &e);
        if (r == -E2BIG)
                return fail_fs(err, rq, E2BIG, NULL, NULL, "Too many entries to list (over %d): %s",
                               LIST_MAX_ENTRIES, rq->path);
        if (r < 0)
                return fail_fs(err, rq, -r, NULL, NULL, NULL);
        if (e.n > 1)
                qsort(e.v, e.n, sizeof(*e.v), entry_cmp);

        _cleanup_json_ json_t *files = json_array();
        if (!files)
                return fail_fs(err, rq, ENOMEM, NULL, NULL, NULL);
        for (size_t i = 0; i < e.n; i++)
                if (json_array_append_new(files, file_info(rq, &e.v[i])) < 0)
                        return fail_fs(err, rq, ENOMEM, NULL, NULL, NULL);

        json_t *o = response_new(rq);
        if (o) {
                json_object_set_new(o, "files", TAKE_PTR(files));
                json_object_set_new(o, "count", json_integer((json_int_t)e.n));
        }
        return response_finish(rq, o, err);
}

/* ---- exists -------------------------------------------------------------- */

static json_t *op_exists(struct req *rq, struct files_error *err)
{
        /* As in the reference, any lookup failure (missing, a file used as a
         * directory, a symlink on the way, no permission) is just "false";
         * only normalization failures (403/400) are errors. */
        bool exists = true;
        if (rq->rel[0]) {
                const char *name;
                _cleanup_close_ int pfd = open_parent(rq->root_fd, rq->rel, &name);
                struct stat st;
                exists = pfd >= 0 && stat_entry(pfd, name, &st) == 0;
        }
        json_t *o = response_new(rq);
        if (o)
                json_object_set_new(o, "exists", json_boolean(exists));
        return response_finish(rq, o, err);
}

/* ---- request parsing ----------------------------------------------------- */

/* JavaScript truthiness, since the reference reads flags with `!!body.x`. */
static bool truthy(const json_t *v)
{
        if (!v)
                return false;
        switch (json_typeof(v)) {
        case JSON_TRUE:
        case JSON_OBJECT:
        case JSON_ARRAY:
                return true;
        case JSON_INTEGER:
                return json_integer_value(v) != 0;
        case JSON_REAL:
                return json_real_value(v) != 0 && !isnan(json_real_value(v));
        case JSON_STRING:
                return json_string_length(v) > 0;
        case JSON_FALSE:
        case JSON_NULL:
        default:
                return false;
        }
}

/* Normalizes one path field into out. Returns 0, or -1 with err filled:
 * an escape is a file system error (403 with {path, operation, errno}),
 * NUL bytes and over-long paths are request-shape errors (400). */
static int normalize_field(struct req *rq, const char *raw, size_t raw_len, char *out, const char *field,
                           struct files_error *err)
{
        if (strlen(raw) != raw_len) {
                fail_validation(err, "%s must not contain NUL bytes", field);
                return -1;
        }
        int r = files_normalize(raw, out, PATH_MAX);
        if (r == -EACCES) {
                out[0] = '\0';
                fail_fs(err, rq, EACCES, NULL, NULL, "Path escapes /workspace: %s", raw);
                return -1;
        }
        if (r == -ENAMETOOLONG) {
                fail_validation(err, "%s is too long", field);
                return -1;
        }
        if (r < 0) {
                fail_validation(err, "%s is not a valid path", field);
                return -1;
        }
        return 0;
}

/* Validation order follows the reference: op, path, newPath, encoding. */
static int parse_request(json_t *request, struct req *rq, struct files_error *err)
{
        if (!json_is_object(request)) {
                fail_validation(err, "Expected an object");
                return -1;
        }
        const char *op = json_string_value(json_object_get(request, "op"));
        rq->op = _OP_MAX;
        for (int i = 0; op && i < _OP_MAX; i++)
                if (strcmp(op, op_table[i].name) == 0)
                        rq->op = (enum op)i;
        if (rq->op == _OP_MAX) {
                fail_validation(err, "Unknown op");
                return -1;
        }
        rq->operation = op_table[rq->op].operation;

        json_t *path = json_object_get(request, "path");
        if (!json_is_string(path) || json_string_length(path) == 0) {
                fail_validation(err, "path is required");
                return -1;
        }
        rq->raw_path = json_string_value(path);
        rq->raw_path_len = json_string_length(path);

        bool two_paths = rq->op == OP_RENAME || rq->op == OP_MOVE;
        json_t *new_path = json_object_get(request, "newPath");
        if (two_paths) {
                if (!json_is_string(new_path) || json_string_length(new_path) == 0) {
                        fail_validation(err, "newPath is required for %s", op_table[rq->op].name);
                        return -1;
                }
                rq->raw_new_path = json_string_value(new_path);
                rq->raw_new_path_len = json_string_length(new_path);
        }

        json_t *enc = json_object_get(request, "encoding");
        if (enc) {
                const char *s = json_string_value(enc);
                if (!s || (strcmp(s, "utf-8") != 0 && strcmp(s, "base64") != 0)) {
                        fail_validation(err, "encoding must be utf-8 or base64");
                        return -1;
                }
                rq->base64 = strcmp(s, "base64") == 0;
        }

        json_t *content = json_object_get(request, "content");
        if (content && !json_is_null(content) && !json_is_string(content)) {
                fail_validation(err, "content must be a string");
                return -1;
        }
        rq->content = json_is_string(content) ? json_string_value(content) : "";
        rq->content_len = json_is_string(content) ? json_string_length(content) : 0;
        rq->recursive = truthy(json_object_get(request, "recursive"));
        rq->force = truthy(json_object_get(request, "force"));
        rq->include_hidden = truthy(json_object_get(request, "includeHidden"));

        /* Normalization runs before the op: even `exists` on an escaping
         * path is a 403. */
        if (normalize_field(rq, rq->raw_path, rq->raw_path_len, rq->path, "path", err) < 0)
                return -1;
        rq->rel = rel_of(rq->path);
        if (two_paths) {
                if (normalize_field(rq, rq->raw_new_path, rq->raw_new_path_len, rq->new_path, "newPath",
                                    err) < 0)
                        return -1;
                rq->new_rel = rel_of(rq->new_path);
        }
        return 0;
}

json_t *files_op(int root_fd, json_t *request, const struct files_limits *lim, uint64_t created_at_ms,
                 unsigned as_uid, unsigned as_gid, struct files_error *err)
{
        *err = (struct files_error){ 0 };
        _cleanup_free_ struct req *rq = calloc(1, sizeof(*rq));
        if (!rq) {
                err->http_status = 500;
                err->code = "FILESYSTEM_ERROR";
                snprintf(err->message, sizeof(err->message), "Out of memory");
                return NULL;
        }
        rq->root_fd = root_fd;
        rq->lim = lim;
        rq->created_at_ms = created_at_ms;
        iso8601_ms(wall_ms(), rq->timestamp);
        if (parse_request(request, rq, err) < 0)
                return NULL;

        /* Restored on every return path below. */
        _cleanup_(identity_leave) struct identity id = { 0 };
        int r = identity_enter(&id, as_uid, as_gid);
        /* A daemon-side fault, not the client's: 500, never a 403. */
        if (r < 0)
                return fail_fs(err, rq, EIO, NULL, NULL, "Cannot switch to the sandbox user");

        switch (rq->op) {
        case OP_READ:
                return op_read(rq, err);
        case OP_WRITE:
                return op_write(rq, err);
        case OP_MKDIR:
                return op_mkdir(rq, err);
        case OP_DELETE:
                return op_delete(rq, err);
        case OP_RENAME:
        case OP_MOVE:
                return op_rename(rq, err);
        case OP_LIST:
                return op_list(rq, err);
        case OP_EXISTS:
                return op_exists(rq, err);
        case _OP_MAX:
        default:
                break;
        }
        return fail_validation(err, "Unknown op");
}
