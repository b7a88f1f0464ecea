/* Tests of src/base/thread.c: workers consume what is queued under the
 * owner's lock, timed waits honour their deadline, stop wakes sleepers and
 * joins, and a never-started or zeroed bg_thread is safe to stop and free. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "base/thread.h"
#include "base/time.h"
#include "tap.h"

struct owner {
        pthread_mutex_t lock;
        struct bg_thread bg;
        int queued, done, loops_left;
        unsigned workers_seen;
};

static void consume(void *arg)
{
        struct owner *o = arg;
        bg_thread_lock(&o->bg);
        o->workers_seen++;
        for (;;) {
                while (o->queued == 0 && bg_thread_running(&o->bg))
                        bg_thread_wait(&o->bg, 0);
                if (o->queued == 0)
                        break; /* stopping and drained */
                o->queued--;
                bg_thread_unlock(&o->bg);
                usleep(100);
                bg_thread_lock(&o->bg);
                o->done++;
        }
        bg_thread_unlock(&o->bg);
}

TEST(thread_workers_drain_the_queue_then_stop)
{
        struct owner o = { 0 };
        pthread_mutex_init(&o.lock, NULL);
        ASSERT_OK(bg_thread_init(&o.bg, &o.lock));
        ASSERT_OK(bg_thread_start(&o.bg, "test-worker", 3, consume, &o));
        for (int i = 0; i < 50; i++) {
                bg_thread_lock(&o.bg);
                o.queued++;
                bg_thread_wake(&o.bg);
                bg_thread_unlock(&o.bg);
        }
        /* Stop only once everything queued was taken: the loop drains. */
        for (int i = 0; i < 2000; i++) {
                pthread_mutex_lock(&o.lock);
                bool idle = o.done == 50;
                pthread_mutex_unlock(&o.lock);
                if (idle)
                        break;
                usleep(1000);
        }
        bg_thread_stop(&o.bg);
        ASSERT_EQ(o.done, 50);
        ASSERT_EQ(o.queued, 0);
        ASSERT_EQ(o.workers_seen, 3);
        ASSERT_EQ(o.bg.n, 0); /* joined */
        bg_thread_done(&o.bg);
        pthread_mutex_destroy(&o.lock);
}

static void sleeper(void *arg)
{
        struct owner *o = arg;
        bg_thread_lock(&o->bg);
        while (bg_thread_wait(&o->bg, 0))
                o->loops_left++;
        o->done = 1;
        bg_thread_unlock(&o->bg);
}

static void note_policy(void *arg)
{
        *(int *)arg = sched_getscheduler(0);
}

/* A background thread woken by a request must not preempt it. */
TEST(thread_runs_as_sched_batch)
{
        struct bg_thread bg;
        int policy = -1;
        ASSERT_OK(bg_thread_init(&bg, NULL));
        ASSERT_OK(bg_thread_start(&bg, "test-policy", 1, note_policy, &policy));
        bg_thread_stop(&bg);
        bg_thread_done(&bg);
        ASSERT_EQ(policy, SCHED_BATCH);
}

TEST(thread_stop_wakes_an_untimed_wait_and_joins)
{
        struct owner o = { 0 };
        ASSERT_OK(bg_thread_init(&o.bg, NULL)); /* internal lock */
        ASSERT_OK(bg_thread_start(&o.bg, "test-sleeper", 1, sleeper, &o));
        usleep(20000); /* let it block */
        uint64_t t0 = now_ns();
        bg_thread_stop(&o.bg);
        ASSERT_EQ(o.done, 1); /* the thread returned before stop did */
        ASSERT_LT(now_ns() - t0, 2000000000ULL);
        /* Waiting after stop returns at once, without sleeping. */
        bg_thread_lock(&o.bg);
        ASSERT_FALSE(bg_thread_wait(&o.bg, 0));
        ASSERT_FALSE(bg_thread_running(&o.bg));
        bg_thread_unlock(&o.bg);
        bg_thread_done(&o.bg);
}

static int loops_of(struct owner *o)
{
        bg_thread_lock(&o->bg);
        int n = o->loops_left;
        bg_thread_unlock(&o->bg);
        return n;
}

/* Polls (up to 2 s) until o's sleeper has been woken n times. */
static int await_loops(struct owner *o, int n)
{
        for (int i = 0; i < 2000 && loops_of(o) < n; i++)
                usleep(1000);
        return loops_of(o);
}

