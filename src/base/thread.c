#include "base/thread.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int bg_thread_init(struct bg_thread *t, pthread_mutex_t *lock)
{
        *t = (struct bg_thread){ 0 };
        pthread_condattr_t ca;
        int r = pthread_condattr_init(&ca);
        if (r != 0)
                return -r;
        r = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        if (r == 0)
                r = pthread_cond_init(&t->cond, &ca);
        pthread_condattr_destroy(&ca);
        if (r != 0)
                return -r;
        if (!lock) {
                pthread_mutex_init(&t->own_lock, NULL);
                lock = &t->own_lock;
        }
        t->lock = lock;
        t->initialised = true;
        return 0;
}

static void *trampoline(void *arg)
{
        struct bg_thread *t = arg;
        if (t->name[0])
                pthread_setname_np(pthread_self(), t->name);
        /* Background threads are woken by the request path (a pool take
         * wakes the filler, a used kernel the reaper): as SCHED_OTHER the
         * woken thread preempted the request's thread on its CPU, 15-30 µs a
         * wake-up (timestamps in the stateless path). SCHED_BATCH keeps the
         * same CPU share but never preempts on wake-up: it runs when the
         * request's thread blocks, or on the other CPU. */
        struct sched_param sp = { 0 };
        (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
        t->fn(t->arg);
        return NULL;
}

int bg_thread_start(struct bg_thread *t, const char *name, unsigned n, void (*fn)(void *arg), void *arg)
{
        if (!t->initialised || t->tids || n == 0)
                return -EINVAL;
        t->tids = calloc(n, sizeof(*t->tids));
        if (!t->tids)
                return -ENOMEM;
        snprintf(t->name, sizeof(t->name), "%s", name ? name : "");
        t->fn = fn;
        t->arg = arg;
        pthread_mutex_lock(t->lock);
        t->stopping = false;
        pthread_mutex_unlock(t->lock);
        for (; t->n < n; t->n++) {
                int r = pthread_create(&t->tids[t->n], NULL, trampoline, t);
                if (r != 0) {
                        bg_thread_stop(t);
                        return -r;
                }
        }
        return 0;
}

void bg_thread_stop(struct bg_thread *t)
{
        if (!t->initialised)
                return;
        pthread_mutex_lock(t->lock);
        t->stopping = true;
        pthread_cond_broadcast(&t->cond);
        pthread_mutex_unlock(t->lock);
        for (unsigned i = 0; i < t->n; i++)
                pthread_join(t->tids[i], NULL);
        free(t->tids);
        t->tids = NULL;
        t->n = 0;
}

void bg_thread_done(struct bg_thread *t)
{
        if (!t->initialised)
                return;
        bg_thread_stop(t);
        pthread_cond_destroy(&t->cond);
        if (t->lock == &t->own_lock)
                pthread_mutex_destroy(&t->own_lock);
        *t = (struct bg_thread){ 0 };
}

void bg_thread_lock(struct bg_thread *t)
{
        pthread_mutex_lock(t->lock);
}

void bg_thread_unlock(struct bg_thread *t)
{
        pthread_mutex_unlock(t->lock);
}

bool bg_thread_running(const struct bg_thread *t)
{
        return !t->stopping;
}

bool bg_thread_wait(struct bg_thread *t, uint64_t until_ns)
{
        if (t->stopping)
                return false;
        if (until_ns == 0) {
                pthread_cond_wait(&t->cond, t->lock);
        } else {
                struct timespec ts = { (time_t)(until_ns / 1000000000ULL), (long)(until_ns % 1000000000ULL) };
                pthread_cond_timedwait(&t->cond, t->lock, &ts);
        }
        return !t->stopping;
}

void bg_thread_wake(struct bg_thread *t)
{
        pthread_cond_signal(&t->cond);
}

void bg_thread_wake_all(struct bg_thread *t)
{
        pthread_cond_broadcast(&t->cond);
}

/* Deferring a signal is safe where the signal itself is: the waker changed
 * the state under the lock, so a waiter either sees it before it sleeps or
 * sleeps until the later signal. Only the wake-up's time moves. */
static _Thread_local struct {
        bool open;
        unsigned n;
        struct bg_thread *owed[BG_THREAD_DEFER_MAX];
} deferred;

static bool defer_wake(struct bg_thread *t)
{
        if (!deferred.open)
                return false;
        for (unsigned i = 0; i < deferred.n; i++)
                if (deferred.owed[i] == t)
                        return true;
        if (deferred.n == BG_THREAD_DEFER_MAX)
                return false;
        deferred.owed[deferred.n++] = t;
        return true;
}

void bg_thread_wake_soon(struct bg_thread *t)
{
        if (!defer_wake(t))
                bg_thread_wake(t);
}

void bg_thread_defer_begin(void)
{
        deferred.open = true;
}

void bg_thread_defer_flush(void)
{
        deferred.open = false;
        for (unsigned i = 0; i < deferred.n; i++)
                bg_thread_wake(deferred.owed[i]);
        deferred.n = 0;
}
