/* The least-recently-used list of resident context interpreters, capped by
 * max_resident_contexts. An evicted context keeps its journal, so its next
 * use restores it transparently. Every function takes m->lock itself. */
#include "sandbox/internal.h"

#include "base/log.h"

static void lru_unlink(struct sandbox_mgr *m, struct context *c)
{
        if (!c->lru_prev && m->lru_head != c)
                return;
        if (c->lru_prev)
                c->lru_prev->lru_next = c->lru_next;
        else
                m->lru_head = c->lru_next;
        if (c->lru_next)
                c->lru_next->lru_prev = c->lru_prev;
        else
                m->lru_tail = c->lru_prev;
        c->lru_prev = c->lru_next = NULL;
        m->resident--;
}

static void lru_push_front(struct sandbox_mgr *m, struct context *c)
{
        c->lru_next = m->lru_head;
        c->lru_prev = NULL;
        if (m->lru_head)
                m->lru_head->lru_prev = c;
        m->lru_head = c;
        if (!m->lru_tail)
                m->lru_tail = c;
        m->resident++;
}

void lru_add(struct sandbox_mgr *m, struct context *c)
{
        pthread_mutex_lock(&m->lock);
        lru_push_front(m, c);
        pthread_mutex_unlock(&m->lock);
}

void lru_touch(struct sandbox_mgr *m, struct context *c)
{
        pthread_mutex_lock(&m->lock);
        lru_unlink(m, c);
        lru_push_front(m, c);
        pthread_mutex_unlock(&m->lock);
}

void lru_evict(struct sandbox_mgr *m, struct context *keep)
{
        pthread_mutex_lock(&m->lock);
        struct context *c = m->lru_tail;
        while (m->resident > m->opt.max_resident_contexts && c) {
                struct context *prev = c->lru_prev;
                /* A context that is running right now is skipped, never
                 * waited for: eviction must not stall behind a long cell. */
                if (c != keep && pthread_mutex_trylock(&c->run_lock) == 0) {
                        lru_unlink(m, c);
                        kproc_free(c->kp);
                        c->kp = NULL;
                        log_debug("msg=\"evicted context\" context=%s", c->row.id);
                        pthread_mutex_unlock(&c->run_lock);
                }
                c = prev;
        }
        pthread_mutex_unlock(&m->lock);
}

void context_drop_interpreter(struct sandbox_mgr *m, struct context *c)
{
        pthread_mutex_lock(&m->lock);
        lru_unlink(m, c);
        pthread_mutex_unlock(&m->lock);
        kproc_free(c->kp);
        c->kp = NULL;
}
