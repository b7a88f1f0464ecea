/* Failed-login counters: a small table of fixed windows keyed by name
 * ("account:<email>", "addr:<ip>"). Bounded memory: when full, the entry
 * whose window started first is reused (an attacker filling the table with
 * fresh names can only evict windows older than its own). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tenant/internal.h"

#define LIMITER_SLOTS 4096
#define NAME_MAX_LEN 300

struct slot {
        char name[NAME_MAX_LEN];
        uint64_t start;   /* window start, monotonic ms; 0 = free */
        unsigned count;
};

struct login_limiter {
        pthread_mutex_t lock;
        struct slot slots[LIMITER_SLOTS];
};

struct login_limiter *limiter_new(void)
{
        struct login_limiter *l = calloc(1, sizeof(*l));
        if (l)
                pthread_mutex_init(&l->lock, NULL);
        return l;
}

void limiter_free(struct login_limiter *l)
{
        if (!l)
                return;
        pthread_mutex_destroy(&l->lock);
        free(l);
}

static struct slot *find(struct login_limiter *l, const char *name)
{
        for (size_t i = 0; i < LIMITER_SLOTS; i++)
                if (l->slots[i].start && strncmp(l->slots[i].name, name, NAME_MAX_LEN - 1) == 0)
                        return &l->slots[i];
        return NULL;
}

static struct slot *oldest(struct login_limiter *l)
{
        struct slot *best = &l->slots[0];
        for (size_t i = 0; i < LIMITER_SLOTS && best->start; i++)
                if (l->slots[i].start < best->start)
                        best = &l->slots[i];
        return best;
}

uint64_t limiter_blocked(struct login_limiter *l, const char *name, unsigned max, uint64_t window_ms, uint64_t now)
{
        uint64_t wait = 0;
        pthread_mutex_lock(&l->lock);
        struct slot *s = find(l, name);
        if (s && s->count >= max && now < s->start + window_ms)
                wait = (s->start + window_ms - now + 999) / 1000;
        pthread_mutex_unlock(&l->lock);
        return wait;
}

void limiter_fail(struct login_limiter *l, const char *name, uint64_t window_ms, uint64_t now)
{
        pthread_mutex_lock(&l->lock);
        struct slot *s = find(l, name);
        if (!s) {
                s = oldest(l);
                snprintf(s->name, sizeof(s->name), "%s", name);
                s->start = 0;
        }
        if (!s->start || now >= s->start + window_ms) {
                s->start = now ? now : 1;
                s->count = 0;
        }
        s->count++;
        pthread_mutex_unlock(&l->lock);
}

void limiter_reset(struct login_limiter *l, const char *name)
{
        pthread_mutex_lock(&l->lock);
        struct slot *s = find(l, name);
        if (s)
                *s = (struct slot){};
        pthread_mutex_unlock(&l->lock);
}
