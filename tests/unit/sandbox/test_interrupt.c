/* Interrupts and REPL cells of the sandbox domain (src/sandbox/context.c:
 * sbx_context_interrupt, sbx_context_run): SIGINT stops a python loop and
 * keeps the interpreter and its state; a cell that ignores SIGINT is
 * killed after the grace period and its state comes back from the journal;
 * an interrupted cell is never journaled; a sink gets the output as it
 * comes. Real jails and kernels; needs root (skips otherwise). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "sandbox/sandbox.h"
#include "tap.h"

#include "sandbox_fixture.h"

static char cid[STORE_ID_MAX];

static void new_context(const char *sbx, const char *lang)
{
        const struct runtime *rt = runtime_find(lang);
        if (!rt || !rt->version[0])
                SKIP("runtime not installed");
        struct sbx_context_info ci;
        struct err e = { 0 };
        ASSERT_OK(sbx_context_create(g.mgr, sbx, rt, "repl", NULL, NULL, &ci, &e));
        snprintf(cid, sizeof(cid), "%s", ci.id);
}

struct cell_run {
        const char *sbx, *code;
        const struct exec_sink *sink;
        struct sbx_exec_result r;
        int rc;
};

static void *cell_thread(void *arg)
{
        struct cell_run *c = arg;
        const struct sbx_cell cell = { .context_id = cid, .code = c->code, .display = true, .sink = c->sink };
        struct err e = { 0 };
        c->rc = sbx_context_run(g.mgr, c->sbx, &cell, &c->r, &e);
        err_done(&e);
        return NULL;
}

static const char *run(const char *sbx, const char *code)
{
        struct cell_run c = { .sbx = sbx, .code = code };
        cell_thread(&c);
        ASSERT_OK(c.rc);
        const char *a = cell_answer(&c.r.outcome);
        sbx_exec_result_done(&c.r);
        return a;
}

static struct sbx_context_info info_of(const char *sbx)
{
        struct sbx_context_info *list = NULL, ci;
        size_t n = 0;
        struct err e = { 0 };
        ASSERT_OK(sbx_context_list(g.mgr, sbx, &list, &n, &e));
        ASSERT_EQ(n, 1);
        ci = list[0];
        free(list);
        return ci;
}

/* A manager and a context of lang in sbx whose first cell answers want. */
static void setup(const char *sbx, const char *lang, const char *first, const char *want)
{
        mgr(8);
        new_context(sbx, lang);
        ASSERT_STREQ(run(sbx, first), want);
}

/* Starts code on a thread, waits until it has run a while, interrupts. */
static enum sbx_interrupt interrupt_cell(const char *sbx, struct cell_run *c, uint64_t grace_ms)
{
        pthread_t t;
        ASSERT_EQ(pthread_create(&t, NULL, cell_thread, c), 0);
        for (int i = 0; i < 2000 && !info_of(sbx).busy; i++)
                usleep(5000);
        ASSERT_TRUE(info_of(sbx).busy);
        usleep(300000);
        enum sbx_interrupt what;
        struct err e = { 0 };
        ASSERT_OK(sbx_context_interrupt(g.mgr, NULL, sbx, cid, grace_ms, &what, &e));
        pthread_join(t, NULL);
        ASSERT_OK(c->rc);
        ASSERT_EQ(c->r.interrupted, what);
        return what;
}

TEST(sigint_stops_the_cell_and_keeps_the_interpreter)
{
        setup("s1", "python", "x = 5", "");
        struct cell_run c = { .sbx = "s1", .code = "y = 1\nwhile True: pass" };
        ASSERT_EQ(interrupt_cell("s1", &c, 5000), SBX_INTERRUPT_SIGNALED);
        ASSERT_STREQ(cell_answer(&c.r.outcome), "error:KeyboardInterrupt");
        ASSERT_FALSE(c.r.outcome.died);
        sbx_exec_result_done(&c.r);
        struct sbx_context_info ci = info_of("s1");
        ASSERT_FALSE(ci.busy);
        ASSERT_TRUE(ci.resident);
        ASSERT_EQ(ci.snap.cells, 1);              /* the loop is not journaled */
        ASSERT_TRUE(ci.snap.stale);               /* y = 1 is live only */
        ASSERT_STREQ(ci.snap.stale_reason, "interrupted");
        ASSERT_STREQ(run("s1", "x + y"), "6");    /* the same interpreter */
}

