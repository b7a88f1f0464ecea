/* Unit tests for the typed files operations (src/sandbox/files/): path
 * normalisation, raw bytes in and out (no encodings), the domain error of
 * each failure (reason, errno, op, details in order), usage totals and
 * confinement through planted symlinks. The JSON request and its statuses
 * are tested in tests/unit/api/workers/test_files_*.c. */
#include "sandbox/files_fixture.h"

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

/* ---- typed operations ------------------------------------------------------ */

/* Expects a failure r of reason with errno detail errno_name (NULL: none)
 * and detail path; err is reset. */
static void expect_fail(int r, struct err *err, enum err_reason reason, const char *op, const char *path,
                        const char *errno_name)
{
        if (r >= 0)
                TAP_FAIL("expected %s, got success", err_reason_name(reason));
        if (err->reason != reason)
                TAP_FAIL("reason %s, want %s (%s)", err_reason_name(err->reason), err_reason_name(reason), err->msg);
        ASSERT_TRUE(err->msg[0] != '\0');
        if (errno_name) {
                ASSERT_STREQ(err->op, op);
                ASSERT_STREQ(err_detail_get(err, "operation"), op);
                ASSERT_STREQ(err_detail_get(err, "path"), path);
                ASSERT_STREQ(err_detail_get(err, "errno"), errno_name);
                /* errno is always the last detail, path the first. */
                ASSERT_STREQ(err->details[0].key, "path");
                ASSERT_STREQ(err->details[err->ndetails - 1].key, "errno");
        }
        err_done(err);
}

TEST(typed_raw_bytes_roundtrip)
{
        struct ws w;
        ws_init(&w);
        struct files_root root = root_of(&w);
        struct err err = { 0 };
        unsigned char bin[300];
        for (size_t i = 0; i < sizeof(bin); i++)
                bin[i] = (unsigned char)(i * 7);
        ASSERT_OK(files_write(&root, "dir-less.bin", bin, sizeof(bin), &err));
        ASSERT_EQ(err.reason, ERR_OK);
        struct files_blob blob = { 0 };
        ASSERT_OK(files_read(&root, "/workspace/dir-less.bin", &blob, &err));
        ASSERT_EQ(blob.len, sizeof(bin));
        ASSERT_TRUE(memcmp(blob.data, bin, sizeof(bin)) == 0);
        ASSERT_EQ(blob.data[blob.len], 0); /* NUL-terminated beyond len */
        ASSERT_TRUE(files_is_binary(blob.data, blob.len));
        files_blob_done(&blob);
        ASSERT_TRUE(blob.data == NULL);

        ASSERT_OK(files_write(&root, "empty", "", 0, &err));
        ASSERT_OK(files_read(&root, "empty", &blob, &err));
        ASSERT_EQ(blob.len, 0);
        ASSERT_TRUE(blob.data != NULL && blob.data[0] == 0);
        files_blob_done(&blob);

        ASSERT_TRUE(!files_is_binary("héllo", strlen("héllo")));
        ASSERT_TRUE(files_is_binary("a\0b", 3));
        ASSERT_STREQ(files_mime_type("/workspace/x.PNG", true), "image/png");
        ASSERT_STREQ(files_mime_type("/workspace/x", true), "application/octet-stream");
        ASSERT_STREQ(files_mime_type("/workspace/x", false), "text/plain");
}

/* files_put_fd: exactly len bytes of a host file, from its offset; a
 * source that ends early writes nothing (the old file stays). */
TEST(typed_put_from_fd)
{
        struct ws w;
        ws_init(&w);
        struct files_root root = root_of(&w);
        struct err err = { 0 };
        FILE *src = tmpfile();
        ASSERT_TRUE(src != NULL);
        ASSERT_EQ(fwrite("0123456789", 1, 10, src), 10);
        fflush(src);
        int fd = fileno(src);
        ASSERT_EQ(lseek(fd, 2, SEEK_SET), 2);
        ASSERT_OK(files_put_fd(&root, "in/part.bin", fd, 5, FILES_RECURSIVE, &err));
        size_t len = 0;
        char *got = slurp(host(&w, "in/part.bin"), &len);
        ASSERT_EQ(len, 5);
        ASSERT_TRUE(memcmp(got, "23456", 5) == 0);
        ASSERT_EQ(lseek(fd, 8, SEEK_SET), 8);
        ASSERT_TRUE(files_put_fd(&root, "in/part.bin", fd, 5, 0, &err) < 0);
        ASSERT_EQ(err.reason, ERR_FILESYSTEM);
        err_done(&err);
        got = slurp(host(&w, "in/part.bin"), &len);
        ASSERT_TRUE(len == 5 && memcmp(got, "23456", 5) == 0);
        fclose(src);
}

