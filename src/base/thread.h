/* Background threads for the daemon's service loops (engine reaper and pool
 * filler, sandbox expiry reaper, HTTP workers): one place for the
 * start / wait-or-wake / stop-and-join dance that each of them repeated.
 *
 * A bg_thread is one or more identical threads running fn(arg), a condition
 * variable on the monotonic clock, and a `stopping` flag, all guarded by one
 * mutex: the owner's own lock (so the loop's state and the flag change
 * together, and no wake-up is lost), or an internal one.
 *
 *     static void loop(void *arg) {
 *             struct owner *o = arg;
 *             bg_thread_lock(&o->bg);
 *             while (bg_thread_running(&o->bg)) {
 *                     if (!o->work) { bg_thread_wait(&o->bg, 0); continue; }
 *                     ...take work, unlock, do it, lock...
 *             }
 *             bg_thread_unlock(&o->bg);
 *     }
 *
 * Not fork-safe (the daemon only). */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct bg_thread {
        pthread_mutex_t *lock;     /* the owner's, or &own_lock */
        pthread_mutex_t own_lock;
        pthread_cond_t cond;       /* CLOCK_MONOTONIC */
        bool stopping;             /* under *lock */
        bool initialised;
        char name[16];             /* thread name (ps, gdb); at most 15 bytes */
        void (*fn)(void *arg);
        void *arg;
        pthread_t *tids;
        unsigned n;                /* threads started */
};

/* Prepares t (no thread yet): wake and wait work from here on. lock: the
 * mutex that guards what the loop waits for, or NULL for an internal one.
 * Returns 0 or -errno. */
int bg_thread_init(struct bg_thread *t, pthread_mutex_t *lock);
/* Starts n threads running fn(arg), named name, as SCHED_BATCH (the same
 * CPU share, but no preemption on wake-up). On failure no thread is left
 * running. Returns 0 or -errno. */
int bg_thread_start(struct bg_thread *t, const char *name, unsigned n, void (*fn)(void *arg), void *arg);
/* Sets stopping, wakes every thread and joins them. Idempotent; fine on a
 * thread never started. Call without holding the lock, and not from one of
 * t's own threads (it would join itself). Wake and wait stay
 * usable until bg_thread_done. */
void bg_thread_stop(struct bg_thread *t);
/* Stops (if needed) and frees t. Safe on a zeroed or already done t. */
void bg_thread_done(struct bg_thread *t);

void bg_thread_lock(struct bg_thread *t);
void bg_thread_unlock(struct bg_thread *t);
/* With the lock held: false once bg_thread_stop was called. */
bool bg_thread_running(const struct bg_thread *t);
/* With the lock held: sleeps until woken, stopped or the monotonic time
 * until_ns (now_ns() scale; 0: no deadline). Returns at once when stopping.
 * May wake spuriously: loop on your condition. Returns
 * bg_thread_running(t). */
bool bg_thread_wait(struct bg_thread *t, uint64_t until_ns);
/* Wakes one waiting thread / all of them. Change the state the loop waits
 * for under the lock first, or the wake-up can be lost. */
void bg_thread_wake(struct bg_thread *t);
void bg_thread_wake_all(struct bg_thread *t);

/* Wake-ups that may wait until the calling thread has answered its client.
 * A thread serving a short request opens a window (bg_thread_defer_begin);
 * bg_thread_wake_soon in it is sent at bg_thread_defer_flush, after the
 * response went out: after an idle pause a futex wake-up of a sleeping
 * thread costs the waker 5-30 us, and the woken thread contends for the
 * lock the request still takes. Outside a window, or when the window holds
 * BG_THREAD_DEFER_MAX threads already, it wakes at once. Only for threads
 * that nobody waits for inside the window (a reaper, a refiller), and only
 * for ones that outlive the window's thread's last flush. Per thread. */
#define BG_THREAD_DEFER_MAX 4
void bg_thread_wake_soon(struct bg_thread *t);
void bg_thread_defer_begin(void);
/* Sends what the window holds and closes it; fine without one. */
void bg_thread_defer_flush(void);
