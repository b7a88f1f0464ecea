/* Unit tests for the files API (src/sandbox/files.c). Each TEST runs in its own
 * fork with a fresh temp tree:
 *
 *   /tmp/sbx-files-XXXXXX/            (0777: writable for the jail user, so
 *       sentinel                       only confinement protects it)
 *       workspace/                    (root_fd; owned by the jail user)
 *
 * When run as root, ops run with fsuid 65534 like in the daemon. */
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/files.h"
#include "base/util.h"
#include "tap.h"

#ifdef FILES_TEST_OPENAT2_SHIM
/* valgrind 3.19 (Debian 12) does not know openat2 (syscall 437), so the
 * leak-check build links with -Wl,--wrap=syscall and this emulation of
 * RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, one O_NOFOLLOW component at a time.
 * Only for valgrind runs: the normal build tests the real syscall.
 *   gcc … -DFILES_TEST_OPENAT2_SHIM -Wl,--wrap=syscall … */
#include <linux/openat2.h>
#include <stdarg.h>
#include <sys/syscall.h>

long __real_syscall(long n, ...);
long __wrap_syscall(long n, ...);

static long shim_openat2(int dirfd, const char *path, const struct open_how *how)
{
        char buf[PATH_MAX];
        snprintf(buf, sizeof(buf), "%s", path);
        if (buf[0] == '/') {
                errno = EXDEV;
                return -1;
        }
        int cur = dup(dirfd);
        char *save = NULL, *comp = strtok_r(buf, "/", &save);
        while (comp) {
                char *next = strtok_r(NULL, "/", &save);
                if (strcmp(comp, "..") == 0) {
                        close(cur);
                        errno = EXDEV;
                        return -1;
                }
                struct stat lst;
                if (!next && fstatat(cur, comp, &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lst.st_mode) &&
                    (how->flags & (O_PATH | O_NOFOLLOW)) != (O_PATH | O_NOFOLLOW)) {
                        close(cur);
                        errno = ELOOP;
                        return -1;
                }
                if (!next) {
                        int fd = openat(cur, comp, (int)how->flags | O_NOFOLLOW, (mode_t)how->mode);
                        int e = errno;
                        close(cur);
                        errno = e;
                        return fd;
                }
                int fd = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                struct stat st;
                if (fd >= 0 && fstat(fd, &st) == 0 && S_ISLNK(st.st_mode)) {
                        close(fd);
                        fd = -1;
                        errno = ELOOP;
                } else if (fd >= 0 && !S_ISDIR(st.st_mode)) {
                        close(fd);
                        fd = -1;
                        errno = ENOTDIR;
                }
                int e = errno;
                close(cur);
                if (fd < 0) {
                        errno = e;
                        return -1;
                }
                cur = fd;
                comp = next;
        }
        int fd = openat(cur, ".", (int)how->flags, (mode_t)how->mode);
        int e = errno;
        close(cur);
        errno = e;
        return fd;
}

