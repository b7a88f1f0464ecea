/* Attacks on the files API through the gateway's /files request
 * (src/api/workers/files.c on src/sandbox/files/): guest-planted symlinks
 * to /, /etc, .., the sentinel outside the workspace and /proc magic links
 * must never let a read, write, list, mkdir, delete or rename leave the
 * workspace, and nothing from outside may appear in any answer. */
#include "api/workers/files_json.h"

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
                        struct api_error err;
                        json_t *res = run(&w, R("{s:s,s:s,s:s}", "op", "read", "path", through_links[i],
                                                "encoding", enc ? "base64" : "utf-8"),
                                          &err);
                        if (res)
                                TAP_FAIL("read through '%s' succeeded", through_links[i]);
                        if (err.http_status != 403)
                                TAP_FAIL("read '%s': %d %s", through_links[i], err.http_status, err.message);
                        ASSERT_STREQ(sget(err.context, "errno"), "EACCES");
                        api_error_done(&err);
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
                struct api_error err;
                json_t *res = run(&w, R("{s:s,s:s,s:s}", "op", "write", "path", through_links[i], "content",
                                        "PWNED"),
                                  &err);
                if (res)
                        TAP_FAIL("write through '%s' succeeded", through_links[i]);
                ASSERT_EQ(err.http_status, 403);
                api_error_done(&err);
        }
        /* Writes into directories behind links. */
        static const char *dirs[] = { "rootlink/tmp/sbx-pwned", "up/tmp/sbx-pwned", "parent/pwned",
                                      "inner/dotdot/parent/pwned" };
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                struct api_error err;
                json_t *res = run(&w, R("{s:s,s:s,s:s}", "op", "write", "path", dirs[i], "content", "PWNED"),
                                  &err);
                ASSERT_TRUE(res == NULL);
                ASSERT_EQ(err.http_status, 403);
                api_error_done(&err);
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
                struct api_error err;
                json_t *res = run(&w, R("{s:s,s:s,s:b,s:b}", "op", "list", "path", dirs[i], "recursive", 1,
                                        "includeHidden", 1),
                                  &err);
                if (res)
                        TAP_FAIL("list through '%s' succeeded", dirs[i]);
                ASSERT_EQ(err.http_status, 403);
                api_error_done(&err);
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
                        struct api_error err;
                        json_t *res = run(&w, R("{s:s,s:s,s:b}", "op", "mkdir", "path", mk[i], "recursive", rec),
                                          &err);
                        if (res)
                                TAP_FAIL("mkdir through '%s' succeeded", mk[i]);
                        /* 403, not the mkdir FILESYSTEM_ERROR override. */
                        ASSERT_EQ(err.http_status, 403);
                        ASSERT_STREQ(err.code, "PERMISSION_DENIED");
                        api_error_done(&err);
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
                struct api_error err;
                json_t *res = run(&w, R("{s:s,s:s,s:b,s:b}", "op", "delete", "path", del[i], "recursive", 1,
                                        "force", 1),
                                  &err);
                if (res)
                        TAP_FAIL("delete through '%s' succeeded", del[i]);
                ASSERT_EQ(err.http_status, 403);
                api_error_done(&err);
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
                struct api_error err;
                json_t *res = run(&w, R("{s:s,s:s,s:s}", "op", "rename", "path", pairs[i][0], "newPath",
                                        pairs[i][1]),
                                  &err);
                if (res)
                        TAP_FAIL("rename '%s' → '%s' succeeded", pairs[i][0], pairs[i][1]);
                ASSERT_EQ(err.http_status, 403);
                api_error_done(&err);
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

