/* Fuzzes the files API on a real directory through the gateway's JSON
 * function (workers_files_on in src/api/workers/files.c, on the typed
 * operations of src/sandbox/files/): the input is a /files request body. A JSON array is taken as a
 * sequence of requests run in order, so the fuzzer can build state (mkdir,
 * then write into it, then rename, ...).
 *
 * Set-up, once: a temp dir (on /dev/shm when available, so fsync is cheap)
 *   <tmp>/sentinel        a file outside the workspace
 *   <tmp>/ws/             the workspace (root_fd), seeded with files, dirs
 *                         and symlinks: to "/", to "/etc/passwd", to "..",
 *                         to "../sentinel", to <tmp> by absolute path and
 *                         from dir/sub by "../../..", a dangling one and an
 *                         in-workspace one.
 * It runs with small limits (64 KiB per file, 1 MiB total, 256
 * entries) as getuid()/getgid(), so it works unprivileged too.
 *
 * Invariants after every request:
 *  - nothing outside the workspace changed: <tmp> holds exactly "ws" and
 *    "sentinel", the sentinel's content, size, inode and mtime are
 *    unchanged, <tmp>'s own mtime is unchanged, /etc/passwd is unchanged;
 *  - nothing outside was read: no read returns the sentinel's random
 *    secret or the content of /etc/passwd;
 *  - a success is a JSON object with "success": true, a normalised "path"
 *    beneath /workspace and a timestamp, and serialises to JSON that parses
 *    back; a failure is an ErrorResponse with a known status, a code, a
 *    message, a context object and the same httpStatus, and serialises
 *    to JSON that parses back.
 * Every input starts from the same pristine workspace, so a finding
 * reproduces from its saved input alone and coverage feedback is stable:
 * the tree is rebuilt before an input whenever the previous one sent a
 * mutating op (write, mkdir, delete, rename, move) (so it can never grow
 * across inputs either). State within one input comes from sequences. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/workers/files.h"
#include "base/util.h"
#include <sanitizer/common_interface_defs.h>

#include "fuzz.h"
#include "http/server.h"

static char g_tmp[PATH_MAX];
static int g_tmp_fd = -1;
static int g_ws_fd = -1;
static bool g_dirty; /* the previous input may have changed the workspace */
static struct stat g_sentinel_st, g_tmp_st, g_passwd_st;
/* "sentinel <32 random hex digits>\n": a read that ever returns the secret
 * read outside the workspace. Compared only with blind_find(), which is
 * not instrumented, so libFuzzer's comparison tracing cannot learn the
 * secret (and then write it into a workspace file itself). */
static char g_sentinel[64];
static size_t g_sentinel_len;
static char *g_passwd;
static size_t g_passwd_len;
static const struct files_limits LIMITS = {
        .max_file_bytes = 64 * KiB,
        .max_total_bytes = 1 * MiB,
        .max_entries = 256,
};

