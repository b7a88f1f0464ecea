/* tenant/secrets.c over a real SQLite store: CRUD scoped by org, the name
 * and value rules, the key (file 0600, or given), and every way a stored
 * value must refuse to open (a changed byte, a row moved to another org or
 * name, another key) with an error that names the secret, never its value. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/b64.h"
#include "base/util.h"
#include "tap.h"
#include "tenant/tenant.h"

static char dir[64];
static struct store *st;

static void cleanup(void)
{
        store_close(st);
        if (dir[0])
                rm_rf(dir);
}

static struct tenant *tenant_with(const char *key_text)
{
        struct tenant_options o = { .session_ttl_s = 60, .login_account_failures = 5, .login_addr_failures = 5,
                                    .login_window_s = 60 };
        snprintf(o.data_dir, sizeof(o.data_dir), "%s", dir);
        snprintf(o.secrets_key, sizeof(o.secrets_key), "%s", key_text ? key_text : "");
        struct tenant *t = NULL;
        struct err e = {};
        int r = tenant_new(&o, st, &t, &e);
        if (r < 0)
                TAP_FAIL("tenant_new: %d %s", r, e.msg);
        return t;
}

static struct tenant *setup(void)
{
        snprintf(dir, sizeof(dir), "/tmp/tenant-secrets-XXXXXX");
        ASSERT_TRUE(mkdtemp(dir) != NULL);
        atexit(cleanup);
        char url[128];
        snprintf(url, sizeof(url), "sqlite:%s/db", dir);
        struct err e = {};
        ASSERT_OK(store_open(url, &st, &e));
        ASSERT_OK(store_org_ensure(st, "org_a", "A"));
        ASSERT_OK(store_org_ensure(st, "org_b", "B"));
        return tenant_with(NULL);
}

static int put(struct tenant *t, const char *org, const char *name, const char *value, struct err *e)
{
        return tenant_secret_create(t, org, name, value, strlen(value), NULL, e);
}

struct opened {
        char buf[1024];
};

static void on_value(const char *name, const char *value, void *userdata)
{
        struct opened *o = userdata;
        size_t n = strlen(o->buf);
        snprintf(o->buf + n, sizeof(o->buf) - n, "%s=%s;", name, value);
}

/* Every value of org opened ("A=1;B=2;"), or "ERR:<message>". */
static const char *values(struct tenant *t, const char *org)
{
        static struct opened o;
        struct err e = {};
        o.buf[0] = '\0';
        if (tenant_secret_values(t, org, on_value, &o, &e) < 0) {
                snprintf(o.buf, sizeof(o.buf), "ERR:%s", e.msg);
                err_done(&e);
        }
        return o.buf;
}

static void on_meta(const struct tenant_secret *s, void *userdata)
{
        struct opened *o = userdata;
        size_t n = strlen(o->buf);
        snprintf(o->buf + n, sizeof(o->buf) - n, "%s%s", n ? "," : "", s->name);
}

TEST(secrets_crud_and_isolation)
{
        struct tenant *t = setup();
        struct err e = {};
        struct tenant_secret s;
        ASSERT_OK(put(t, "org_a", "API_KEY", "v1", &e));
        ASSERT_OK(put(t, "org_a", "_X9", "x", &e));
        ASSERT_ERR(put(t, "org_a", "API_KEY", "again", &e), EEXIST);
        ASSERT_EQ(e.reason, ERR_EXISTS);
        ASSERT_TRUE(strstr(e.msg, "again") == NULL);
        err_done(&e);
        ASSERT_OK(put(t, "org_b", "API_KEY", "theirs", &e));
        ASSERT_STREQ(values(t, "org_a"), "API_KEY=v1;_X9=x;");
        ASSERT_STREQ(values(t, "org_b"), "API_KEY=theirs;");

        ASSERT_OK(tenant_secret_update(t, "org_a", "API_KEY", "v2", 2, &s, &e));
        ASSERT_STREQ(s.name, "API_KEY");
        ASSERT_TRUE(s.updated_at >= s.created_at && s.created_at > 0);
        ASSERT_STREQ(values(t, "org_a"), "API_KEY=v2;_X9=x;");
        ASSERT_ERR(tenant_secret_update(t, "org_b", "_X9", "v", 1, &s, &e), ENOENT);
        ASSERT_EQ(e.reason, ERR_NOT_FOUND);
        err_done(&e);

        struct opened names = { "" };
        uint64_t total = 0;
        ASSERT_OK(tenant_secret_each(t, "org_a", 1, 1, on_meta, &names, &total, &e));
        ASSERT_STREQ(names.buf, "_X9");
        ASSERT_U64_EQ(total, 2);

        ASSERT_ERR(tenant_secret_delete(t, "org_b", "_X9", &e), ENOENT);
        err_done(&e);
        ASSERT_OK(tenant_secret_delete(t, "org_a", "_X9", &e));
        ASSERT_STREQ(values(t, "org_a"), "API_KEY=v2;");
        ASSERT_STREQ(values(t, "org_none"), "");
        tenant_free(t);
}

