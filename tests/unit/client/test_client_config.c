/* Where the client finds its server and key: flags > env > config file >
 * the local default (client.h). Each test runs in its own forked process,
 * so setenv stays local to it. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/client.h"
#include "tap.h"

/* A config file with text in a fresh temp dir; the env points at it. */
static void write_config(const char *text)
{
        char dir[] = "/tmp/sandboxd-client-XXXXXX";
        ASSERT_NOT_NULL(mkdtemp(dir));
        char path[256];
        snprintf(path, sizeof(path), "%s/client.conf", dir);
        FILE *f = fopen(path, "w");
        ASSERT_NOT_NULL(f);
        fputs(text, f);
        fclose(f);
        setenv("SANDBOXD_CLIENT_CONFIG", path, 1);
}

static void clean_env(void)
{
        unsetenv("SANDBOXD_URL");
        unsetenv("SANDBOXD_API_KEY");
        unsetenv("SANDBOX_API_KEY");
        setenv("SANDBOXD_CLIENT_CONFIG", "/nonexistent/client.conf", 1);
}

TEST(default_is_the_local_server)
{
        struct client_config cfg;
        struct err err = { 0 };
        clean_env();
        ASSERT_OK(client_config_resolve(&cfg, NULL, NULL, &err));
        ASSERT_STREQ(cfg.url, CLIENT_DEFAULT_URL);
        ASSERT_STREQ(cfg.key, "");
        ASSERT_STREQ(cfg.source, "default");
}

TEST(file_then_env_then_flags)
{
        struct client_config cfg;
        struct err err = { 0 };
        clean_env();
        write_config("# comment\nurl = http://file:1\n\nkey = from-file\n");
        ASSERT_OK(client_config_resolve(&cfg, NULL, NULL, &err));
        ASSERT_STREQ(cfg.url, "http://file:1");
        ASSERT_STREQ(cfg.key, "from-file");
        setenv("SANDBOX_API_KEY", "bridge-name", 1);
        ASSERT_OK(client_config_resolve(&cfg, NULL, NULL, &err));
        ASSERT_STREQ(cfg.key, "bridge-name");
        setenv("SANDBOXD_API_KEY", "ours", 1);
        setenv("SANDBOXD_URL", "http://env:2", 1);
        ASSERT_OK(client_config_resolve(&cfg, NULL, NULL, &err));
        ASSERT_STREQ(cfg.url, "http://env:2");
        ASSERT_STREQ(cfg.key, "ours");
        ASSERT_STREQ(cfg.source, "env");
        ASSERT_OK(client_config_resolve(&cfg, "https://flag:3", "flagkey", &err));
        ASSERT_STREQ(cfg.url, "https://flag:3");
        ASSERT_STREQ(cfg.key, "flagkey");
        ASSERT_STREQ(cfg.source, "flag");
}

TEST(bad_file_and_bad_url_are_errors)
{
        struct client_config cfg;
        struct err err = { 0 };
        clean_env();
        write_config("colour = blue\n");
        ASSERT_TRUE(client_config_resolve(&cfg, NULL, NULL, &err) < 0);
        ASSERT_TRUE(strstr(err.msg, "unknown key") != NULL);
        err_done(&err);
        write_config("no equals sign\n");
        ASSERT_TRUE(client_config_resolve(&cfg, NULL, NULL, &err) < 0);
        err_done(&err);
        clean_env();
        ASSERT_TRUE(client_config_resolve(&cfg, "ftp://x", NULL, &err) < 0);
        ASSERT_TRUE(strstr(err.msg, "http://") != NULL);
        err_done(&err);
}

TEST(escape_path)
{
        char out[64];
        ASSERT_OK(client_escape_path("/a b/ü?#%", out, sizeof(out)));
        ASSERT_STREQ(out, "/a%20b/%C3%BC%3F%23%25");
        ASSERT_TRUE(client_escape_path("xxxxxxxxxx", out, 5) < 0);
}

TEST(no_server_is_unavailable)
{
        struct client_config cfg = { .url = "http://127.0.0.1:1" };
        struct client *c;
        struct client_reply r;
        struct err err = { 0 };
        ASSERT_OK(client_new(&cfg, &c));
        ASSERT_TRUE(client_json(c, "GET", "/health", NULL, &r, &err) < 0);
        ASSERT_EQ(err.reason, ERR_UNAVAILABLE);
        err_done(&err);
        client_reply_clear(&r);
        client_free(c);
}
