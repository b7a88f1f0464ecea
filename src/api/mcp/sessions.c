/* The MCP sessions of /mcp: a table under one lock, kept in order of use
 * (most recent first) so that the idle ones sit at the tail. The table
 * holds one reference to each session and every request in flight one
 * more; a session leaves the table when DELETEd, idle too long or pushed
 * out by a newer one, and is freed when its last call returns. Expiry is
 * checked whenever the table is used: no timer thread. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "api/mcp/internal.h"
#include "base/time.h"

struct mcp_entry {
        char id[MCP_HTTP_ID_LEN + 1];
        struct mcp_session *session;
        int refs;                   /* under the table's lock */
        uint64_t used_ms;
        struct mcp_entry *next;
};

struct mcp_session *mcp_entry_session(struct mcp_entry *e)
{
        return e->session;
}

const char *mcp_entry_id(const struct mcp_entry *e)
{
        return e->id;
}

void mcp_table_init(struct mcp_table *t, size_t max, uint64_t idle_ms)
{
        *t = (struct mcp_table){ .max = max, .idle_ms = idle_ms };
        pthread_mutex_init(&t->lock, NULL);
}

static void entry_free(struct mcp_entry *e)
{
        mcp_session_free(e->session);
        free(e);
}

/* Under the lock: drops a reference; returns e when it was the last (the
 * caller frees it outside the lock: a session may take its time). */
static struct mcp_entry *unref_locked(struct mcp_entry *e)
{
        return --e->refs == 0 ? e : NULL;
}

/* Under the lock: unlinks *p, returning the entry if now unreferenced. */
static struct mcp_entry *unlink_locked(struct mcp_table *t, struct mcp_entry **p)
{
        struct mcp_entry *e = *p;
        *p = e->next;
        e->next = NULL;
        t->n--;
        return unref_locked(e);
}

/* Under the lock: unlinks the sessions idle past idle_ms onto *dead. */
static void expire_locked(struct mcp_table *t, uint64_t now, struct mcp_entry **dead)
{
        for (struct mcp_entry **p = &t->list; *p;) {
                struct mcp_entry *e = *p;
                if (e->refs > 1 || now - e->used_ms < t->idle_ms) {
                        p = &e->next;
                        continue;
                }
                struct mcp_entry *gone = unlink_locked(t, p);
                if (gone) {
                        gone->next = *dead;
                        *dead = gone;
                }
        }
}

static void free_list(struct mcp_entry *dead)
{
        while (dead) {
                struct mcp_entry *next = dead->next;
                entry_free(dead);
                dead = next;
        }
}

void mcp_table_done(struct mcp_table *t)
{
        struct mcp_entry *dead = NULL;
        pthread_mutex_lock(&t->lock);
        while (t->list) {
                struct mcp_entry *gone = unlink_locked(t, &t->list);
                if (gone) {
                        gone->next = dead;
                        dead = gone;
                }
        }
        pthread_mutex_unlock(&t->lock);
        free_list(dead);
        pthread_mutex_destroy(&t->lock);
}

static int new_id(char *out)
{
        unsigned char b[MCP_HTTP_ID_BYTES];
        if (getrandom(b, sizeof(b), 0) != sizeof(b))
                return -EIO;
        for (size_t i = 0; i < sizeof(b); i++)
                snprintf(out + 2 * i, 3, "%02x", b[i]);
        return 0;
}

/* Under the lock, with the table full: ends the least recently used
 * session no call is using. false when all are busy. */
static bool evict_locked(struct mcp_table *t, struct mcp_entry **dead)
{
        struct mcp_entry **victim = NULL;
        for (struct mcp_entry **p = &t->list; *p; p = &(*p)->next)
                if ((*p)->refs == 1)
                        victim = p;
        if (!victim)
                return false;
        struct mcp_entry *gone = unlink_locked(t, victim);
        if (gone) {
                gone->next = *dead;
                *dead = gone;
        }
        return true;
}

int mcp_table_create(struct mcp_table *t, struct mcp_entry **ret)
{
        struct mcp_entry *e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        int r = new_id(e->id);
        if (r >= 0)
                r = mcp_session_new(&e->session);
        if (r < 0) {
                free(e);
                return r;
        }
        struct mcp_entry *dead = NULL;
        pthread_mutex_lock(&t->lock);
        uint64_t now = now_ms();
        expire_locked(t, now, &dead);
        bool room = t->n < t->max || evict_locked(t, &dead);
        if (room) {
                e->refs = 2; /* the table's and the caller's */
                e->used_ms = now;
                e->next = t->list;
                t->list = e;
                t->n++;
        }
        pthread_mutex_unlock(&t->lock);
        free_list(dead);
        if (!room) {
                entry_free(e);
                return -EBUSY;
        }
        *ret = e;
        return 0;
}

struct mcp_entry *mcp_table_get(struct mcp_table *t, const char *id)
{
        struct mcp_entry *dead = NULL, *found = NULL;
        pthread_mutex_lock(&t->lock);
        expire_locked(t, now_ms(), &dead);
        for (struct mcp_entry **p = &t->list; *p; p = &(*p)->next) {
                struct mcp_entry *e = *p;
                if (strcmp(e->id, id) != 0)
                        continue;
                /* To the front: the list stays in order of use. */
                *p = e->next;
                e->next = t->list;
                t->list = e;
                e->refs++;
                found = e;
                break;
        }
        pthread_mutex_unlock(&t->lock);
        free_list(dead);
        return found;
}

void mcp_table_put(struct mcp_table *t, struct mcp_entry *e)
{
        if (!e)
                return;
        pthread_mutex_lock(&t->lock);
        /* A long call does not make its session idle. */
        e->used_ms = now_ms();
        struct mcp_entry *gone = unref_locked(e);
        pthread_mutex_unlock(&t->lock);
        if (gone)
                entry_free(gone);
}

/* Under the lock: the link that points at the entry matching (id or e). */
static struct mcp_entry **find_locked(struct mcp_table *t, const char *id, const struct mcp_entry *e)
{
        for (struct mcp_entry **p = &t->list; *p; p = &(*p)->next)
                if (e ? *p == e : strcmp((*p)->id, id) == 0)
                        return p;
        return NULL;
}

static bool remove_match(struct mcp_table *t, const char *id, const struct mcp_entry *e)
{
        pthread_mutex_lock(&t->lock);
        struct mcp_entry **p = find_locked(t, id, e);
        struct mcp_entry *gone = p ? unlink_locked(t, p) : NULL;
        pthread_mutex_unlock(&t->lock);
        if (gone)
                entry_free(gone);
        return p != NULL;
}

bool mcp_table_remove(struct mcp_table *t, const char *id)
{
        return remove_match(t, id, NULL);
}

void mcp_table_drop(struct mcp_table *t, struct mcp_entry *e)
{
        remove_match(t, NULL, e);
}
