/* What a client's /mount request may put on s3fs's command line and where
 * in the jail (src/sandbox/mount.c, its statics included): path
 * normalisation and confinement, bucket names, endpoints and their
 * provider flag, the s3fs option allowlist, overlapping mounts. */
#include "../../../src/sandbox/mount.c"

#include "tap.h"

static const char *norm(const char *in)
{
        static char out[SBX_MOUNT_PATH_MAX];
        return sbx_mount_path_normalize(in, out, sizeof(out)) == 0 ? out : "(invalid)";
}

TEST(mount_path_normalize)
{
        ASSERT_STREQ(norm("/workspace/data"), "/workspace/data");
        ASSERT_STREQ(norm("/workspace//./data/"), "/workspace/data");
        ASSERT_STREQ(norm("/a/b/../c"), "/a/c");
        ASSERT_STREQ(norm("/../../x"), "/x");
        ASSERT_STREQ(norm("/workspace/.."), "/");
        ASSERT_STREQ(norm("/"), "/");
        ASSERT_STREQ(norm("relative"), "(invalid)");
        ASSERT_STREQ(norm(""), "(invalid)");
        char long_comp[300];
        memset(long_comp, 'a', sizeof(long_comp) - 1);
        long_comp[0] = '/';
        long_comp[sizeof(long_comp) - 1] = '\0';
        ASSERT_STREQ(norm(long_comp), "(invalid)");
        char small[8];
        ASSERT_EQ(sbx_mount_path_normalize("/abcdefgh", small, sizeof(small)), -EINVAL);
}

static bool place_ok(const char *path)
{
        struct err e = { 0 };
        bool ok = check_place(path, &e) == 0;
        err_done(&e);
        return ok;
}

TEST(mount_places)
{
        ASSERT_TRUE(place_ok("/workspace/data"));
        ASSERT_TRUE(place_ok("/workspace/a/b"));
        ASSERT_TRUE(place_ok("/mnt"));
        ASSERT_TRUE(place_ok("/mnt/data"));
        ASSERT_TRUE(place_ok("/data"));
        ASSERT_TRUE(place_ok("/usrdata"));
        ASSERT_FALSE(place_ok("/"));
        ASSERT_FALSE(place_ok("/workspace"));
        ASSERT_FALSE(place_ok("/usr"));
        ASSERT_FALSE(place_ok("/usr/local/bin"));
        ASSERT_FALSE(place_ok("/etc/x"));
        ASSERT_FALSE(place_ok("/tmp/x"));
        ASSERT_FALSE(place_ok("/proc"));
        ASSERT_FALSE(place_ok("/opt/sandboxd"));
        ASSERT_FALSE(place_ok("/.sbx/ws"));
        ASSERT_FALSE(place_ok("/.old"));
}

TEST(mount_bucket_names)
{
        ASSERT_TRUE(bucket_valid("bkt"));
        ASSERT_TRUE(bucket_valid("a"));
        ASSERT_TRUE(bucket_valid("my.bucket-1"));
        ASSERT_FALSE(bucket_valid(""));
        ASSERT_FALSE(bucket_valid("Upper"));
        ASSERT_FALSE(bucket_valid("-ab"));
        ASSERT_FALSE(bucket_valid("ab."));
        ASSERT_FALSE(bucket_valid("a:b"));
        ASSERT_FALSE(bucket_valid("a,b"));
        char b[65];
        memset(b, 'a', 64);
        b[64] = '\0';
        ASSERT_FALSE(bucket_valid(b));
        b[63] = '\0';
        ASSERT_TRUE(bucket_valid(b));
}

static const char *provider(const char *url)
{
        static char host[256];
        return endpoint_host(url, host, sizeof(host)) == 0 ? provider_opt(host) : "(invalid)";
}

TEST(mount_endpoints_and_providers)
{
        ASSERT_STREQ(provider("https://acc.r2.cloudflarestorage.com"), "nomixupload");
        ASSERT_STREQ(provider("https://s3.eu-west-1.amazonaws.com/"), "");
        ASSERT_STREQ(provider("https://STORAGE.googleapis.com"), "");
        ASSERT_STREQ(provider("http://127.0.0.1:9000"), "use_path_request_style");
        ASSERT_STREQ(provider("http://[::1]:9000/"), "use_path_request_style");
        ASSERT_STREQ(provider("http://evil.amazonaws.com.example.org"), "use_path_request_style");
        ASSERT_STREQ(provider("ftp://h"), "(invalid)");
        ASSERT_STREQ(provider("h:9000"), "(invalid)");
        ASSERT_STREQ(provider("http://"), "(invalid)");
        ASSERT_STREQ(provider("http://h,allow_other"), "(invalid)");
        ASSERT_STREQ(provider("http://u:p@h"), "(invalid)");
        ASSERT_STREQ(provider("http://h/a b"), "(invalid)");
}

TEST(mount_option_allowlist)
{
        ASSERT_TRUE(option_allowed("nomultipart"));
        ASSERT_TRUE(option_allowed("retries=3"));
        ASSERT_TRUE(option_allowed("endpoint=eu-west-1"));
        ASSERT_TRUE(option_allowed("storage_class=STANDARD_IA"));
        ASSERT_FALSE(option_allowed("retries"));
        ASSERT_FALSE(option_allowed("retries="));
        ASSERT_FALSE(option_allowed("nomultipart=1"));
        ASSERT_FALSE(option_allowed("passwd_file=/etc/shadow"));
        ASSERT_FALSE(option_allowed("allow_other"));
        ASSERT_FALSE(option_allowed("uid=0"));
        ASSERT_FALSE(option_allowed("url=http://x"));
        ASSERT_FALSE(option_allowed("use_cache=/tmp"));
        ASSERT_FALSE(option_allowed("retries=1,allow_other"));
        ASSERT_FALSE(option_allowed("endpoint=../x"));
        ASSERT_FALSE(option_allowed("endpoint=a/b"));
}

TEST(mount_overlaps)
{
        ASSERT_TRUE(overlaps("/workspace/data", "/workspace/data"));
        ASSERT_TRUE(overlaps("/workspace/data", "/workspace/data/sub"));
        ASSERT_TRUE(overlaps("/mnt/a/b", "/mnt/a"));
        ASSERT_FALSE(overlaps("/workspace/data", "/workspace/data2"));
        ASSERT_FALSE(overlaps("/mnt/a", "/mnt/b"));
}