/* A request's wake-ups of the reaper and the refiller wait until its answer
 * is out (bg_thread_defer_flush); outside a window, or beyond what a window
 * holds, they go at once. */
TEST(thread_wake_soon_waits_for_the_flush_of_its_window)
{
        enum { N = BG_THREAD_DEFER_MAX + 1 };
        struct owner o[N] = { 0 };
        for (int i = 0; i < N; i++) {
                ASSERT_OK(bg_thread_init(&o[i].bg, NULL));
                ASSERT_OK(bg_thread_start(&o[i].bg, "test-sleeper", 1, sleeper, &o[i]));
        }
        usleep(20000); /* let them block */
        bg_thread_defer_begin();
        for (int i = 0; i < N; i++)
                bg_thread_wake_soon(&o[i].bg);
        bg_thread_wake_soon(&o[0].bg); /* owed once */
        ASSERT_EQ(await_loops(&o[N - 1], 1), 1); /* the window was full: at once */
        usleep(30000);
        for (int i = 0; i < N - 1; i++)
                ASSERT_EQ(loops_of(&o[i]), 0);
        bg_thread_defer_flush();
        for (int i = 0; i < N - 1; i++)
                ASSERT_EQ(await_loops(&o[i], 1), 1);
        /* The window is closed: the next one goes at once. */
        bg_thread_wake_soon(&o[0].bg);
        ASSERT_EQ(await_loops(&o[0], 2), 2);
        bg_thread_defer_flush(); /* nothing owed: a no-op */
        for (int i = 0; i < N; i++) {
                bg_thread_stop(&o[i].bg);
                ASSERT_EQ(o[i].done, 1);
                bg_thread_done(&o[i].bg);
        }
}

TEST(thread_timed_wait_honours_the_deadline)
{
        struct bg_thread bg;
        ASSERT_OK(bg_thread_init(&bg, NULL));
        bg_thread_lock(&bg);
        uint64_t t0 = now_ns(), until = t0 + 50000000ULL; /* 50 ms */
        while (now_ns() < until)
                ASSERT_TRUE(bg_thread_wait(&bg, until));
        uint64_t took = now_ns() - t0;
        bg_thread_unlock(&bg);
        ASSERT_GE(took, 50000000ULL);
        ASSERT_LT(took, 1000000000ULL);
        /* A deadline in the past returns at once. */
        bg_thread_lock(&bg);
        t0 = now_ns();
        ASSERT_TRUE(bg_thread_wait(&bg, 1));
        ASSERT_LT(now_ns() - t0, 100000000ULL);
        bg_thread_unlock(&bg);
        bg_thread_done(&bg);
}

static void counter(void *arg)
{
        struct owner *o = arg;
        bg_thread_lock(&o->bg);
        o->done++;
        bg_thread_unlock(&o->bg);
}

TEST(thread_restart_after_stop_and_errors)
{
        struct owner o = { 0 };
        ASSERT_OK(bg_thread_init(&o.bg, NULL));
        ASSERT_ERR(bg_thread_start(&o.bg, "x", 0, counter, &o), EINVAL);
        ASSERT_OK(bg_thread_start(&o.bg, "x", 2, counter, &o));
        /* Started twice without a stop in between: refused. */
        ASSERT_ERR(bg_thread_start(&o.bg, "x", 1, counter, &o), EINVAL);
        bg_thread_stop(&o.bg);
        ASSERT_EQ(o.done, 2);
        ASSERT_OK(bg_thread_start(&o.bg, "x", 1, counter, &o));
        bg_thread_stop(&o.bg);
        bg_thread_stop(&o.bg); /* idempotent */
        ASSERT_EQ(o.done, 3);
        bg_thread_done(&o.bg);
        bg_thread_done(&o.bg); /* zeroed by the first: a no-op */
}

TEST(thread_never_started_or_zeroed_is_safe)
{
        struct bg_thread zero = { 0 };
        bg_thread_stop(&zero);
        bg_thread_done(&zero);
        ASSERT_ERR(bg_thread_start(&zero, "x", 1, counter, NULL), EINVAL);
        struct bg_thread idle;
        ASSERT_OK(bg_thread_init(&idle, NULL));
        bg_thread_lock(&idle);
        bg_thread_wake(&idle); /* nobody waits: nothing happens */
        bg_thread_wake_all(&idle);
        ASSERT_TRUE(bg_thread_running(&idle));
        bg_thread_unlock(&idle);
        bg_thread_stop(&idle);
        bg_thread_done(&idle);
}