TEST(secrets_name_and_value_rules)
{
        struct tenant *t = setup();
        struct err e = {};
        static const char *const bad_names[] = { "", "lower", "1ABC", "A-B", "A B", "ÄB", "A=B" };
        for (size_t i = 0; i < ARRAY_SIZE(bad_names); i++) {
                ASSERT_ERR(put(t, "org_a", bad_names[i], "v", &e), EINVAL);
                ASSERT_EQ(e.reason, ERR_INVALID);
                err_done(&e);
        }
        char name[TENANT_SECRET_NAME_MAX + 2];
        memset(name, 'N', sizeof(name) - 1);
        name[sizeof(name) - 1] = '\0';
        ASSERT_ERR(put(t, "org_a", name, "v", &e), EINVAL);   /* 129 characters */
        err_done(&e);
        name[TENANT_SECRET_NAME_MAX] = '\0';
        ASSERT_OK(put(t, "org_a", name, "v", &e));           /* 128 */

        /* NUL inside, invalid UTF-8: refused, and the message has no value. */
        ASSERT_ERR(tenant_secret_create(t, "org_a", "NUL", "ab\0cd", 5, NULL, &e), EINVAL);
        err_done(&e);
        ASSERT_ERR(put(t, "org_a", "BAD_UTF8", "zz\xff\xfe", &e), EINVAL);
        ASSERT_TRUE(strstr(e.msg, "zz") == NULL);
        err_done(&e);
        ASSERT_OK(put(t, "org_a", "UTF8", "héllo ☃", &e));
        ASSERT_OK(put(t, "org_a", "EMPTY", "", &e));

        char *big = malloc(TENANT_SECRET_VALUE_MAX + 2);
        memset(big, 'v', TENANT_SECRET_VALUE_MAX + 1);
        big[TENANT_SECRET_VALUE_MAX + 1] = '\0';
        ASSERT_ERR(put(t, "org_a", "BIG", big, &e), EFBIG);
        ASSERT_EQ(e.reason, ERR_TOO_LARGE);
        err_done(&e);
        big[TENANT_SECRET_VALUE_MAX] = '\0';
        ASSERT_OK(put(t, "org_a", "BIG", big, &e));
        free(big);
        tenant_free(t);
}

struct sealed_copy {
        char org[STORE_ID_MAX];
        char *sealed;
};

static void on_row(const struct secret_row *row, void *userdata)
{
        struct sealed_copy *c = userdata;
        free(c->sealed);
        c->sealed = strdup(row->sealed);
        snprintf(c->org, sizeof(c->org), "%s", row->key_id);
}

/* The stored text of org's only secret (owned). */
static char *stored(const char *org, char key_id[STORE_ID_MAX])
{
        struct sealed_copy c = {};
        uint64_t total;
        ASSERT_OK(store_secret_each(st, org, 10, 0, on_row, &c, &total));
        ASSERT_U64_EQ(total, 1);
        if (key_id)
                snprintf(key_id, STORE_ID_MAX, "%s", c.org);
        return c.sealed;
}

static void overwrite(const char *org, const char *name, const char *sealed, const char *key_id)
{
        struct secret_row row = { .sealed = (char *)sealed, .updated_at = 5 };
        snprintf(row.org_id, sizeof(row.org_id), "%s", org);
        snprintf(row.name, sizeof(row.name), "%s", name);
        snprintf(row.key_id, sizeof(row.key_id), "%s", key_id);
        ASSERT_OK(store_secret_update(st, &row));
}

