/* Unit tests for the /files request of the gateway (src/api/workers/files.c)
 * through workers_files_on() on a real temp workspace: request validation,
 * response shapes, content encodings, and every error the files API answers
 * with its status, code, context and operation (the domain error mapped by
 * api/workers/errors.c). Attacks through planted symlinks are in
 * test_files_attacks.c, the typed operations in tests/unit/sandbox/. */
#include <openssl/evp.h>

#include "api/workers/errors.h"
#include "api/workers/files_json.h"

/* ---- request validation ------------------------------------------------- */

static void expect_validation(struct ws *w, json_t *req, const char *message)
{
        struct api_error err;
        json_t *res = run(w, req, &err);
        ASSERT_TRUE(res == NULL);
        ASSERT_EQ(err.http_status, 400);
        ASSERT_STREQ(err.code, "VALIDATION_FAILED");
        if (message)
                ASSERT_STREQ(err.message, message);
        api_error_done(&err);
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
                struct api_error err;
                expect_err(&w, R("{s:s,s:s,s:b}", "op", ops[i], "path", "/workspace/../etc/passwd",
                                 "recursive", 1),
                           403, "PERMISSION_DENIED", "/workspace/../etc/passwd", opnames[i], "EACCES", &err);
                ASSERT_TRUE(strstr(err.message, "escapes /workspace") != NULL);
                api_error_done(&err);
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
        struct api_error err;
        expect_err(&w, R("{s:s,s:s,s:s}", "op", "write", "path", "big", "content", "0123456789A"), 413,
                   "FILE_TOO_LARGE", "/workspace/big", "file.write", "EFBIG", &err);
        ASSERT_EQ(iget(err.context, "maxSize"), 10);
        ASSERT_EQ(iget(err.context, "actualSize"), 11);
        api_error_done(&err);
        ASSERT_EQ(access(host(&w, "big"), F_OK), -1); /* nothing written */
        /* Size counts decoded bytes for base64. */
        expect_err(&w, R("{s:s,s:s,s:s,s:s}", "op", "write", "path", "big", "content", "AAAAAAAAAAAAAAAA",
                         "encoding", "base64"),
                   413, "FILE_TOO_LARGE", "/workspace/big", "file.write", "EFBIG", &err);
        ASSERT_EQ(iget(err.context, "actualSize"), 12);
        api_error_done(&err);
        json_decref(ok(&w, R("{s:s,s:s,s:s}", "op", "write", "path", "fits", "content", "0123456789")));

        /* Reads are bounded by the same limit (the guest may write more). */
        put_file(&w, "guest-big", "0123456789ABCDEF", 16);
        expect_err(&w, R("{s:s,s:s}", "op", "read", "path", "guest-big"), 413, "FILE_TOO_LARGE",
                   "/workspace/guest-big", "file.read", "EFBIG", &err);
        ASSERT_EQ(iget(err.context, "actualSize"), 16);
        api_error_done(&err);
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
        struct api_error err;
        expect_err(&w, R("{s:s,s:s}", "op", "delete", "path", "/workspace/d"), 400, "IS_DIRECTORY",
                   "/workspace/d", "file.delete", "EISDIR", &err);
        ASSERT_STREQ(err.message, "Cannot delete directory with deleteFile() at '/workspace/d'. "
                                  "Pass { recursive: true } to delete a directory.");
        api_error_done(&err);
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
        struct api_error err;
        expect_err(&w, R("{s:s,s:s,s:s}", "op", "rename", "path", "d", "newPath", "full"), 500,
                   "FILESYSTEM_ERROR", "/workspace/d", "file.rename", "ENOTEMPTY", &err);
        ASSERT_STREQ(sget(err.context, "newPath"), "/workspace/full");
        api_error_done(&err);
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

/* ---- error mapping --------------------------------------------------------- */

/* Every status and code the files API answers, reached through the request
 * function, with the envelope's operation and the context in the order the
 * reference sends it. */
TEST(error_mapping_every_code)
{
        struct ws w;
        ws_init(&w);
        w.lim.max_file_bytes = 4;
        put_dir(&w, "d");
        put_file(&w, "f", "x", 1);
        static const struct {
                const char *req;
                int status;
                const char *code, *operation, *context;
        } cases[] = {
                { "{\"op\":\"chmod\",\"path\":\"f\"}", 400, "VALIDATION_FAILED", NULL, "{}" },
                { "{\"op\":\"read\",\"path\":\"../x\"}", 403, "PERMISSION_DENIED", "file.read",
                  "{\"path\":\"../x\",\"operation\":\"file.read\",\"errno\":\"EACCES\"}" },
                { "{\"op\":\"read\",\"path\":\"nope\"}", 404, "FILE_NOT_FOUND", "file.read",
                  "{\"path\":\"/workspace/nope\",\"operation\":\"file.read\",\"errno\":\"ENOENT\"}" },
                { "{\"op\":\"write\",\"path\":\"big\",\"content\":\"12345\"}", 413, "FILE_TOO_LARGE", "file.write",
                  "{\"path\":\"/workspace/big\",\"operation\":\"file.write\",\"maxSize\":4,\"actualSize\":5,"
                  "\"errno\":\"EFBIG\"}" },
                { "{\"op\":\"read\",\"path\":\"d\"}", 400, "IS_DIRECTORY", "file.read",
                  "{\"path\":\"/workspace/d\",\"operation\":\"file.read\",\"errno\":\"EISDIR\"}" },
                { "{\"op\":\"list\",\"path\":\"f\"}", 400, "NOT_DIRECTORY", "directory.list",
                  "{\"path\":\"/workspace/f\",\"operation\":\"directory.list\",\"errno\":\"ENOTDIR\"}" },
                { "{\"op\":\"move\",\"path\":\"f\",\"newPath\":\"d\"}", 400, "IS_DIRECTORY", "file.move",
                  "{\"path\":\"/workspace/f\",\"operation\":\"file.move\",\"newPath\":\"/workspace/d\","
                  "\"errno\":\"EISDIR\"}" },
                { "{\"op\":\"mkdir\",\"path\":\"d\"}", 500, "FILESYSTEM_ERROR", "directory.create",
                  "{\"path\":\"/workspace/d\",\"operation\":\"directory.create\",\"errno\":\"EEXIST\"}" },
                { "{\"op\":\"write\",\"path\":\"b\",\"content\":\"!\",\"encoding\":\"base64\"}", 500,
                  "FILESYSTEM_ERROR", "file.write",
                  "{\"path\":\"/workspace/b\",\"operation\":\"file.write\",\"errno\":\"EINVAL\"}" },
                { "{\"op\":\"write\",\"path\":\"/workspace\",\"content\":\"!\",\"encoding\":\"base64\"}", 400,
                  "IS_DIRECTORY", "file.write",
                  "{\"path\":\"/workspace\",\"operation\":\"file.write\",\"errno\":\"EISDIR\"}" },
                { "{\"op\":\"write\",\"path\":\"../e\",\"content\":\"!\",\"encoding\":\"base64\"}", 403,
                  "PERMISSION_DENIED", "file.write",
                  "{\"path\":\"../e\",\"operation\":\"file.write\",\"errno\":\"EACCES\"}" },
                { "{\"op\":\"rename\",\"path\":\"a\",\"newPath\":\"\\u0000\"}", 400, "VALIDATION_FAILED", NULL,
                  "{}" },
                /* The source's escape is reported before newPath is looked at. */
                { "{\"op\":\"rename\",\"path\":\"../a\",\"newPath\":\"b\\u0000\"}", 403, "PERMISSION_DENIED",
                  "file.rename", "{\"path\":\"../a\",\"operation\":\"file.rename\",\"errno\":\"EACCES\"}" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                json_t *req = json_loads(cases[i].req, JSON_ALLOW_NUL, NULL);
                struct api_error err;
                json_t *res = run(&w, req, &err);
                if (res)
                        TAP_FAIL("%s: success", cases[i].req);
                if (err.http_status != cases[i].status || strcmp(err.code, cases[i].code) != 0)
                        TAP_FAIL("%s: %d %s, want %d %s (%s)", cases[i].req, err.http_status, err.code,
                                 cases[i].status, cases[i].code, err.message);
                if ((err.operation == NULL) != (cases[i].operation == NULL) ||
                    (err.operation && strcmp(err.operation, cases[i].operation) != 0))
                        TAP_FAIL("%s: operation %s", cases[i].req, err.operation ? err.operation : "(none)");
                char *ctx = json_dumps(err.context, JSON_COMPACT);
                if (strcmp(ctx, cases[i].context) != 0)
                        TAP_FAIL("%s: context %s, want %s", cases[i].req, ctx, cases[i].context);
                free(ctx);
                api_error_done(&err);
        }
        ASSERT_EQ(access(host(&w, "big"), F_OK), -1);
}

/* The codes no request above can reach in a healthy workspace, mapped
 * from the domain error the typed operations would report. */
TEST(error_mapping_domain_reasons)
{
        static const struct {
                int errnum;
                const char *op;
                int status;
                const char *code;
        } cases[] = {
                { EEXIST, FILES_OP_WRITE, 409, "FILE_EXISTS" },   { ENOSPC, FILES_OP_WRITE, 500, "NO_SPACE" },
                { EDQUOT, FILES_OP_MKDIR, 500, "NO_SPACE" },      { EPERM, FILES_OP_DELETE, 403, "PERMISSION_DENIED" },
                { ELOOP, FILES_OP_READ, 403, "PERMISSION_DENIED" }, { EIO, FILES_OP_LIST, 500, "FILESYSTEM_ERROR" },
                { ENOMEM, FILES_OP_READ, 500, "FILESYSTEM_ERROR" }, { E2BIG, FILES_OP_LIST, 500, "FILESYSTEM_ERROR" },
                { ENOTDIR, FILES_OP_MKDIR, 500, "FILESYSTEM_ERROR" }, { ENOENT, FILES_OP_MKDIR, 500, "FILESYSTEM_ERROR" },
                { EACCES, FILES_OP_MKDIR, 403, "PERMISSION_DENIED" }, { ENOENT, FILES_OP_STAT, 404, "FILE_NOT_FOUND" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                struct err e = { 0 };
                files_fail(&e, cases[i].op, "/workspace/x", cases[i].errnum, NULL);
                struct http_response res = { 0 };
                workers_error_from(&res, &e);
                if (res.status != cases[i].status)
                        TAP_FAIL("%s %s: status %d, want %d", cases[i].op, strerrorname_np(cases[i].errnum),
                                 res.status, cases[i].status);
                ASSERT_STREQ(json_string_value(json_object_get(res.json, "code")), cases[i].code);
                ASSERT_STREQ(json_string_value(json_object_get(res.json, "operation")), cases[i].op);
                json_decref(res.json);
                err_done(&e);
        }
}
