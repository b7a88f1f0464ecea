/* Blocking requests run on their own polling thread (http_options
 * .inline_blocking) only where that costs nobody: another polling thread
 * keeps serving while one is held, the bound on executions at once
 * (workers) holds with inline runs in it, a run longer than the
 * connection timeout still gets its reply, and with the option off the
 * handler runs on a worker. Real server, real TCP. */
#include <pthread.h>

#include "base/log.h"
#include "httpc.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int running, max_running, entered, released;
static char last_thread[16]; /* name of the thread the last handler ran on */

static void note_thread(void)
{
        char name[16] = "";
        pthread_getname_np(pthread_self(), name, sizeof(name));
        pthread_mutex_lock(&mu);
        memcpy(last_thread, name, sizeof(name));
        pthread_mutex_unlock(&mu);
}

/* Holds its thread until the test releases it. */
static void h_hold(struct http_request *req, struct http_response *res)
{
        (void)req;
        note_thread();
        pthread_mutex_lock(&mu);
        running++;
        if (running > max_running)
                max_running = running;
        entered++;
        pthread_cond_broadcast(&cv);
        while (!released)
                pthread_cond_wait(&cv, &mu);
        running--;
        pthread_mutex_unlock(&mu);
        http_json(res, 200, json_object());
}

static void h_slow(struct http_request *req, struct http_response *res)
{
        (void)req;
        note_thread();
        usleep(2500 * 1000);
        http_json(res, 200, json_pack("{s:s}", "slow", "done"));
}

static void h_quick(struct http_request *req, struct http_response *res)
{
        (void)req;
        http_json(res, 200, json_object());
}

static const struct route routes[] = {
        { "GET", "/hold", h_hold, ROUTE_BLOCKING, NULL },
        { "GET", "/slow", h_slow, ROUTE_BLOCKING, NULL },
        { "GET", "/quick", h_quick, 0, NULL },
};

static struct http_server *start(bool inline_blocking, unsigned timeout_s)
{
        log_set_level(LOG_WARN);
        struct http_options opt = test_options(); /* 2 polling threads, 1 worker */
        opt.inline_blocking = inline_blocking;
        opt.timeout_s = timeout_s;
        struct http_server *s;
        ASSERT_OK(http_server_new(&opt, NULL, &s));
        struct http_group *g = http_server_group(s, NULL, NULL, NULL);
        ASSERT_TRUE(g != NULL);
        ASSERT_OK(http_group_routes(g, routes, ARRAY_SIZE(routes)));
        ASSERT_OK(http_server_start(s));
        return s;
}

struct call {
        unsigned port;
        const char *path;
        int status;
};

static void *call_main(void *arg)
{
        struct call *c = arg;
        struct resp r;
        request(c->port, "GET", c->path, NULL, &r);
        c->status = r.status;
        resp_free(&r);
        return NULL;
}

static bool wait_entered(int n)
{
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 10;
        pthread_mutex_lock(&mu);
        while (entered < n && pthread_cond_timedwait(&cv, &mu, &until) == 0)
                ;
        bool ok = entered >= n;
        pthread_mutex_unlock(&mu);
        return ok;
}

static void reset(void)
{
        pthread_mutex_lock(&mu);
        running = max_running = entered = released = 0;
        last_thread[0] = '\0';
        pthread_mutex_unlock(&mu);
}

static void release(void)
{
        pthread_mutex_lock(&mu);
        released = 1;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
}

static void expect_thread(bool polling)
{
        pthread_mutex_lock(&mu);
        /* MHD names its polling threads "MHD-worker"; ours keep the
         * process's name. */
        bool mhd = strncmp(last_thread, "MHD", 3) == 0;
        pthread_mutex_unlock(&mu);
        ASSERT_EQ(mhd, polling);
}

TEST(a_held_inline_run_leaves_another_thread_serving_and_the_worker_bound_holds)
{
        reset();
        struct http_server *s = start(true, 10);
        unsigned port = http_server_port(s);
        struct call a = { port, "/hold", 0 }, b = { port, "/hold", 0 };
        pthread_t ta, tb;
        ASSERT_OK(-pthread_create(&ta, NULL, call_main, &a));
        ASSERT_TRUE(wait_entered(1));
        expect_thread(true); /* alone on its thread, another one free: inline */

        /* The other polling thread answers while the first is held. */
        struct resp r;
        request(port, "GET", "/quick", NULL, &r);
        ASSERT_EQ(r.status, 200);
        resp_free(&r);

        /* A second blocking request waits for the one slot (workers = 1):
         * queued, not run beside the inline one. */
        ASSERT_OK(-pthread_create(&tb, NULL, call_main, &b));
        for (int i = 0; i < 2000 && http_server_busy(s) < 2; i++)
                usleep(1000);
        ASSERT_EQ(http_server_busy(s), 2);
        usleep(200 * 1000); /* room for a wrongly woken worker to start it */
        pthread_mutex_lock(&mu);
        ASSERT_EQ(entered, 1);
        pthread_mutex_unlock(&mu);

        release();
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        ASSERT_EQ(a.status, 200);
        ASSERT_EQ(b.status, 200);
        ASSERT_EQ(entered, 2);
        ASSERT_EQ(max_running, 1);
        ASSERT_EQ(http_server_busy(s), 0);
        http_server_stop(s);
}

/* MHD closes a connection idle for timeout_s; an inline run is no idling. */
TEST(a_run_longer_than_the_connection_timeout_gets_its_reply_either_way)
{
        for (int on = 1; on >= 0; on--) {
                reset();
                struct http_server *s = start(on, 1);
                struct resp r;
                request(http_server_port(s), "GET", "/slow", NULL, &r);
                ASSERT_EQ(r.status, 200);
                json_t *j = resp_json(&r);
                ASSERT_STREQ(jstr(j, "slow"), "done");
                json_decref(j);
                resp_free(&r);
                expect_thread(on);
                http_server_stop(s);
        }
}

TEST(with_inline_off_a_blocking_request_runs_on_a_worker)
{
        reset();
        struct http_server *s = start(false, 10);
        struct call a = { http_server_port(s), "/hold", 0 };
        pthread_t ta;
        ASSERT_OK(-pthread_create(&ta, NULL, call_main, &a));
        ASSERT_TRUE(wait_entered(1));
        expect_thread(false);
        release();
        pthread_join(ta, NULL);
        ASSERT_EQ(a.status, 200);
        http_server_stop(s);
}
