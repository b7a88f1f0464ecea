/* The least-recently-used list of resident context interpreters, capped by
 * max_resident_contexts in total and max_resident_per_sandbox per sandbox.
 * An evicted context keeps its journal, so its next use restores it (and
 * the answer says so). Every function takes m->lock itself.
 *
 * Eviction is fair between sandboxes (issue 10 row 7): a sandbox over its
 * own cap evicts its own; over the global cap, the victim is the oldest
 * idle interpreter of a sandbox holding MORE residents than the one asking
 * (or one idle for longer than resident_grace_ms), else the asker's own —
 * possibly the interpreter that just ran, after its cell. So touching many
 * contexts never takes an interpreter from a sandbox that holds no more
 * than the toucher. */
#include "sandbox/internal.h"

#include "base/log.h"
#include "base/time.h"

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
        c->sbx->resident--;
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
        c->sbx->resident++;
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

/* May c be evicted on behalf of self? Others must be idle: their run_lock
 * is taken here (and held on true). self's is held by the caller. */
static bool take_idle(struct context *c, const struct context *self, bool self_ok)
{
        if (c == self)
                return self_ok;
        return pthread_mutex_trylock(&c->run_lock) == 0;
}

/* Is c's sandbox a fair victim for self's: it holds more residents, or c
 * has been idle past the grace period (an abandoned interpreter). */
static bool fair_victim(const struct sandbox_mgr *m, const struct context *c, const struct context *self,
                        uint64_t now)
{
        if (c->sbx == self->sbx)
                return false;
        return c->sbx->resident > self->sbx->resident ||
               (m->opt.resident_grace_ms && c->row.last_used + m->opt.resident_grace_ms < now);
}

/* The oldest idle interpreter of self's sandbox (own) or of a fair victim
 * sandbox (!own), with its run_lock held unless it is self. */
static struct context *oldest_idle(struct sandbox_mgr *m, struct context *self, bool self_ok, bool own)
{
        uint64_t now = wall_ms();
        for (struct context *c = m->lru_tail; c; c = c->lru_prev) {
                bool match = own ? c->sbx == self->sbx : fair_victim(m, c, self, now);
                if (match && take_idle(c, self, self_ok))
                        return c;
        }
        return NULL;
}

static struct context *pick_victim(struct sandbox_mgr *m, struct context *self, bool self_ok)
{
        if (self->sbx->resident > m->opt.max_resident_per_sandbox)
                return oldest_idle(m, self, self_ok, true);
        if (m->resident <= m->opt.max_resident_contexts)
                return NULL;
        struct context *v = oldest_idle(m, self, self_ok, false);
        return v ? v : oldest_idle(m, self, self_ok, true);
}

void lru_evict(struct sandbox_mgr *m, struct context *self, bool self_ok)
{
        pthread_mutex_lock(&m->lock);
        struct context *c;
        /* Each round removes one resident, so this ends. */
        while ((c = pick_victim(m, self, self_ok))) {
                lru_unlink(m, c);
                kproc_free(c->kp);
                c->kp = NULL;
                c->lost = c == self ? CONTEXT_LOST_EVICTED_OWN : CONTEXT_LOST_EVICTED;
                log_debug("msg=\"evicted context\" context=%s sandbox=%s for=%s", c->row.id, c->sbx->row.id,
                          self->sbx->row.id);
                if (c != self)
                        pthread_mutex_unlock(&c->run_lock);
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

size_t sbx_resident_count(struct sandbox_mgr *m)
{
        pthread_mutex_lock(&m->lock);
        size_t n = m->resident;
        pthread_mutex_unlock(&m->lock);
        return n;
}