TEST(typed_ops_and_list)
{
        struct ws w;
        ws_init(&w);
        struct files_root root = root_of(&w);
        struct err err = { 0 };
        ASSERT_OK(files_mkdir(&root, "a/b", FILES_RECURSIVE, &err));
        ASSERT_OK(files_write(&root, "a/b/f", "xyz", 3, &err));
        ASSERT_OK(files_write(&root, "a/.h", "h", 1, &err));
        ASSERT_OK(files_rename(&root, "a/b/f", "a/g", &err));
        ASSERT_OK(files_move(&root, "a/g", "a/b/g", &err));
        bool exists = false;
        ASSERT_OK(files_exists(&root, "a/b/g", &exists, &err));
        ASSERT_TRUE(exists);
        ASSERT_OK(files_exists(&root, "a/b/f", &exists, &err));
        ASSERT_TRUE(!exists);

        struct files_list l = { 0 };
        ASSERT_OK(files_list(&root, "a", FILES_RECURSIVE, &l, &err));
        ASSERT_EQ(l.n, 2);
        ASSERT_STREQ(l.v[0].rel, "b");
        ASSERT_TRUE(l.v[0].dir);
        ASSERT_STREQ(l.v[1].rel, "b/g");
        ASSERT_TRUE(!l.v[1].dir);
        ASSERT_EQ(l.v[1].size, 3);
        files_list_done(&l);
        ASSERT_OK(files_list(&root, "/workspace", FILES_RECURSIVE | FILES_INCLUDE_HIDDEN, &l, &err));
        ASSERT_EQ(l.n, 4);
        ASSERT_STREQ(l.v[1].rel, "a/.h");
        files_list_done(&l);

        ASSERT_OK(files_delete(&root, "a", FILES_RECURSIVE, &err));
        ASSERT_EQ(access(host(&w, "a"), F_OK), -1);
        ASSERT_OK(files_delete(&root, "a/nope", FILES_FORCE, &err));
        ASSERT_EQ(err.reason, ERR_OK);
}

TEST(typed_errors_reasons_and_details)
{
        struct ws w;
        ws_init(&w);
        w.lim.max_file_bytes = 4;
        struct files_root root = root_of(&w);
        struct err err = { 0 };
        struct files_blob blob = { 0 };
        bool b;
        expect_fail(files_read(&root, "nope", &blob, &err), &err, ERR_NOT_FOUND, FILES_OP_READ,
                    "/workspace/nope", "ENOENT");
        ASSERT_TRUE(blob.data == NULL);
        expect_fail(files_read(&root, "../x", &blob, &err), &err, ERR_PERMISSION, FILES_OP_READ, "../x", "EACCES");
        expect_fail(files_exists(&root, "/etc", &b, &err), &err, ERR_PERMISSION, FILES_OP_STAT, "/etc", "EACCES");
        expect_fail(files_read(&root, "bad\xff", &blob, &err), &err, ERR_INVALID, NULL, NULL, NULL);
        expect_fail(files_write(&root, "/workspace", "x", 1, &err), &err, ERR_IS_DIR, FILES_OP_WRITE, "/workspace",
                    "EISDIR");

        /* maxSize and actualSize sit between the path details and errno. */
        int r = files_write(&root, "big", "12345", 5, &err);
        ASSERT_EQ(r, -EFBIG);
        ASSERT_EQ(err.reason, ERR_TOO_LARGE);
        ASSERT_EQ(err.errnum, EFBIG);
        static const char *keys[] = { "path", "operation", "maxSize", "actualSize", "errno" };
        ASSERT_EQ(err.ndetails, ARRAY_SIZE(keys));
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
                ASSERT_STREQ(err.details[i].key, keys[i]);
        ASSERT_TRUE(err.details[2].number && err.details[3].number);
        ASSERT_STREQ(err_detail_get(&err, "maxSize"), "4");
        ASSERT_STREQ(err_detail_get(&err, "actualSize"), "5");
        err_done(&err);

        /* Every failed mkdir is a file system error, except permission and space. */
        put_file(&w, "f", "x", 1);
        expect_fail(files_mkdir(&root, "f", 0, &err), &err, ERR_FILESYSTEM, FILES_OP_MKDIR, "/workspace/f", "EEXIST");
        expect_fail(files_mkdir(&root, "x/y", 0, &err), &err, ERR_FILESYSTEM, FILES_OP_MKDIR, "/workspace/x/y",
                    "ENOENT");
        ASSERT_OK(symlink("/", host(&w, "link")));
        expect_fail(files_mkdir(&root, "link/tmp/x", FILES_RECURSIVE, &err), &err, ERR_PERMISSION, FILES_OP_MKDIR,
                    "/workspace/link/tmp/x", "EACCES");
        /* A symlink refused by confinement (ELOOP) is shown as EACCES. */
        r = files_read(&root, "link/etc/passwd", &blob, &err);
        ASSERT_EQ(r, -EACCES);
        ASSERT_EQ(err.errnum, EACCES);
        ASSERT_TRUE(strstr(err.msg, "does not follow symbolic links") != NULL);
        err_done(&err);

        /* rename: newPath after operation; the move/rename names differ. */
        put_dir(&w, "d");
        r = files_move(&root, "f", "d", &err);
        ASSERT_EQ(err.reason, ERR_IS_DIR);
        ASSERT_STREQ(err.op, FILES_OP_MOVE);
        ASSERT_STREQ(err.details[2].key, "newPath");
        ASSERT_STREQ(err_detail_get(&err, "newPath"), "/workspace/d");
        err_done(&err);
        expect_fail(files_rename(&root, "nothere", "z", &err), &err, ERR_NOT_FOUND, FILES_OP_RENAME,
                    "/workspace/nothere", "ENOENT");

        w.lim = (struct files_limits){ .max_entries = 3 };
        root = root_of(&w);
        expect_fail(files_write(&root, "g", "", 0, &err), &err, ERR_NO_SPACE, FILES_OP_WRITE, "/workspace/g",
                    "ENOSPC");
        expect_fail(files_list(&root, "f", 0, &(struct files_list){ 0 }, &err), &err, ERR_NOT_DIR, FILES_OP_LIST,
                    "/workspace/f", "ENOTDIR");
        expect_fail(files_delete(&root, "d", 0, &err), &err, ERR_IS_DIR, FILES_OP_DELETE, "/workspace/d", "EISDIR");
        expect_fail(files_delete(&root, "/workspace", FILES_RECURSIVE | FILES_FORCE, &err), &err, ERR_PERMISSION,
                    FILES_OP_DELETE, "/workspace", "EACCES");
        ASSERT_OK(access(w.root, F_OK));
}