long __wrap_syscall(long n, ...)
{
        va_list ap;
        va_start(ap, n);
        long a[6];
        for (int i = 0; i < 6; i++)
                a[i] = va_arg(ap, long);
        va_end(ap);
        if (n == SYS_openat2)
                return shim_openat2((int)a[0], (const char *)a[1], (const struct open_how *)a[2]);
        return __real_syscall(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}
#endif

#define SENTINEL_TEXT "TOPSECRET-SENTINEL-7f3a9c\n"
#define CREATED_AT 1700000000123ULL /* 2023-11-14T22:13:20.123Z */
#define CREATED_AT_ISO "2023-11-14T22:13:20.123Z"

struct ws {
        char outer[64];
        char root[128];
        char sentinel[128];
        int root_fd;
        unsigned uid, gid;
        struct files_limits lim;
        struct stat sentinel_st;
};

static char cleanup_dir[64];

static void cleanup_tree(void)
{
        if (cleanup_dir[0])
                rm_rf(cleanup_dir);
}

static void ws_init(struct ws *w)
{
        *w = (struct ws){ 0 };
        umask(022);
        snprintf(w->outer, sizeof(w->outer), "/tmp/sbx-files-XXXXXX");
        ASSERT_TRUE(mkdtemp(w->outer) != NULL);
        snprintf(cleanup_dir, sizeof(cleanup_dir), "%s", w->outer);
        atexit(cleanup_tree);
        ASSERT_OK(chmod(w->outer, 0777));
        snprintf(w->root, sizeof(w->root), "%s/workspace", w->outer);
        snprintf(w->sentinel, sizeof(w->sentinel), "%s/sentinel", w->outer);
        ASSERT_OK(mkdir(w->root, 0755));

        w->uid = geteuid() == 0 ? 65534 : geteuid();
        w->gid = geteuid() == 0 ? 65534 : getegid();
        ASSERT_OK(chown(w->root, w->uid, w->gid));

        int fd = open(w->sentinel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(write_all(fd, SENTINEL_TEXT, strlen(SENTINEL_TEXT)));
        close(fd);
        ASSERT_OK(chmod(w->sentinel, 0666));
        ASSERT_OK(lstat(w->sentinel, &w->sentinel_st));

        w->root_fd = open(w->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(w->root_fd >= 0);
        w->lim = (struct files_limits){
                .max_file_bytes = 1 * MiB,
                .max_total_bytes = 16 * MiB,
                .max_entries = 4096,
        };
}

/* Host path of a workspace-relative name. */
static const char *host(struct ws *w, const char *rel)
{
        static char buf[8][512];
        static int n;
        char *b = buf[n++ % 8];
        snprintf(b, 512, "%s/%s", w->root, rel);
        return b;
}

static void put_file(struct ws *w, const char *rel, const void *data, size_t len)
{
        int fd = open(host(w, rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(write_all(fd, data, len));
        close(fd);
        ASSERT_OK(chown(host(w, rel), w->uid, w->gid));
}

static void put_dir(struct ws *w, const char *rel)
{
        ASSERT_OK(mkdir(host(w, rel), 0755));
        ASSERT_OK(chown(host(w, rel), w->uid, w->gid));
}

static char *slurp(const char *path, size_t *ret_len)
{
        static char buf[65536];
        size_t len = 0;
        if (read_file_small(path, buf, sizeof(buf), &len) < 0)
                return NULL;
        if (ret_len)
                *ret_len = len;
        return buf;
}

/* Everything the daemon said (response or error), to grep for leaks. */
static char transcript[1 << 20];
static size_t transcript_len;

static void record(const json_t *j, const struct files_error *err)
{
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        char *c = !j && err->context ? json_dumps(err->context, JSON_COMPACT) : NULL;
        int n = snprintf(transcript + transcript_len, sizeof(transcript) - transcript_len, "%s|%s|%s\n",
                         s ? s : "", j ? "" : err->message, c ? c : "");
        if (n > 0 && (size_t)n < sizeof(transcript) - transcript_len)
                transcript_len += (size_t)n;
        free(s);
        free(c);
}

/* Runs one request (reference stolen). Returns the response or NULL with
 * err filled; the caller owns both. */
static json_t *run(struct ws *w, json_t *req, struct files_error *err)
{
        ASSERT_TRUE(req != NULL);
        json_t *res = files_op(w->root_fd, req, &w->lim, CREATED_AT, w->uid, w->gid, err);
        json_decref(req);
        record(res, err);
        /* The identity switch must never leak out of files_op. */
        if (geteuid() == 0) {
                ASSERT_EQ(setfsuid((uid_t)-1), 0);
                ASSERT_EQ(setfsgid((gid_t)-1), 0);
        }
        if (res)
                ASSERT_TRUE(err->context == NULL);
        return res;
}

static json_t *ok(struct ws *w, json_t *req)
{
        struct files_error err;
        json_t *res = run(w, req, &err);
        if (!res)
                TAP_FAIL("unexpected error %d %s: %s", err.http_status, err.code, err.message);
        ASSERT_TRUE(json_is_true(json_object_get(res, "success")));
        const char *ts = json_string_value(json_object_get(res, "timestamp"));
        ASSERT_TRUE(ts != NULL);
        ASSERT_EQ(strlen(ts), 24);
        ASSERT_EQ(ts[23], 'Z');
        ASSERT_EQ(ts[10], 'T');
        return res;
}

static const char *sget(const json_t *o, const char *key)
{
        return json_string_value(json_object_get(o, key));
}

static long long iget(const json_t *o, const char *key)
{
        const json_t *v = json_object_get(o, key);
        if (!json_is_integer(v))
                TAP_FAIL("'%s' is not an integer", key);
        return json_integer_value(v);
}

static bool bget(const json_t *o, const char *key)
{
        const json_t *v = json_object_get(o, key);
        if (!json_is_boolean(v))
                TAP_FAIL("'%s' is not a boolean", key);
        return json_is_true(v);
}

/* Expects an error; checks status, code and (when errno_name is non-NULL)
 * the {path, operation, errno} context. Returns err for more checks. */
static void expect_err(struct ws *w, json_t *req, int status, const char *code, const char *path,
                       const char *operation, const char *errno_name, struct files_error *err)
{
        json_t *res = run(w, req, err);
        if (res) {
                char *s = json_dumps(res, 0);
                TAP_FAIL("expected %s, got success %s", code, s);
        }
        if (err->http_status != status || strcmp(err->code, code) != 0)
                TAP_FAIL("expected %d %s, got %d %s: %s", status, code, err->http_status, err->code,
                         err->message);
        ASSERT_TRUE(err->context != NULL);
        if (errno_name) {
                ASSERT_STREQ(sget(err->context, "errno"), errno_name);
                ASSERT_STREQ(sget(err->context, "operation"), operation);
                ASSERT_STREQ(err->operation, operation);
                ASSERT_STREQ(sget(err->context, "path"), path);
        }
}

static void expect_err_done(struct ws *w, json_t *req, int status, const char *code, const char *path,
                            const char *operation, const char *errno_name)
{
        struct files_error err;
        expect_err(w, req, status, code, path, operation, errno_name, &err);
        files_error_done(&err);
}

#define R(...) json_pack(__VA_ARGS__)

static void assert_sentinel_intact(struct ws *w)
{
        struct stat st;
        ASSERT_OK(lstat(w->sentinel, &st));
        ASSERT_EQ(st.st_ino, w->sentinel_st.st_ino);
        ASSERT_EQ(st.st_size, w->sentinel_st.st_size);
        ASSERT_EQ(st.st_mtim.tv_sec, w->sentinel_st.st_mtim.tv_sec);
        ASSERT_EQ(st.st_mtim.tv_nsec, w->sentinel_st.st_mtim.tv_nsec);
        ASSERT_EQ(st.st_uid, w->sentinel_st.st_uid);
        ASSERT_STREQ(slurp(w->sentinel, NULL), SENTINEL_TEXT);
}

static void assert_nothing_leaked(void)
{
        transcript[transcript_len] = '\0';
        ASSERT_TRUE(strstr(transcript, "TOPSECRET") == NULL);
        ASSERT_TRUE(strstr(transcript, "root:x:0:0") == NULL);
        /* base64 of the sentinel's first bytes, in case it was encoded */
        ASSERT_TRUE(strstr(transcript, "VE9QU0VDUkVU") == NULL);
}

/* ---- normalization ------------------------------------------------------- */

TEST(normalize_table)
{
        static const struct {
                const char *in;
                int r;
                const char *out;
        } cases[] = {
                { "a.txt", 0, "/workspace/a.txt" },
                { "/workspace/a.txt", 0, "/workspace/a.txt" },
                { "/workspace", 0, "/workspace" },
                { "/workspace/", 0, "/workspace" },
                { ".", 0, "/workspace" },
                { "", 0, "/workspace" },
                { "./a//b/./c/", 0, "/workspace/a/b/c" },
                { "a/../b", 0, "/workspace/b" },
                { "a/b/../../c", 0, "/workspace/c" },
                { "../workspace/x", 0, "/workspace/x" },
                { "/workspace/../workspace/x", 0, "/workspace/x" },
                { "%2e%2e/x", 0, "/workspace/%2e%2e/x" },
                { "..%2f..", 0, "/workspace/..%2f.." },
                { "a\\..\\b", 0, "/workspace/a\\..\\b" },
                { "...", 0, "/workspace/..." },
                { "/workspace/ü/日本", 0, "/workspace/ü/日本" },
                { "..", -EACCES, NULL },
                { "../..", -EACCES, NULL },
                { "/", -EACCES, NULL },
                { "/..", -EACCES, NULL },
                { "/../workspace", -EACCES, NULL },
                { "/etc/passwd", -EACCES, NULL },
                { "/workspace/../etc", -EACCES, NULL },
                { "/workspace/../etc/passwd", -EACCES, NULL },
                { "a/../../etc", -EACCES, NULL },
                { "/workspacefoo", -EACCES, NULL },
                { "/workspace2/x", -EACCES, NULL },
                { "/tmp/workspace", -EACCES, NULL },
                { "/WORKSPACE/x", -EACCES, NULL },
                { "bad\xff", -EINVAL, NULL },
                { "\xc0\xaf", -EINVAL, NULL },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                char out[PATH_MAX] = "untouched";
                int r = files_normalize(cases[i].in, out, sizeof(out));
                if (r != cases[i].r)
                        TAP_FAIL("normalize('%s') = %d, want %d", cases[i].in, r, cases[i].r);
                if (cases[i].out)
                        ASSERT_STREQ(out, cases[i].out);
        }
}

TEST(normalize_lengths)
{
        char seg[300], path[6000], out[PATH_MAX];
        memset(seg, 'a', 255);
        seg[255] = '\0';
        ASSERT_OK(files_normalize(seg, out, sizeof(out)));
        memset(seg, 'a', 256);
        seg[256] = '\0';
        ASSERT_EQ(files_normalize(seg, out, sizeof(out)), -ENAMETOOLONG);

        memset(path, 'b', sizeof(path) - 1);
        for (size_t i = 100; i < sizeof(path) - 1; i += 100)
                path[i] = '/';
        path[sizeof(path) - 1] = '\0';
        ASSERT_EQ(files_normalize(path, out, sizeof(out)), -ENAMETOOLONG);

        char small[13];
        ASSERT_EQ(files_normalize("/workspace/abc", small, sizeof(small)), -ENAMETOOLONG);
        ASSERT_OK(files_normalize("/workspace/a", small, sizeof(small)));
        ASSERT_STREQ(small, "/workspace/a");
}

/* ---- request validation ------------------------------------------------- */

static void expect_validation(struct ws *w, json_t *req, const char *message)
{
        struct files_error err;
        json_t *res = run(w, req, &err);
        ASSERT_TRUE(res == NULL);
        ASSERT_EQ(err.http_status, 400);
        ASSERT_STREQ(err.code, "VALIDATION_FAILED");
        if (message)
                ASSERT_STREQ(err.message, message);
        files_error_done(&err);
}

TEST(validation_errors)
{
        struct ws w;
        ws_init(&w);
        expect_validation(&w, json_array(), "Expected an object");
        expect_validation(&w, R("{s:s}", "path", "a"), "Unknown op");
        expect_validation(&w, R("{s:s,s:s}", "op", "chmod", "path", "a"), "Unknown op");
        expect_validation(&w, R("{s:i,s:s}", "op", 1, "path", "a"), "Unknown op");
        expect_validation(&w, R("{s:s}", "op", "read"), "path is required");
        expect_validation(&w, R("{s:s,s:i}", "op", "read", "path", 5), "path is required");
        expect_validation(&w, R("{s:s,s:s}", "op", "read", "path", ""), "path is required");
        expect_validation(&w, R("{s:s,s:s}", "op", "rename", "path", "a"), "newPath is required for rename");
        expect_validation(&w, R("{s:s,s:s,s:s}", "op", "move", "path", "a", "newPath", ""),
                          "newPath is required for move");
        expect_validation(&w, R("{s:s,s:s,s:s}", "op", "read", "path", "a", "encoding", "utf8"),
                          "encoding must be utf-8 or base64");
        expect_validation(&w, R("{s:s,s:s,s:n}", "op", "read", "path", "a", "encoding"),
                          "encoding must be utf-8 or base64");
        expect_validation(&w, R("{s:s,s:s,s:i}", "op", "write", "path", "a", "content", 7),
                          "content must be a string");
        /* NUL inside a path: -EINVAL from normalization → 400. */
        expect_validation(&w, R("{s:s,s:s#}", "op", "write", "path", "a\0b", (int)3), NULL);
        expect_validation(&w, R("{s:s,s:s,s:s#}", "op", "rename", "path", "a", "newPath", "x\0", (int)2),
                          NULL);
        ASSERT_EQ(access(host(&w, "a"), F_OK), -1);

        char longp[5000];
        memset(longp, 'x', sizeof(longp) - 1);
        longp[sizeof(longp) - 1] = '\0';
        expect_validation(&w, R("{s:s,s:s}", "op", "exists", "path", longp), NULL);
}

TEST(escaping_paths_are_403_for_every_op)
{
        struct ws w;
        ws_init(&w);
        static const char *ops[] = { "read", "write", "mkdir", "delete", "list", "exists" };
        static const char *opnames[] = { "file.read", "file.write", "directory.create", "file.delete",
                                         "directory.list", "file.stat" };
        for (size_t i = 0; i < ARRAY_SIZE(ops); i++) {
                struct files_error err;
                expect_err(&w, R("{s:s,s:s,s:b}", "op", ops[i], "path", "/workspace/../etc/passwd",
                                 "recursive", 1),
                           403, "PERMISSION_DENIED", "/workspace/../etc/passwd", opnames[i], "EACCES", &err);
                ASSERT_TRUE(strstr(err.message, "escapes /workspace") != NULL);
                files_error_done(&err);
        }
        expect_err_done(&w, R("{s:s,s:s}", "op", "exists", "path", "/etc/passwd"), 403, "PERMISSION_DENIED",
                        "/etc/passwd", "file.stat", "EACCES");
        expect_err_done(&w, R("{s:s,s:s}", "op", "read", "path", "../sentinel"), 403, "PERMISSION_DENIED",
                        "../sentinel", "file.read", "EACCES");
        /* newPath escaping: the context path is still the (normalized) source. */
        put_file(&w, "f", "x", 1);
        expect_err_done(&w, R("{s:s,s:s,s:s}", "op", "rename", "path", "f", "newPath", "../stolen"), 403,
                        "PERMISSION_DENIED", "/workspace/f", "file.rename", "EACCES");
        ASSERT_OK(access(host(&w, "f"), F_OK));
        ASSERT_EQ(access(host(&w, "../stolen"), F_OK), -1);
        assert_sentinel_intact(&w);
}

/* ---- write / read -------------------------------------------------------- */

TEST(write_read_roundtrip)
{
        struct ws w;
        ws_init(&w);
        json_t *res = ok(&w, R("{s:s,s:s,s:s}", "op", "write", "path", "/workspace/hello.txt", "content",
                               "héllo\n"));
        ASSERT_STREQ(sget(res, "path"), "/workspace/hello.txt");
        ASSERT_EQ(json_object_size(res), 3); /* success, path, timestamp */
        json_decref(res);

        struct stat st;
        ASSERT_OK(stat(host(&w, "hello.txt"), &st));
        ASSERT_EQ(st.st_mode & 07777, 0644);
        ASSERT_EQ(st.st_uid, w.uid);
        ASSERT_EQ(st.st_gid, w.gid);
        ASSERT_STREQ(slurp(host(&w, "hello.txt"), NULL), "héllo\n");

        res = ok(&w, R("{s:s,s:s}", "op", "read", "path", "hello.txt"));
        ASSERT_STREQ(sget(res, "path"), "/workspace/hello.txt");
        ASSERT_STREQ(sget(res, "content"), "héllo\n");
        ASSERT_STREQ(sget(res, "encoding"), "utf-8");
        ASSERT_TRUE(!bget(res, "isBinary"));
        ASSERT_STREQ(sget(res, "mimeType"), "text/plain");
        ASSERT_EQ(iget(res, "size"), 7);
        ASSERT_EQ(json_object_size(res), 8);
        json_decref(res);

        /* Overwrite: new content, still one entry, no temp file left behind. */
        json_decref(ok(&w, R("{s:s,s:s,s:s}", "op", "write", "path", "hello.txt", "content", "bye")));
        ASSERT_STREQ(slurp(host(&w, "hello.txt"), NULL), "bye");
        uint64_t entries = 0, bytes = 0;
        ASSERT_OK(files_usage(w.root_fd, &entries, &bytes));
        ASSERT_EQ(entries, 1);
        ASSERT_EQ(bytes, 3);

        /* Missing content → empty file. */
        json_decref(ok(&w, R("{s:s,s:s}", "op", "write", "path", "empty")));
        ASSERT_OK(stat(host(&w, "empty"), &st));
        ASSERT_EQ(st.st_size, 0);
        json_decref(ok(&w, R("{s:s,s:s,s:n}", "op", "write", "path", "empty2", "content")));
        res = ok(&w, R("{s:s,s:s}", "op", "read", "path", "empty"));
        ASSERT_STREQ(sget(res, "content"), "");
        ASSERT_EQ(iget(res, "size"), 0);
        ASSERT_TRUE(!bget(res, "isBinary"));
        json_decref(res);
}

TEST(write_errors)
{
        struct ws w;
        ws_init(&w);
        expect_err_done(&w, R("{s:s,s:s,s:s}", "op", "write", "path", "nodir/a", "content", "x"), 404,
                        "FILE_NOT_FOUND", "/workspace/nodir/a", "file.write", "ENOENT");
        expect_err_done(&w, R("{s:s,s:s,s:s}", "op", "write", "path", "/workspace", "content", "x"), 400,
                        "IS_DIRECTORY", "/workspace", "file.write", "EISDIR");
        put_dir(&w, "d");
        expect_err_done(&w, R("{s:s,s:s,s:s}", "op", "write", "path", "d", "content", "x"), 400,
                        "IS_DIRECTORY", "/workspace/d", "file.write", "EISDIR");
        put_file(&w, "f", "x", 1);
        expect_err_done(&w, R("{s:s,s:s,s:s}", "op", "write", "path", "f/a", "content", "x"), 400,
                        "NOT_DIRECTORY", "/workspace/f/a", "file.write", "ENOTDIR");
        /* Bad base64 is FILESYSTEM_ERROR 500 with errno EINVAL. */
        static const char *bad[] = { "Y", "!!!!", "YQ=a", "YQ===", "a===", "YQ==YQ==", "YW-_", "=" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                expect_err_done(&w, R("{s:s,s:s,s:s,s:s}", "op", "write", "path", "b64", "content", bad[i],
                                      "encoding", "base64"),
                                500, "FILESYSTEM_ERROR", "/workspace/b64", "file.write", "EINVAL");
        ASSERT_EQ(access(host(&w, "b64"), F_OK), -1);
}

static char *b64(const void *data, size_t len)
{
        char *out = malloc(len / 3 * 4 + 8);
        EVP_EncodeBlock((unsigned char *)out, data, (int)len);
        return out;
}

TEST(base64_roundtrip_binary)
{
        struct ws w;
        ws_init(&w);
        unsigned char bin[256];
        for (int i = 0; i < 256; i++)
                bin[i] = (unsigned char)i;
        /* Every padding shape: 256, 255 and 254 bytes. */
        for (size_t len = 254; len <= 256; len++) {
                char *enc = b64(bin, len);
                json_decref(ok(&w, R("{s:s,s:s,s:s,s:s}", "op", "write", "path", "blob.bin", "content", enc,
                                     "encoding", "base64")));
                size_t got = 0;
                char *raw = slurp(host(&w, "blob.bin"), &got);
                ASSERT_EQ(got, len);
                ASSERT_TRUE(memcmp(raw, bin, len) == 0);

                json_t *res = ok(&w, R("{s:s,s:s,s:s}", "op", "read", "path", "blob.bin", "encoding", "base64"));
                ASSERT_STREQ(sget(res, "content"), enc);
                ASSERT_STREQ(sget(res, "encoding"), "base64");
                ASSERT_TRUE(bget(res, "isBinary"));
                ASSERT_STREQ(sget(res, "mimeType"), "application/octet-stream");
                ASSERT_EQ(iget(res, "size"), (long long)len);
                json_decref(res);
                free(enc);
        }
        /* utf-8 read of binary data is lossy but valid JSON. */
        json_t *res = ok(&w, R("{s:s,s:s}", "op", "read", "path", "blob.bin"));
        ASSERT_TRUE(bget(res, "isBinary"));
        ASSERT_EQ(iget(res, "size"), 256);
        ASSERT_TRUE(strstr(sget(res, "content") + 1, "\xEF\xBF\xBD") != NULL);
        json_decref(res);

        /* atob() leniency: missing padding and whitespace are fine. */
        static const struct {
                const char *in, *out;
        } ok_cases[] = { { "YQ", "a" }, { "YWI", "ab" }, { "YWJj", "abc" }, { "YQ==", "a" },
                         { " Y W\nJ j\t", "abc" }, { "", "" } };
        for (size_t i = 0; i < ARRAY_SIZE(ok_cases); i++) {
                json_decref(ok(&w, R("{s:s,s:s,s:s,s:s}", "op", "write", "path", "p.txt", "content",
                                     ok_cases[i].in, "encoding", "base64")));
                ASSERT_STREQ(slurp(host(&w, "p.txt"), NULL), ok_cases[i].out);
        }
        /* Image by extension, binary content. */
        char *enc = b64("\x89PNG\r\n\x1a\n\0\0", 10);
        json_decref(ok(&w, R("{s:s,s:s,s:s,s:s}", "op", "write", "path", "img.PNG", "content", enc,
                             "encoding", "base64")));
        free(enc);
        res = ok(&w, R("{s:s,s:s,s:s}", "op", "read", "path", "img.PNG", "encoding", "base64"));
        ASSERT_STREQ(sget(res, "mimeType"), "image/png");
        ASSERT_TRUE(bget(res, "isBinary"));
        json_decref(res);
}

TEST(read_lossy_utf8_and_binary_detection)
{
        struct ws w;
        ws_init(&w);
        /* A truncated 3-byte sequence is one U+FFFD (WHATWG), then "A". */
        put_file(&w, "t1.txt", "\xE2\x82" "A", 3);
        json_t *res = ok(&w, R("{s:s,s:s}", "op", "read", "path", "t1.txt"));
        ASSERT_STREQ(sget(res, "content"), "\xEF\xBF\xBD" "A");
        ASSERT_TRUE(bget(res, "isBinary"));
        ASSERT_STREQ(sget(res, "mimeType"), "text/plain"); /* the table wins */
        ASSERT_EQ(iget(res, "size"), 3);
        json_decref(res);

        /* Lone continuation bytes and an invalid lead: one U+FFFD each. */
        put_file(&w, "t2", "\x80\x80\xFF" "b", 4);
        res = ok(&w, R("{s:s,s:s}", "op", "read", "path", "t2"));
        ASSERT_STREQ(sget(res, "content"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" "b");
        ASSERT_STREQ(sget(res, "mimeType"), "application/octet-stream");
        json_decref(res);

        /* Surrogate encoding ED A0 80 is invalid: FFFD for ED, then A0, 80. */
        put_file(&w, "t3", "\xED\xA0\x80", 3);
        res = ok(&w, R("{s:s,s:s}", "op", "read", "path", "t3"));
        ASSERT_STREQ(sget(res, "content"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
        json_decref(res);

        /* Valid UTF-8 with a NUL: binary, content keeps the NUL. */
        put_file(&w, "n.txt", "a\0b", 3);
        res = ok(&w, R("{s:s,s:s}", "op", "read", "path", "n.txt"));
        ASSERT_TRUE(bget(res, "isBinary"));
        ASSERT_EQ(json_string_length(json_object_get(res, "content")), 3);
        ASSERT_TRUE(memcmp(sget(res, "content"), "a\0b", 3) == 0);
        json_decref(res);

        /* TextDecoder drops a leading BOM; size still counts it. */
        put_file(&w, "bom.md", "\xEF\xBB\xBFhi", 5);
        res = ok(&w, R("{s:s,s:s}", "op", "read", "path", "bom.md"));
        ASSERT_STREQ(sget(res, "content"), "hi");
        ASSERT_TRUE(!bget(res, "isBinary"));
        ASSERT_STREQ(sget(res, "mimeType"), "text/markdown");
        ASSERT_EQ(iget(res, "size"), 5);
        json_decref(res);
}

TEST(mime_table)
{
        struct ws w;
        ws_init(&w);
        static const struct {
                const char *name, *mime;
        } cases[] = {
                { "a.json", "application/json" }, { "a.js", "text/javascript" },
                { "a.mjs", "text/javascript" },   { "a.py", "text/x-python" },
                { "a.pl", "text/x-perl" },        { "a.rb", "text/x-ruby" },
                { "a.txt", "text/plain" },        { "a.md", "text/markdown" },
                { "a.html", "text/html" },        { "a.css", "text/css" },
                { "a.csv", "text/csv" },          { "a.png", "image/png" },
                { "a.jpg", "image/jpeg" },        { "a.JPEG", "image/jpeg" },
                { "a.gif", "image/gif" },         { "a.svg", "image/svg+xml" },
                { "a.pdf", "application/pdf" },   { "a.wasm", "application/wasm" },
                { "a.zip", "application/zip" },   { "a.tar.gz", "application/gzip" },
                { ".bashrc", "text/plain" },      { "noext", "text/plain" },
                { "a.", "text/plain" },           { "a.htm", "text/plain" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                put_file(&w, cases[i].name, "x", 1);
                json_t *res = ok(&w, R("{s:s,s:s}", "op", "read", "path", cases[i].name));
                if (strcmp(sget(res, "mimeType"), cases[i].mime) != 0)
                        TAP_FAIL("%s: %s != %s", cases[i].name, sget(res, "mimeType"), cases[i].mime);
                json_decref(res);
        }
}

TEST(read_errors)
{
        struct ws w;
        ws_init(&w);
        expect_err_done(&w, R("{s:s,s:s}", "op", "read", "path", "missing"), 404, "FILE_NOT_FOUND",
                        "/workspace/missing", "file.read", "ENOENT");
        put_dir(&w, "d");
        expect_err_done(&w, R("{s:s,s:s}", "op", "read", "path", "d"), 400, "IS_DIRECTORY", "/workspace/d",
                        "file.read", "EISDIR");
        expect_err_done(&w, R("{s:s,s:s}", "op", "read", "path", "/workspace"), 400, "IS_DIRECTORY",
                        "/workspace", "file.read", "EISDIR");
        put_file(&w, "f", "x", 1);
        expect_err_done(&w, R("{s:s,s:s}", "op", "read", "path", "f/x"), 400, "NOT_DIRECTORY",
                        "/workspace/f/x", "file.read", "ENOTDIR");
        /* A FIFO would block a naive open(); it is refused instead. */
        ASSERT_OK(mkfifo(host(&w, "fifo"), 0666));
        expect_err_done(&w, R("{s:s,s:s}", "op", "read", "path", "fifo"), 403, "PERMISSION_DENIED",
                        "/workspace/fifo", "file.read", "EACCES");
}

TEST(file_too_large)
{
        struct ws w;
        ws_init(&w);
        w.lim.max_file_bytes = 10;
        struct files_error err;
        expect_err(&w, R("{s:s,s:s,s:s}", "op", "write", "path", "big", "content", "0123456789A"), 413,
                   "FILE_TOO_LARGE", "/workspace/big", "file.write", "EFBIG", &err);
        ASSERT_EQ(iget(err.context, "maxSize"), 10);
        ASSERT_EQ(iget(err.context, "actualSize"), 11);
        files_error_done(&err);
        ASSERT_EQ(access(host(&w, "big"), F_OK), -1); /* nothing written */
        /* Size counts decoded bytes for base64. */
        expect_err(&w, R("{s:s,s:s,s:s,s:s}", "op", "write", "path", "big", "content", "AAAAAAAAAAAAAAAA",
                         "encoding", "base64"),
                   413, "FILE_TOO_LARGE", "/workspace/big", "file.write", "EFBIG", &err);
        ASSERT_EQ(iget(err.context, "actualSize"), 12);
        files_error_done(&err);
        json_decref(ok(&w, R("{s:s,s:s,s:s}", "op", "write", "path", "fits", "content", "0123456789")));

        /* Reads are bounded by the same limit (the guest may write more). */
        put_file(&w, "guest-big", "0123456789ABCDEF", 16);
        expect_err(&w, R("{s:s,s:s}", "op", "read", "path", "guest-big"), 413, "FILE_TOO_LARGE",
                   "/workspace/guest-big", "file.read", "EFBIG", &err);
        ASSERT_EQ(iget(err.context, "actualSize"), 16);
        files_error_done(&err);
}

TEST(no_space_limits)
{
        struct ws w;
        ws_init(&w);
        w.lim.max_total_bytes = 10;
        json_decref(ok(&w, R("{s:s,s:s,s:s}", "op", "write", "path", "a", "content", "123456")));
        expect_err_done(&w, R("{s:s,s:s,s:s}", "op", "write", "path", "b", "content", "123456"), 500,
                        "NO_SPACE", "/workspace/b", "file.write", "ENOSPC");
        ASSERT_EQ(access(host(&w, "b"), F_OK), -1);
        /* Overwriting subtracts the old size: 10 bytes replace 6. */
        json_decref(ok(&w, R("{s:s,s:s,s:s}", "op", "write", "path", "a", "content", "1234567890")));
        expect_err_done(&w, R("{s:s,s:s,s:s}", "op", "write", "path", "a", "content", "1234567890X"), 500,
                        "NO_SPACE", "/workspace/a", "file.write", "ENOSPC");
        ASSERT_STREQ(slurp(host(&w, "a"), NULL), "1234567890");

        /* Entries: files and directories count. */
        w.lim.max_total_bytes = 0;
        w.lim.max_entries = 3;
        json_decref(ok(&w, R("{s:s,s:s}", "op", "mkdir", "path", "d")));
        json_decref(ok(&w, R("{s:s,s:s,s:s}", "op", "write", "path", "d/x", "content", "")));
        json_decref(ok(&w, R("{s:s,s:s,s:s}", "op", "write", "path", "d/x", "content", "overwrite ok")));
        expect_err_done(&w, R("{s:s,s:s,s:s}", "op", "write", "path", "c", "content", ""), 500, "NO_SPACE",
                        "/workspace/c", "file.write", "ENOSPC");
        expect_err_done(&w, R("{s:s,s:s}", "op", "mkdir", "path", "e"), 500, "NO_SPACE", "/workspace/e",
                        "directory.create", "ENOSPC");
        expect_err_done(&w, R("{s:s,s:s,s:b}", "op", "mkdir", "path", "p/q", "recursive", 1), 500, "NO_SPACE",
                        "/workspace/p/q", "directory.create", "ENOSPC");
        ASSERT_EQ(access(host(&w, "p"), F_OK), -1); /* nothing half-created */
        /* Existing directories need no new entries. */
        json_decref(ok(&w, R("{s:s,s:s,s:b}", "op", "mkdir", "path", "d", "recursive", 1)));
}

/* ---- mkdir --------------------------------------------------------------- */

TEST(mkdir_ops)
{
        struct ws w;
        ws_init(&w);
        json_t *res = ok(&w, R("{s:s,s:s}", "op", "mkdir", "path", "d"));
        ASSERT_STREQ(sget(res, "path"), "/workspace/d");
        ASSERT_TRUE(!bget(res, "recursive"));
        ASSERT_EQ(json_object_size(res), 4);
        json_decref(res);
        struct stat st;
        ASSERT_OK(stat(host(&w, "d"), &st));
        ASSERT_TRUE(S_ISDIR(st.st_mode));
        ASSERT_EQ(st.st_uid, w.uid);
        ASSERT_EQ(st.st_mode & 0777, 0755);

        /* Every failed mkdir is FILESYSTEM_ERROR 500 with the errno. */
        expect_err_done(&w, R("{s:s,s:s}", "op", "mkdir", "path", "d"), 500, "FILESYSTEM_ERROR", "/workspace/d",
                        "directory.create", "EEXIST");
        expect_err_done(&w, R("{s:s,s:s}", "op", "mkdir", "path", "x/y"), 500, "FILESYSTEM_ERROR",
                        "/workspace/x/y", "directory.create", "ENOENT");
        put_file(&w, "f", "x", 1);
        expect_err_done(&w, R("{s:s,s:s}", "op", "mkdir", "path", "f/y"), 500, "FILESYSTEM_ERROR",
                        "/workspace/f/y", "directory.create", "ENOTDIR");
        expect_err_done(&w, R("{s:s,s:s}", "op", "mkdir", "path", "f"), 500, "FILESYSTEM_ERROR",
                        "/workspace/f", "directory.create", "EEXIST");
        expect_err_done(&w, R("{s:s,s:s,s:b}", "op", "mkdir", "path", "f/y/z", "recursive", 1), 500,
                        "FILESYSTEM_ERROR", "/workspace/f/y/z", "directory.create", "ENOTDIR");
        expect_err_done(&w, R("{s:s,s:s,s:b}", "op", "mkdir", "path", "f", "recursive", 1), 500,
                        "FILESYSTEM_ERROR", "/workspace/f", "directory.create", "ENOTDIR");

        res = ok(&w, R("{s:s,s:s,s:b}", "op", "mkdir", "path", "a/b/c", "recursive", 1));
        ASSERT_TRUE(bget(res, "recursive"));
        json_decref(res);
        ASSERT_OK(stat(host(&w, "a/b/c"), &st));
        ASSERT_EQ(st.st_uid, w.uid);
        json_decref(ok(&w, R("{s:s,s:s,s:b}", "op", "mkdir", "path", "a/b/c", "recursive", 1)));
        json_decref(ok(&w, R("{s:s,s:s,s:s}", "op", "mkdir", "path", "a/b/c/d", "recursive", "yes")));
        ASSERT_OK(stat(host(&w, "a/b/c/d"), &st));

        /* The root is a no-op, with or without recursive. */
        json_decref(ok(&w, R("{s:s,s:s}", "op", "mkdir", "path", "/workspace")));
        json_decref(ok(&w, R("{s:s,s:s,s:b}", "op", "mkdir", "path", ".", "recursive", 1)));
}

/* ---- delete -------------------------------------------------------------- */

TEST(delete_ops)
{
        struct ws w;
        ws_init(&w);
        put_file(&w, "f", "x", 1);
        json_t *res = ok(&w, R("{s:s,s:s}", "op", "delete", "path", "f"));
        ASSERT_STREQ(sget(res, "path"), "/workspace/f");
        ASSERT_EQ(json_object_size(res), 3);
        json_decref(res);
        ASSERT_EQ(access(host(&w, "f"), F_OK), -1);

        put_dir(&w, "d");
        put_dir(&w, "d/e");
        put_file(&w, "d/e/g", "x", 1);
        struct files_error err;
        expect_err(&w, R("{s:s,s:s}", "op", "delete", "path", "/workspace/d"), 400, "IS_DIRECTORY",
                   "/workspace/d", "file.delete", "EISDIR", &err);
        ASSERT_STREQ(err.message, "Cannot delete directory with deleteFile() at '/workspace/d'. "
                                  "Pass { recursive: true } to delete a directory.");
        files_error_done(&err);
        put_dir(&w, "empty");
        expect_err_done(&w, R("{s:s,s:s}", "op", "delete", "path", "empty"), 400, "IS_DIRECTORY",
                        "/workspace/empty", "file.delete", "EISDIR");
        json_decref(ok(&w, R("{s:s,s:s,s:b}", "op", "delete", "path", "d", "recursive", 1)));
        ASSERT_EQ(access(host(&w, "d"), F_OK), -1);

        expect_err_done(&w, R("{s:s,s:s}", "op", "delete", "path", "missing"), 404, "FILE_NOT_FOUND",
                        "/workspace/missing", "file.delete", "ENOENT");
        expect_err_done(&w, R("{s:s,s:s}", "op", "delete", "path", "no/such"), 404, "FILE_NOT_FOUND",
                        "/workspace/no/such", "file.delete", "ENOENT");
        json_decref(ok(&w, R("{s:s,s:s,s:b}", "op", "delete", "path", "missing", "force", 1)));
        json_decref(ok(&w, R("{s:s,s:s,s:b}", "op", "delete", "path", "no/such", "force", 1)));
        expect_err_done(&w, R("{s:s,s:s,s:b,s:b}", "op", "delete", "path", "/workspace", "recursive", 1,
                              "force", 1),
                        403, "PERMISSION_DENIED", "/workspace", "file.delete", "EACCES");
        ASSERT_OK(access(w.root, F_OK));
}

/* ---- rename / move ------------------------------------------------------- */

TEST(rename_ops)
{
        struct ws w;
        ws_init(&w);
        put_file(&w, "a", "AAA", 3);
        json_t *res = ok(&w, R("{s:s,s:s,s:s}", "op", "rename", "path", "a", "newPath", "/workspace/b"));
        ASSERT_STREQ(sget(res, "path"), "/workspace/a");
        ASSERT_STREQ(sget(res, "newPath"), "/workspace/b");
        ASSERT_EQ(json_object_size(res), 4);
        json_decref(res);
        ASSERT_STREQ(slurp(host(&w, "b"), NULL), "AAA");
        ASSERT_EQ(access(host(&w, "a"), F_OK), -1);

        /* Overwrites an existing file. */
        put_file(&w, "c", "CCC", 3);
        json_decref(ok(&w, R("{s:s,s:s,s:s}", "op", "move", "path", "b", "newPath", "c")));
        ASSERT_STREQ(slurp(host(&w, "c"), NULL), "AAA");

        put_dir(&w, "d");
        put_dir(&w, "full");
        put_file(&w, "full/x", "x", 1);
        put_dir(&w, "emptydir");
        expect_err_done(&w, R("{s:s,s:s,s:s}", "op", "rename", "path", "c", "newPath", "nodir/c"), 404,
                        "FILE_NOT_FOUND", "/workspace/c", "file.rename", "ENOENT");
        expect_err_done(&w, R("{s:s,s:s,s:s}", "op", "rename", "path", "nothere", "newPath", "z"), 404,
                        "FILE_NOT_FOUND", "/workspace/nothere", "file.rename", "ENOENT");
        expect_err_done(&w, R("{s:s,s:s,s:s}", "op", "rename", "path", "d", "newPath", "c"), 400,
                        "NOT_DIRECTORY", "/workspace/d", "file.rename", "ENOTDIR");
        expect_err_done(&w, R("{s:s,s:s,s:s}", "op", "move", "path", "c", "newPath", "d"), 400, "IS_DIRECTORY",
                        "/workspace/c", "file.move", "EISDIR");
        struct files_error err;
        expect_err(&w, R("{s:s,s:s,s:s}", "op", "rename", "path", "d", "newPath", "full"), 500,
                   "FILESYSTEM_ERROR", "/workspace/d", "file.rename", "ENOTEMPTY", &err);
        ASSERT_STREQ(sget(err.context, "newPath"), "/workspace/full");
        files_error_done(&err);
        /* Onto an empty directory: replaced, as rename(2) does. */
        json_decref(ok(&w, R("{s:s,s:s,s:s}", "op", "rename", "path", "d", "newPath", "emptydir")));
        ASSERT_EQ(access(host(&w, "d"), F_OK), -1);
        /* Into a subdirectory, across directories. */
        json_decref(ok(&w, R("{s:s,s:s,s:s}", "op", "move", "path", "c", "newPath", "full/c")));
        ASSERT_STREQ(slurp(host(&w, "full/c"), NULL), "AAA");
        /* A directory into itself: EINVAL → FILESYSTEM_ERROR. */
        expect_err_done(&w, R("{s:s,s:s,s:s}", "op", "rename", "path", "full", "newPath", "full/sub"), 500,
                        "FILESYSTEM_ERROR", "/workspace/full", "file.rename", "EINVAL");
        expect_err_done(&w, R("{s:s,s:s,s:s}", "op", "rename", "path", "/workspace", "newPath", "x"), 403,
                        "PERMISSION_DENIED", "/workspace", "file.rename", "EACCES");
        expect_err_done(&w, R("{s:s,s:s,s:s}", "op", "rename", "path", "full", "newPath", "."), 403,
                        "PERMISSION_DENIED", "/workspace/full", "file.rename", "EACCES");
}

/* ---- list / exists ------------------------------------------------------- */

static const json_t *find_entry(const json_t *files, const char *rel)
{
        size_t i;
        const json_t *v;
        json_array_foreach(files, i, v)
        if (strcmp(sget(v, "relativePath"), rel) == 0)
                return v;
        return NULL;
}

TEST(list_ops)
{
        struct ws w;
        ws_init(&w);
        put_file(&w, "b.txt", "hello", 5);
        put_dir(&w, "a");
        put_file(&w, "a/z.py", "print(1)", 8);
        put_dir(&w, "a/sub");
        put_file(&w, "a/sub/deep", "", 0);
        put_file(&w, ".hidden", "h", 1);
        put_dir(&w, ".git");
        put_file(&w, ".git/config", "c", 1);
        put_file(&w, "a/.env", "SECRET=1", 8);
        struct timespec times[2] = { { 0, UTIME_OMIT }, { 1600000000, 456000000 } };
        ASSERT_OK(utimensat(AT_FDCWD, host(&w, "b.txt"), times, 0));

        json_t *res = ok(&w, R("{s:s,s:s}", "op", "list", "path", "/workspace"));
        ASSERT_STREQ(sget(res, "path"), "/workspace");
        json_t *files = json_object_get(res, "files");
        ASSERT_EQ(json_array_size(files), 2);
        ASSERT_EQ(iget(res, "count"), 2);
        ASSERT_EQ(json_object_size(res), 5);
        /* sorted by relativePath */
        ASSERT_STREQ(sget(json_array_get(files, 0), "relativePath"), "a");
        ASSERT_STREQ(sget(json_array_get(files, 1), "relativePath"), "b.txt");

        const json_t *d = json_array_get(files, 0);
        ASSERT_STREQ(sget(d, "name"), "a");
        ASSERT_STREQ(sget(d, "absolutePath"), "/workspace/a");
        ASSERT_STREQ(sget(d, "type"), "directory");
        ASSERT_EQ(iget(d, "size"), 0);
        ASSERT_STREQ(sget(d, "modifiedAt"), CREATED_AT_ISO);
        ASSERT_STREQ(sget(d, "mode"), "drwxr-xr-x");
        const json_t *perm = json_object_get(d, "permissions");
        ASSERT_TRUE(bget(perm, "readable") && bget(perm, "writable") && bget(perm, "executable"));
        ASSERT_EQ(json_object_size(d), 8);

        const json_t *f = json_array_get(files, 1);
        ASSERT_STREQ(sget(f, "name"), "b.txt");
        ASSERT_STREQ(sget(f, "absolutePath"), "/workspace/b.txt");
        ASSERT_STREQ(sget(f, "type"), "file");
        ASSERT_EQ(iget(f, "size"), 5);
        ASSERT_STREQ(sget(f, "modifiedAt"), "2020-09-13T12:26:40.456Z");
        ASSERT_STREQ(sget(f, "mode"), "-rw-r--r--");
        perm = json_object_get(f, "permissions");
        ASSERT_TRUE(bget(perm, "readable") && bget(perm, "writable") && !bget(perm, "executable"));
        json_decref(res);

        /* recursive, hidden filtered */
        res = ok(&w, R("{s:s,s:s,s:b}", "op", "list", "path", "/workspace", "recursive", 1));
        files = json_object_get(res, "files");
        static const char *want[] = { "a", "a/sub", "a/sub/deep", "a/z.py", "b.txt" };
        ASSERT_EQ(json_array_size(files), ARRAY_SIZE(want));
        for (size_t i = 0; i < ARRAY_SIZE(want); i++)
                ASSERT_STREQ(sget(json_array_get(files, i), "relativePath"), want[i]);
        ASSERT_STREQ(sget(find_entry(files, "a/sub/deep"), "name"), "deep");
        ASSERT_STREQ(sget(find_entry(files, "a/sub/deep"), "absolutePath"), "/workspace/a/sub/deep");
        json_decref(res);

        /* includeHidden */
        res = ok(&w, R("{s:s,s:s,s:b,s:b}", "op", "list", "path", ".", "recursive", 1, "includeHidden", 1));
        files = json_object_get(res, "files");
        ASSERT_EQ(iget(res, "count"), 9);
        ASSERT_TRUE(find_entry(files, ".git/config") != NULL);
        ASSERT_TRUE(find_entry(files, "a/.env") != NULL);
        ASSERT_TRUE(find_entry(files, ".hidden") != NULL);
        json_decref(res);

        /* A subdirectory: relativePath is relative to it, and the listed
         * directory's own (hidden or not) name does not count. */
        res = ok(&w, R("{s:s,s:s,s:b}", "op", "list", "path", "a", "recursive", 1));
        files = json_object_get(res, "files");
        ASSERT_EQ(iget(res, "count"), 3);
        ASSERT_STREQ(sget(json_array_get(files, 0), "relativePath"), "sub");
        ASSERT_STREQ(sget(json_array_get(files, 0), "absolutePath"), "/workspace/a/sub");
        ASSERT_STREQ(sget(json_array_get(files, 1), "relativePath"), "sub/deep");
        ASSERT_STREQ(sget(json_array_get(files, 2), "relativePath"), "z.py");
        json_decref(res);
        res = ok(&w, R("{s:s,s:s}", "op", "list", "path", ".git"));
        ASSERT_EQ(iget(res, "count"), 1);
        json_decref(res);

        expect_err_done(&w, R("{s:s,s:s}", "op", "list", "path", "b.txt"), 400, "NOT_DIRECTORY",
                        "/workspace/b.txt", "directory.list", "ENOTDIR");
        expect_err_done(&w, R("{s:s,s:s}", "op", "list", "path", "nope"), 404, "FILE_NOT_FOUND",
                        "/workspace/nope", "directory.list", "ENOENT");
}

TEST(exists_ops)
{
        struct ws w;
        ws_init(&w);
        put_file(&w, "f", "x", 1);
        put_dir(&w, "d");
        static const struct {
                const char *path;
                bool exists;
        } cases[] = { { "f", true },    { "/workspace/d", true }, { "/workspace", true }, { ".", true },
                      { "nope", false }, { "f/x", false },        { "d/../f", true },     { "d/x/y", false } };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                json_t *res = ok(&w, R("{s:s,s:s}", "op", "exists", "path", cases[i].path));
                if (bget(res, "exists") != cases[i].exists)
                        TAP_FAIL("exists(%s) != %d", cases[i].path, cases[i].exists);
                ASSERT_EQ(json_object_size(res), 4);
                json_decref(res);
        }
}

TEST(usage_counts)
{
        struct ws w;
        ws_init(&w);
        uint64_t entries = 99, bytes = 99;
        ASSERT_OK(files_usage(w.root_fd, &entries, &bytes));
        ASSERT_EQ(entries, 0);
        ASSERT_EQ(bytes, 0);
        put_dir(&w, "d");
        put_dir(&w, "d/.e");
        put_file(&w, "d/.e/f", "12345", 5);
        put_file(&w, "g", "123", 3);
        ASSERT_OK(symlink("/etc/passwd", host(&w, "link")));
        ASSERT_OK(symlink("/", host(&w, "d/rootlink")));
        ASSERT_OK(files_usage(w.root_fd, &entries, &bytes));
        ASSERT_EQ(entries, 6);
        ASSERT_EQ(bytes, 8); /* links are not followed nor counted as bytes */
}

/* ---- identity ------------------------------------------------------------ */

TEST(identity_root_owned_file_unreachable)
{
        if (geteuid() != 0)
                SKIP("needs root");
        struct ws w;
        ws_init(&w);
        int fd = open(host(&w, "rootonly"), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(write_all(fd, "TOPSECRET root", 14));
        close(fd);
        expect_err_done(&w, R("{s:s,s:s}", "op", "read", "path", "rootonly"), 403, "PERMISSION_DENIED",
                        "/workspace/rootonly", "file.read", "EACCES");
        ASSERT_OK(mkdir(host(&w, "rootdir"), 0755));
        expect_err_done(&w, R("{s:s,s:s,s:s}", "op", "write", "path", "rootdir/x", "content", "x"), 403,
                        "PERMISSION_DENIED", "/workspace/rootdir/x", "file.write", "EACCES");
        expect_err_done(&w, R("{s:s,s:s}", "op", "mkdir", "path", "rootdir/x"), 403, "PERMISSION_DENIED",
                        "/workspace/rootdir/x", "directory.create", "EACCES");
        assert_nothing_leaked();
}

/* ---- attacks: guest-planted symlinks ------------------------------------- */

static void plant_links(struct ws *w)
{
        char target[256];
        ASSERT_OK(symlink("/", host(w, "rootlink")));
        ASSERT_OK(symlink("/etc/passwd", host(w, "passwd")));
        ASSERT_OK(symlink("/etc", host(w, "etc")));
        ASSERT_OK(symlink("../../", host(w, "up")));
        ASSERT_OK(symlink("..", host(w, "parent")));
        ASSERT_OK(symlink("../sentinel", host(w, "sent")));
        ASSERT_OK(symlink(w->sentinel, host(w, "abs-sent")));
        snprintf(target, sizeof(target), "/proc/self/root%s", w->sentinel);
        ASSERT_OK(symlink(target, host(w, "magic")));
        put_dir(w, "inner");
        ASSERT_OK(symlink("..", host(w, "inner/dotdot")));
        ASSERT_OK(symlink("../../sentinel", host(w, "inner/sent2")));
}

/* Every path below goes through a planted link; all must be refused or be
 * confined to the link itself, and nothing outside may change or leak. */
static const char *through_links[] = {
        "rootlink/etc/passwd",
        "passwd",
        "etc/passwd",
        "etc/hostname",
        "up/sentinel",
        "parent/sentinel",
        "sent",
        "abs-sent",
        "magic",
        "inner/dotdot/sent",
        "inner/dotdot/inner/sent2",
        "inner/sent2",
};

TEST(attack_symlink_read)
{
        struct ws w;
        ws_init(&w);
        plant_links(&w);
        for (size_t i = 0; i < ARRAY_SIZE(through_links); i++)
                for (int enc = 0; enc < 2; enc++) {
                        struct files_error err;
                        json_t *res = run(&w, R("{s:s,s:s,s:s}", "op", "read", "path", through_links[i],
                                                "encoding", enc ? "base64" : "utf-8"),
                                          &err);
                        if (res)
                                TAP_FAIL("read through '%s' succeeded", through_links[i]);
                        if (err.http_status != 403)
                                TAP_FAIL("read '%s': %d %s", through_links[i], err.http_status, err.message);
                        ASSERT_STREQ(sget(err.context, "errno"), "EACCES");
                        files_error_done(&err);
                }
        /* exists reveals nothing about what lies behind a link. */
        static const char *probes[] = { "rootlink/etc/passwd", "rootlink/etc", "etc/passwd", "up/sentinel",
                                        "parent/sentinel", "inner/dotdot/sent" };
        for (size_t i = 0; i < ARRAY_SIZE(probes); i++) {
                json_t *res = ok(&w, R("{s:s,s:s}", "op", "exists", "path", probes[i]));
                ASSERT_TRUE(!bget(res, "exists"));
                json_decref(res);
        }
        assert_sentinel_intact(&w);
        assert_nothing_leaked();
}

TEST(attack_symlink_write)
{
        struct ws w;
        ws_init(&w);
        plant_links(&w);
        for (size_t i = 0; i < ARRAY_SIZE(through_links); i++) {
                struct files_error err;
                json_t *res = run(&w, R("{s:s,s:s,s:s}", "op", "write", "path", through_links[i], "content",
                                        "PWNED"),
                                  &err);
                if (res)
                        TAP_FAIL("write through '%s' succeeded", through_links[i]);
                ASSERT_EQ(err.http_status, 403);
                files_error_done(&err);
        }
        /* Writes into directories behind links. */
        static const char *dirs[] = { "rootlink/tmp/sbx-pwned", "up/tmp/sbx-pwned", "parent/pwned",
                                      "inner/dotdot/parent/pwned" };
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                struct files_error err;
                json_t *res = run(&w, R("{s:s,s:s,s:s}", "op", "write", "path", dirs[i], "content", "PWNED"),
                                  &err);
                ASSERT_TRUE(res == NULL);
                ASSERT_EQ(err.http_status, 403);
                files_error_done(&err);
        }
        char p[256];
        snprintf(p, sizeof(p), "%s/pwned", w.outer);
        ASSERT_EQ(access(p, F_OK), -1);
        ASSERT_EQ(access("/tmp/sbx-pwned", F_OK), -1);
        /* The links themselves are untouched (not replaced by files). */
        struct stat st;
        ASSERT_OK(lstat(host(&w, "sent"), &st));
        ASSERT_TRUE(S_ISLNK(st.st_mode));
        assert_sentinel_intact(&w);
        assert_nothing_leaked();
}

TEST(attack_symlink_list)
{
        struct ws w;
        ws_init(&w);
        plant_links(&w);
        static const char *dirs[] = { "rootlink", "rootlink/etc", "etc", "up", "parent", "inner/dotdot",
                                      "inner/dotdot/parent" };
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                struct files_error err;
                json_t *res = run(&w, R("{s:s,s:s,s:b,s:b}", "op", "list", "path", dirs[i], "recursive", 1,
                                        "includeHidden", 1),
                                  &err);
                if (res)
                        TAP_FAIL("list through '%s' succeeded", dirs[i]);
                ASSERT_EQ(err.http_status, 403);
                files_error_done(&err);
        }
        /* Listing the workspace shows the links as empty files and never
         * descends into them. */
        json_t *res = ok(&w, R("{s:s,s:s,s:b,s:b}", "op", "list", "path", "/workspace", "recursive", 1,
                               "includeHidden", 1));
        json_t *files = json_object_get(res, "files");
        ASSERT_EQ(iget(res, "count"), 11);
        const json_t *e = find_entry(files, "rootlink");
        ASSERT_TRUE(e != NULL);
        ASSERT_STREQ(sget(e, "type"), "file");
        ASSERT_EQ(iget(e, "size"), 0);
        e = find_entry(files, "passwd");
        ASSERT_EQ(iget(e, "size"), 0);
        ASSERT_TRUE(find_entry(files, "rootlink/etc") == NULL);
        ASSERT_TRUE(find_entry(files, "inner/dotdot/sent") == NULL);
        size_t i;
        const json_t *v;
        json_array_foreach(files, i, v)
        ASSERT_TRUE(strncmp(sget(v, "absolutePath"), "/workspace/", 11) == 0);
        json_decref(res);
        uint64_t entries, bytes;
        ASSERT_OK(files_usage(w.root_fd, &entries, &bytes));
        ASSERT_EQ(entries, 11);
        ASSERT_EQ(bytes, 0);
        assert_sentinel_intact(&w);
        assert_nothing_leaked();
}

TEST(attack_symlink_mkdir_delete_rename)
{
        struct ws w;
        ws_init(&w);
        plant_links(&w);
        char outside[256];
        snprintf(outside, sizeof(outside), "%s/evil", w.outer);

        static const char *mk[] = { "rootlink/tmp/sbx-evil", "up/evil", "parent/evil", "inner/dotdot/parent/evil",
                                    "sent/evil" };
        for (size_t i = 0; i < ARRAY_SIZE(mk); i++)
                for (int rec = 0; rec < 2; rec++) {
                        struct files_error err;
                        json_t *res = run(&w, R("{s:s,s:s,s:b}", "op", "mkdir", "path", mk[i], "recursive", rec),
                                          &err);
                        if (res)
                                TAP_FAIL("mkdir through '%s' succeeded", mk[i]);
                        /* 403, not the mkdir FILESYSTEM_ERROR override. */
                        ASSERT_EQ(err.http_status, 403);
                        ASSERT_STREQ(err.code, "PERMISSION_DENIED");
                        files_error_done(&err);
                }
        ASSERT_EQ(access(outside, F_OK), -1);
        ASSERT_EQ(access("/tmp/sbx-evil", F_OK), -1);
        /* mkdir over an existing link name is EEXIST, nothing followed. */
        expect_err_done(&w, R("{s:s,s:s}", "op", "mkdir", "path", "parent"), 500, "FILESYSTEM_ERROR",
                        "/workspace/parent", "directory.create", "EEXIST");

        /* delete through links: refused; the target is never touched. */
        static const char *del[] = { "parent/sentinel", "up/sentinel", "inner/dotdot/sent",
                                     "rootlink/etc/hostname" };
        for (size_t i = 0; i < ARRAY_SIZE(del); i++) {
                struct files_error err;
                json_t *res = run(&w, R("{s:s,s:s,s:b,s:b}", "op", "delete", "path", del[i], "recursive", 1,
                                        "force", 1),
                                  &err);
                if (res)
                        TAP_FAIL("delete through '%s' succeeded", del[i]);
                ASSERT_EQ(err.http_status, 403);
                files_error_done(&err);
        }
        assert_sentinel_intact(&w);

        /* rename out of / into places behind links: refused. */
        put_file(&w, "mine", "mine", 4);
        static const char *pairs[][2] = {
                { "parent/sentinel", "stolen" }, { "inner/dotdot/sent", "stolen" },
                { "mine", "parent/sentinel" },   { "mine", "up/x" },
                { "rootlink/etc/passwd", "p" },  { "mine", "inner/dotdot/parent/x" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(pairs); i++) {
                struct files_error err;
                json_t *res = run(&w, R("{s:s,s:s,s:s}", "op", "rename", "path", pairs[i][0], "newPath",
                                        pairs[i][1]),
                                  &err);
                if (res)
                        TAP_FAIL("rename '%s' → '%s' succeeded", pairs[i][0], pairs[i][1]);
                ASSERT_EQ(err.http_status, 403);
                files_error_done(&err);
        }
        ASSERT_EQ(access(host(&w, "stolen"), F_OK), -1);
        ASSERT_STREQ(slurp(host(&w, "mine"), NULL), "mine");

        /* Links themselves may be renamed and deleted: that acts on the
         * link, never on its target. */
        json_decref(ok(&w, R("{s:s,s:s,s:s}", "op", "rename", "path", "sent", "newPath", "inner/moved")));
        struct stat st;
        ASSERT_OK(lstat(host(&w, "inner/moved"), &st));
        ASSERT_TRUE(S_ISLNK(st.st_mode));
        json_decref(ok(&w, R("{s:s,s:s}", "op", "delete", "path", "inner/moved")));
        json_decref(ok(&w, R("{s:s,s:s}", "op", "delete", "path", "rootlink")));
        ASSERT_OK(access("/etc/passwd", F_OK));
        /* Recursive delete of a directory holding links to outside. */
        json_decref(ok(&w, R("{s:s,s:s,s:b}", "op", "delete", "path", "inner", "recursive", 1)));
        ASSERT_EQ(access(host(&w, "inner"), F_OK), -1);
        ASSERT_OK(access(w.outer, F_OK));
        ASSERT_OK(access(w.root, F_OK));
        assert_sentinel_intact(&w);
        assert_nothing_leaked();
}