TEST(a_cell_deaf_to_sigint_is_killed_and_restored)
{
        setup("s2", "python", "x = 7", "");
        struct cell_run c = { .sbx = "s2",
                              .code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass" };
        ASSERT_EQ(interrupt_cell("s2", &c, 300), SBX_INTERRUPT_KILLED);
        ASSERT_TRUE(c.r.outcome.died);
        sbx_exec_result_done(&c.r);
        ASSERT_FALSE(info_of("s2").resident);
        struct cell_run next = { .sbx = "s2", .code = "x" };
        cell_thread(&next);
        ASSERT_OK(next.rc);
        ASSERT_STREQ(cell_answer(&next.r.outcome), "7");       /* replayed from the journal */
        ASSERT_TRUE(next.r.restore.restored);
        ASSERT_STREQ(next.r.restore.reason, "interrupted");
        sbx_exec_result_done(&next.r);
}

TEST(other_runtimes_are_killed_at_once)
{
        setup("s3", "perl", "our $x = 3; 0", "0");
        struct cell_run c = { .sbx = "s3", .code = "1 while 1;" };
        ASSERT_EQ(interrupt_cell("s3", &c, 5000), SBX_INTERRUPT_KILLED);
        sbx_exec_result_done(&c.r);
        ASSERT_STREQ(run("s3", "$x"), "3");
}

TEST(nothing_running_is_nothing_to_do)
{
        setup("s4", "python", "1", "1");
        enum sbx_interrupt what = SBX_INTERRUPT_KILLED;
        struct err e = { 0 };
        ASSERT_OK(sbx_context_interrupt(g.mgr, NULL, "s4", cid, 100, &what, &e));
        ASSERT_EQ(what, SBX_INTERRUPT_NONE);
        ASSERT_STREQ(run("s4", "2"), "2"); /* and the next cell is not skipped */
        ASSERT_TRUE(sbx_context_interrupt(g.mgr, NULL, "s4", "no-such-context", 100, &what, &e) < 0);
        ASSERT_EQ(e.reason, ERR_NOT_FOUND);
        err_done(&e);
}

struct collected {
        char text[256];
        size_t len;
        int calls;
};

static void collect(void *userdata, int which, const char *data, size_t len)
{
        struct collected *c = userdata;
        c->calls++;
        c->len += (size_t)snprintf(c->text + c->len, sizeof(c->text) - c->len, "%d:%.*s", which, (int)len, data);
}

TEST(sink_gets_the_output_and_display_adds_bundles)
{
        mgr(8);
        new_context("s5", "python");
        struct collected got = { .len = 0 };
        const struct exec_sink sink = { collect, &got };
        struct cell_run c = { .sbx = "s5", .code = "print('hi')\n{'a': 1}", .sink = &sink };
        cell_thread(&c);
        ASSERT_OK(c.rc);
        ASSERT_STREQ(got.text, "1:hi\n");
        ASSERT_EQ(c.r.outcome.out.len, 3);        /* kept as before, too */
        json_t *data = json_object_get(c.r.outcome.response, "data");
        ASSERT_STREQ(json_string_value(json_object_get(data, "text/plain")), "{'a': 1}");
        ASSERT_TRUE(json_is_array(json_object_get(c.r.outcome.response, "display")));
        sbx_exec_result_done(&c.r);
        /* The runtime API's cells get no display fields. */
        struct sbx_exec_result r;
        struct err e = { 0 };
        ASSERT_OK(sbx_execute(g.mgr, "s5", runtime_find("python"), "repl", "1", cid, NULL, &r, &e));
        ASSERT_TRUE(json_object_get(r.outcome.response, "display") == NULL);
        sbx_exec_result_done(&r);
}