TEST(typed_confinement)
{
        struct ws w;
        ws_init(&w);
        plant_links(&w);
        struct files_root root = root_of(&w);
        struct err err = { 0 };
        struct files_blob blob = { 0 };
        static const char *paths[] = { "sent", "abs-sent", "magic", "up/sentinel", "inner/dotdot/sent",
                                       "inner/sent2", "passwd" };
        for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
                if (files_read(&root, paths[i], &blob, &err) == 0)
                        TAP_FAIL("read through '%s' succeeded", paths[i]);
                ASSERT_EQ(err.reason, ERR_PERMISSION);
                ASSERT_TRUE(strstr(err.msg, "TOPSECRET") == NULL);
                err_done(&err);
                if (files_write(&root, paths[i], "PWNED", 5, &err) == 0)
                        TAP_FAIL("write through '%s' succeeded", paths[i]);
                ASSERT_EQ(err.reason, ERR_PERMISSION);
                err_done(&err);
        }
        /* Not even a link that stays inside the workspace is followed. */
        put_file(&w, "inner/f", "inside", 6);
        ASSERT_OK(symlink("inner/f", host(&w, "in_link")));
        ASSERT_OK(symlink("inner", host(&w, "in_dir")));
        ASSERT_EQ(files_read(&root, "in_link", &blob, &err), -EACCES);
        ASSERT_EQ(err.reason, ERR_PERMISSION);
        err_done(&err);
        ASSERT_EQ(files_read(&root, "in_dir/f", &blob, &err), -EACCES);
        err_done(&err);
        ASSERT_OK(files_read(&root, "inner/f", &blob, &err));
        files_blob_done(&blob);
        assert_sentinel_intact(&w);
}

TEST(typed_fail_helper)
{
        struct err err = { 0 };
        ASSERT_EQ(files_fail(&err, FILES_OP_WRITE, "/workspace/x", EINVAL, "Invalid base64 content"), -EINVAL);
        ASSERT_EQ(err.reason, ERR_FILESYSTEM);
        ASSERT_STREQ(err.msg, "Invalid base64 content");
        ASSERT_STREQ(err.op, FILES_OP_WRITE);
        ASSERT_EQ(err.ndetails, 3);
        ASSERT_STREQ(err_detail_get(&err, "path"), "/workspace/x");
        ASSERT_STREQ(err_detail_get(&err, "errno"), "EINVAL");
        err_done(&err);
        files_fail(&err, FILES_OP_READ, "/workspace/y", ENOENT, NULL);
        ASSERT_EQ(err.reason, ERR_NOT_FOUND);
        ASSERT_STREQ(err.msg, "No such file or directory: /workspace/y");
        err_done(&err);
}