TEST(secrets_at_rest_and_tampering)
{
        struct tenant *t = setup();
        struct err e = {};
        char key_id[STORE_ID_MAX];
        struct stat sb;
        char path[128];
        snprintf(path, sizeof(path), "%s/secrets.key", dir);
        ASSERT_OK(stat(path, &sb));
        ASSERT_EQ(sb.st_mode & 0777, 0600);
        ASSERT_EQ(sb.st_size, 32);

        ASSERT_OK(put(t, "org_a", "TOKEN", "plain-text-value", &e));
        char *first = stored("org_a", key_id);
        ASSERT_TRUE(strstr(first, "plain-text-value") == NULL);
        /* The same value again: another nonce, another ciphertext. */
        ASSERT_OK(tenant_secret_update(t, "org_a", "TOKEN", "plain-text-value", 16, NULL, &e));
        char *second = stored("org_a", NULL);
        ASSERT_TRUE(strcmp(first, second) != 0);
        ASSERT_STREQ(values(t, "org_a"), "TOKEN=plain-text-value;");

        /* One flipped byte of the ciphertext: refused, named, no value. */
        unsigned char *raw = NULL;
        size_t rawlen = 0;
        ASSERT_OK(b64_decode(second, strlen(second), &raw, &rawlen));
        raw[rawlen / 2] ^= 0x01;
        char *flipped = b64_encode(raw, rawlen);
        overwrite("org_a", "TOKEN", flipped, key_id);
        const char *got = values(t, "org_a");
        ASSERT_TRUE(strncmp(got, "ERR:secret 'TOKEN' cannot be decrypted", 38) == 0);
        ASSERT_TRUE(strstr(got, "plain") == NULL);
        overwrite("org_a", "TOKEN", second, key_id);
        ASSERT_STREQ(values(t, "org_a"), "TOKEN=plain-text-value;");

        /* The same ciphertext moved to another org, or another name. */
        ASSERT_OK(put(t, "org_b", "TOKEN", "b-value", &e));
        overwrite("org_b", "TOKEN", second, key_id);
        ASSERT_TRUE(strncmp(values(t, "org_b"), "ERR:secret 'TOKEN' cannot be decrypted", 38) == 0);
        ASSERT_OK(tenant_secret_delete(t, "org_b", "TOKEN", &e));
        ASSERT_OK(put(t, "org_b", "OTHER", "b-value", &e));
        overwrite("org_b", "OTHER", second, key_id);
        ASSERT_TRUE(strncmp(values(t, "org_b"), "ERR:secret 'OTHER' cannot be decrypted", 38) == 0);
        tenant_free(t);

        /* Another key (SANDBOXD_SECRETS_KEY) cannot open what the file key sealed. */
        t = tenant_with("0000000000000000000000000000000000000000000000000000000000000001");
        got = values(t, "org_a");
        ASSERT_TRUE(strstr(got, "ERR:secret 'TOKEN' cannot be decrypted: it was sealed with another key") == got);
        tenant_free(t);
        /* The file key again: it still opens (the key file was kept). */
        t = tenant_with(NULL);
        ASSERT_STREQ(values(t, "org_a"), "TOKEN=plain-text-value;");
        tenant_free(t);
        free(raw);
        free(flipped);
        free(first);
        free(second);
}

TEST(secrets_key_from_the_environment_must_be_well_formed)
{
        tenant_free(setup()); /* only the store and the data dir are needed */
        struct tenant_options o = { .session_ttl_s = 60 };
        snprintf(o.data_dir, sizeof(o.data_dir), "%s", dir);
        snprintf(o.secrets_key, sizeof(o.secrets_key), "not-a-key");
        struct tenant *t = NULL;
        struct err e = {};
        ASSERT_TRUE(tenant_new(&o, st, &t, &e) < 0);
        ASSERT_TRUE(strstr(e.msg, "SANDBOXD_SECRETS_KEY") != NULL);
        ASSERT_TRUE(strstr(e.msg, "not-a-key") == NULL);
        err_done(&e);
        /* base64 of 32 bytes works too. */
        snprintf(o.secrets_key, sizeof(o.secrets_key), "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=");
        ASSERT_OK(tenant_new(&o, st, &t, &e));
        ASSERT_OK(put(t, "org_a", "K", "v", &e));
        ASSERT_STREQ(values(t, "org_a"), "K=v;");
        tenant_free(t);
}
