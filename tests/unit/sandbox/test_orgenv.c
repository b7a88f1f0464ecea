/* The env an org gives its sandboxes' jails (sbx_mgr_set_org_env: the
 * controller's secrets) without HTTP: commands and code contexts see it
 * below the sandbox's and the call's env; sandboxes of the default org
 * never ask for it; a failing hook starts nothing; a context's journal
 * never holds it and its replay gets it again. Needs root (skips
 * otherwise). */
#include "sandbox_fixture.h"

static int hook_calls;
static bool hook_fails;

static int fake_org_env(void *userdata, const char *org_id, json_t *env, struct err *err)
{
        hook_calls++;
        ASSERT_STREQ(userdata, "ud");
        if (hook_fails)
                return err_set(err, ERR_INTERNAL, EBADMSG, "secret 'SECRET_A' cannot be decrypted");
        if (strcmp(org_id, "org_t") == 0) {
                json_object_set_new(env, "SECRET_A", json_string("s3cr3t-value"));
                json_object_set_new(env, "OVERRIDE", json_string("org"));
        }
        return 0;
}

/* A sandbox of org_t, as the controller's create makes one. */
static void org_sandbox(const char *id, const char *env_json)
{
        json_t *env = json_loads(env_json, 0, NULL);
        struct sbx_create_options o = { .org_id = "org_t", .env = env };
        struct err e = { 0 };
        ASSERT_OK(store_org_ensure(g.store, "org_t", "Org T"));
        if (sbx_create(g.mgr, id, &o, NULL, &e) < 0)
                TAP_FAIL("sbx_create: %s", e.msg);
        json_decref(env);
}

/* Runs sh -c script in sandbox id; its stdout (static), or "ERR:<msg>". */
static const char *command(const char *id, const char *script, json_t *env)
{
        return run_command(id, strcmp(id, "sb-default") ? "org_t" : NULL, script, env);
}

/* Runs code in context cid of sandbox id (org_t's unless "sb-default"). */
static const char *py(const char *id, const char *cid, const char *code, struct sbx_exec_result *keep)
{
        static char out[256];
        struct sbx_exec_result r;
        struct err e = { 0 };
        struct sbx_cell cell = { .org_id = strcmp(id, "sb-default") ? "org_t" : NULL, .context_id = cid, .code = code };
        int rc = sbx_context_run(g.mgr, id, &cell, &r, &e);
        if (rc < 0) {
                snprintf(out, sizeof(out), "ERR:%.200s", e.msg);
                err_done(&e);
                return out;
        }
        json_t *first = json_array_get(json_object_get(r.outcome.response, "results"), 0);
        json_t *error = json_object_get(r.outcome.response, "error");
        snprintf(out, sizeof(out), "%s",
                 error && !json_is_null(error) ? "error" : first ? json_string_value(json_object_get(first, "text")) : "");
        if (keep)
                *keep = r;
        else
                sbx_exec_result_done(&r);
        return out;
}

/* A python context in sandbox id; its id into cid. */
static void context_of(const char *id, char cid[STORE_ID_MAX])
{
        struct sbx_context_info info;
        struct err e = { 0 };
        const char *org = strcmp(id, "sb-default") ? "org_t" : NULL;
        if (sbx_context_create_org(g.mgr, org, id, runtime_find("python"), "PYTHON", "/workspace", NULL, &info, &e) < 0)
                TAP_FAIL("sbx_context_create_org: %s", e.msg);
        snprintf(cid, STORE_ID_MAX, "%s", info.id);
}

TEST(orgenv_commands_see_the_org_env_below_their_own)
{
        mgr(8);
        sbx_mgr_set_org_env(g.mgr, fake_org_env, "ud");
        org_sandbox("sb-org", "{\"OVERRIDE\":\"sandbox\"}");
        ASSERT_STREQ(command("sb-org", "echo \"$SECRET_A/$OVERRIDE\"", NULL), "s3cr3t-value/sandbox\n");
        json_t *call = json_pack("{s:s}", "OVERRIDE", "call");
        ASSERT_STREQ(command("sb-org", "echo \"$SECRET_A/$OVERRIDE\"", call), "s3cr3t-value/call\n");
        json_decref(call);
        /* A call may unset one (null) for itself. */
        call = json_pack("{s:n}", "SECRET_A");
        ASSERT_STREQ(command("sb-org", "echo \"[${SECRET_A-unset}]\"", call), "[unset]\n");
        json_decref(call);
        ASSERT_EQ(hook_calls, 3);
}

TEST(orgenv_default_org_never_asks)
{
        mgr(8);
        sbx_mgr_set_org_env(g.mgr, fake_org_env, "ud");
        ASSERT_STREQ(command("sb-default", "echo \"[${SECRET_A-}]\"", NULL), "[]\n");
        ASSERT_EQ(hook_calls, 0);
}

TEST(orgenv_failing_hook_starts_nothing)
{
        mgr(8);
        sbx_mgr_set_org_env(g.mgr, fake_org_env, "ud");
        org_sandbox("sb-org", "{}");
        char cid[STORE_ID_MAX];
        context_of("sb-org", cid);
        hook_fails = true;
        ASSERT_STREQ(command("sb-org", "echo started", NULL), "ERR:secret 'SECRET_A' cannot be decrypted");
        ASSERT_STREQ(py("sb-org", cid, "1", NULL), "ERR:secret 'SECRET_A' cannot be decrypted");
}

struct journal_text {
        char buf[4096];
};

static void on_cell(const struct cell_row *cell, void *userdata)
{
        struct journal_text *j = userdata;
        size_t n = strlen(j->buf);
        snprintf(j->buf + n, sizeof(j->buf) - n, "%s|%s;", cell->code, cell->env_json);
}

TEST(orgenv_contexts_see_it_never_journal_it_and_replay_with_it)
{
        mgr(1); /* one live interpreter: the second sandbox evicts the first */
        sbx_mgr_set_org_env(g.mgr, fake_org_env, "ud");
        org_sandbox("sb-org", "{}");
        char other[STORE_ID_MAX], cid[STORE_ID_MAX];
        context_of("sb-default", other);
        context_of("sb-org", cid);
        struct sbx_exec_result r;
        ASSERT_STREQ(py("sb-default", other, "1 + 1", NULL), "2");
        /* The second sandbox gives back its own interpreter after this cell
         * (fair eviction), so its next cell is a replay. */
        ASSERT_STREQ(py("sb-org", cid, "import os; k = os.environ['SECRET_A']; k", &r), "'s3cr3t-value'");
        sbx_exec_result_done(&r);
        ASSERT_STREQ(py("sb-default", other, "import os; os.environ.get('SECRET_A', 'none')", NULL), "'none'");

        struct journal_text j = { "" };
        ASSERT_OK(store_cell_each(g.store, cid, on_cell, &j));
        ASSERT_TRUE(strstr(j.buf, "SECRET_A']") != NULL);   /* the cell is there… */
        ASSERT_TRUE(strstr(j.buf, "s3cr3t") == NULL);       /* …its value is not */

        ASSERT_STREQ(py("sb-org", cid, "k", &r), "'s3cr3t-value'");
        ASSERT_TRUE(r.restore.restored);
        ASSERT_FALSE(r.restore.fresh);
        ASSERT_TRUE(r.restore.stale_reason == NULL);
        sbx_exec_result_done(&r);
}