static void put_file(int dfd, const char *rel, const char *content, size_t len)
{
        int fd = openat(dfd, rel, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK(fd >= 0);
        CHECK(write_all(fd, content, len) == 0);
        close(fd);
}

#define PUT(dfd, rel, lit) put_file(dfd, rel, lit, sizeof(lit) - 1)

/* (Re)creates <tmp>/ws with its fixed contents and re-opens g_ws_fd. */
static void build_workspace(void)
{
        if (g_ws_fd >= 0)
                close(g_ws_fd);
        CHECK(rm_rf_at(g_tmp_fd, "ws") == 0);
        CHECK(mkdirat(g_tmp_fd, "ws", 0755) == 0);
        int dfd = openat(g_tmp_fd, "ws", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(dfd >= 0);
        PUT(dfd, "hello.txt", "hello world\n");
        PUT(dfd, "data.json", "{\"a\": [1, 2, 3]}\n");
        PUT(dfd, ".hidden", "secret-ish\n");
        CHECK(mkdirat(dfd, "dir", 0755) == 0);
        CHECK(mkdirat(dfd, "dir/sub", 0755) == 0);
        CHECK(mkdirat(dfd, "empty", 0755) == 0);
        PUT(dfd, "dir/a.py", "print('a')\n");
        PUT(dfd, "dir/sub/b.bin", "\xff\xfe\x00\x01binary");
        CHECK(symlinkat("/", dfd, "root_link") == 0);
        CHECK(symlinkat("/etc/passwd", dfd, "passwd_link") == 0);
        CHECK(symlinkat("..", dfd, "up_link") == 0);
        CHECK(symlinkat("../sentinel", dfd, "sentinel_link") == 0);
        CHECK(symlinkat(g_tmp, dfd, "tmp_abs_link") == 0);
        CHECK(symlinkat("does-not-exist", dfd, "dangling") == 0);
        CHECK(symlinkat("hello.txt", dfd, "inside_link") == 0);
        CHECK(symlinkat("../../..", dfd, "dir/sub/upup") == 0); /* to <tmp> */
        close(dfd);
        g_ws_fd = openat(g_tmp_fd, "ws", O_PATH | O_DIRECTORY | O_CLOEXEC);
        CHECK(g_ws_fd >= 0);
        /* Rebuilding touches <tmp> itself; that is our change, not a leak. */
        CHECK(fstat(g_tmp_fd, &g_tmp_st) == 0);
}

__attribute__((no_sanitize("coverage"))) static bool blind_find(const char *hay, size_t n, const char *needle,
                                                             size_t m)
{
        for (size_t i = 0; m && i + m <= n; i++) {
                size_t k = 0;
                while (k < m && hay[i + k] == needle[k])
                        k++;
                if (k == m)
                        return true;
        }
        return false;
}

static bool same_stat(const struct stat *a, const struct stat *b)
{
        return a->st_ino == b->st_ino && a->st_size == b->st_size && a->st_mode == b->st_mode &&
               a->st_nlink == b->st_nlink && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
               a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
               a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static void check_outside_untouched(void)
{
        struct stat st;
        CHECK(fstatat(g_tmp_fd, "sentinel", &st, AT_SYMLINK_NOFOLLOW) == 0);
        CHECK(same_stat(&st, &g_sentinel_st));
        char buf[sizeof(g_sentinel) + 16];
        int fd = openat(g_tmp_fd, "sentinel", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        CHECK(fd >= 0);
        ssize_t n = read(fd, buf, sizeof(buf));
        close(fd);
        CHECK(n == (ssize_t)g_sentinel_len && blind_find(buf, (size_t)n, g_sentinel, g_sentinel_len));

        CHECK(fstat(g_tmp_fd, &st) == 0);
        CHECK(same_stat(&st, &g_tmp_st));
        CHECK(stat("/etc/passwd", &st) == 0);
        CHECK(same_stat(&st, &g_passwd_st));

        /* Exactly "ws" and "sentinel" in <tmp>, and "ws" still a directory. */
        int dfd = openat(g_tmp_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(dfd >= 0);
        DIR *d = fdopendir(dfd);
        CHECK(d);
        struct dirent *de;
        int count = 0;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                CHECK(!strcmp(de->d_name, "ws") || !strcmp(de->d_name, "sentinel"));
                count++;
        }
        closedir(d);
        CHECK(count == 2);
        CHECK(fstatat(g_tmp_fd, "ws", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode));
}

int LLVMFuzzerInitialize(int *argc UNUSED, char ***argv UNUSED)
{
        __sanitizer_set_death_callback(fuzz_cleanup);
        const char *base = getenv("FUZZ_TMPDIR");
        if (!base)
                base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        snprintf(g_tmp, sizeof(g_tmp), "%s/sandboxd-fuzz-files-XXXXXX", base);
        CHECK(mkdtemp(g_tmp) != NULL);
        g_tmp_fd = open(g_tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(g_tmp_fd >= 0);
        int fd = openat(g_tmp_fd, "sentinel", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        CHECK(fd >= 0);
        unsigned char rnd[16];
        CHECK(getrandom(rnd, sizeof(rnd), 0) == (ssize_t)sizeof(rnd));
        g_sentinel_len = (size_t)snprintf(g_sentinel, sizeof(g_sentinel), "sentinel ");
        for (size_t i = 0; i < sizeof(rnd); i++)
                g_sentinel_len += (size_t)snprintf(g_sentinel + g_sentinel_len, sizeof(g_sentinel) - g_sentinel_len,
                                                   "%02x", rnd[i]);
        g_sentinel[g_sentinel_len++] = '\n';
        CHECK(write_all(fd, g_sentinel, g_sentinel_len) == 0);
        close(fd);
        build_workspace();
        CHECK(fstatat(g_tmp_fd, "sentinel", &g_sentinel_st, AT_SYMLINK_NOFOLLOW) == 0);
        CHECK(stat("/etc/passwd", &g_passwd_st) == 0);
        g_passwd = malloc((size_t)g_passwd_st.st_size + 1);
        CHECK(g_passwd);
        CHECK(read_file_small("/etc/passwd", g_passwd, (size_t)g_passwd_st.st_size + 1, &g_passwd_len) == 0);
        return 0;
}

/* Removes the temp dir: at exit, before a failed CHECK traps, and when a
 * sanitizer reports (the input is saved by libFuzzer, not needed here). */
__attribute__((destructor)) void fuzz_cleanup(void)
{
        if (g_tmp_fd >= 0 && g_tmp[0]) {
                rm_rf(g_tmp);
                g_tmp[0] = '\0';
        }
}

static void check_json_roundtrip(const json_t *j)
{
        char *text = json_dumps(j, HTTP_JSON_DUMP_FLAGS);
        CHECK(text);
        json_t *back = json_loads(text, JSON_ALLOW_NUL, NULL);
        CHECK(json_is_object(back));
        json_decref(back);
        free(text);
}

static void check_success(json_t *res, json_t *request)
{
        CHECK(json_is_object(res));
        CHECK(json_is_true(json_object_get(res, "success")));
        const char *path = json_string_value(json_object_get(res, "path"));
        CHECK(path);
        CHECK(strncmp(path, FILES_ROOT, strlen(FILES_ROOT)) == 0);
        CHECK(path[strlen(FILES_ROOT)] == '\0' || path[strlen(FILES_ROOT)] == '/');
        CHECK(strstr(path, "/../") == NULL && strstr(path, "//") == NULL);
        CHECK(json_is_string(json_object_get(res, "timestamp")));
        const char *op = json_string_value(json_object_get(request, "op"));
        CHECK(op);
        if (!strcmp(op, "read")) {
                json_t *content = json_object_get(res, "content");
                CHECK(json_is_string(content));
                /* Nothing read from outside: not the sentinel, not /etc/passwd
                 * (base64 reads share the confined open; only text is checked). */
                const char *text = json_string_value(content);
                size_t tlen = json_string_length(content);
                CHECK(!blind_find(text, tlen, g_sentinel, g_sentinel_len));
                CHECK(!(g_passwd_len > 16 && blind_find(text, tlen, g_passwd, g_passwd_len)));
                json_int_t size = json_integer_value(json_object_get(res, "size"));
                CHECK(size >= 0 && (uint64_t)size <= LIMITS.max_file_bytes);
        } else if (!strcmp(op, "list")) {
                json_t *files = json_object_get(res, "files");
                CHECK(json_is_array(files));
                CHECK((size_t)json_integer_value(json_object_get(res, "count")) == json_array_size(files));
                size_t i;
                json_t *f;
                json_array_foreach(files, i, f) {
                        const char *abs = json_string_value(json_object_get(f, "absolutePath"));
                        CHECK(abs && strncmp(abs, FILES_ROOT "/", strlen(FILES_ROOT) + 1) == 0);
                        CHECK(strstr(abs, "/../") == NULL);
                }
        } else if (!strcmp(op, "exists")) {
                CHECK(json_is_boolean(json_object_get(res, "exists")));
        } else if (!strcmp(op, "rename") || !strcmp(op, "move")) {
                const char *np = json_string_value(json_object_get(res, "newPath"));
                CHECK(np && strncmp(np, FILES_ROOT, strlen(FILES_ROOT)) == 0);
        }
        check_json_roundtrip(res);
}

static void check_failure(const struct http_response *res)
{
        static const int statuses[] = { 400, 403, 404, 409, 413, 500 };
        bool known = false;
        for (size_t i = 0; i < ARRAY_SIZE(statuses); i++)
                known |= res->status == statuses[i];
        CHECK(known);
        const json_t *body = res->json;
        CHECK(json_is_object(body));
        const char *code = json_string_value(json_object_get(body, "code"));
        CHECK(code && code[0]);
        CHECK(json_is_string(json_object_get(body, "message")));
        CHECK(json_is_object(json_object_get(body, "context")));
        CHECK(json_integer_value(json_object_get(body, "httpStatus")) == res->status);
        check_json_roundtrip(body);
}

static void run_one(json_t *request)
{
        static const char *const mutating[] = { "write", "mkdir", "delete", "rename", "move" };
        const char *op = json_string_value(json_object_get(request, "op"));
        for (size_t i = 0; op && i < ARRAY_SIZE(mutating); i++)
                g_dirty |= strcmp(op, mutating[i]) == 0;
        struct files_root root = { .fd = g_ws_fd, .limits = LIMITS, .uid = (unsigned)getuid(),
                                   .gid = (unsigned)getgid() };
        struct http_response res = { 0 };
        workers_files_on(&root, 1700000000000ULL, request, &res);
        if (res.status == 200)
                check_success(res.json, request);
        else
                check_failure(&res);
        json_decref(res.json);
        check_outside_untouched();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (g_dirty) {
                build_workspace();
                g_dirty = false;
        }
        /* The gateway parses /files bodies with validate_json_object(). */
        json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
        if (!root)
                return 0;
        if (json_is_array(root)) {
                size_t i;
                json_t *req;
                json_array_foreach(root, i, req) {
                        if (i >= 16)
                                break;
                        run_one(req);
                }
        } else {
                run_one(root);
        }
        json_decref(root);
        return 0;
}
