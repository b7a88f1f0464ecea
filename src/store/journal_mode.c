/* How a commit reaches the disk: journal writes (a context's cells and
 * row, under sandbox.journal_sync=group|none) commit lazily, every other
 * write waits for the disk.
 *
 * Switching a SQLite connection's mode is a PRAGMA that is parsed anew
 * each time (it acts when prepared, so it cannot be kept prepared): two
 * per cell were a fifth of the store's CPU on a warm context round trip.
 * So on a serialized backend (one connection, all use under the store
 * lock) the lazy mode outlives the journal write that set it and is
 * switched back only when the lock is next taken for anything else
 * (store_core_strict, from STORE_GUARD): a run of cells switches once,
 * and no other write ever commits lazily. */
#include <errno.h>

#include "store/core.h"
#include "store/store.h"

/* store_journal_scope: this thread's context inserts and events follow
 * the journal's mode too. */
static __thread bool journal_scope;

void store_journal_scope(bool on)
{
        journal_scope = on;
}

/* Under the lock, before any op that is not a lazy journal write. A
 * failed switch is tried again at the next op (as before: the switch
 * back after a write was never checked either). */
void store_core_strict(struct store *s)
{
        if (s->lazy_left && s->ops->lazy_commit(s, false) == 0)
                s->lazy_left = false;
}

bool store_core_lazy_on(struct store *s, bool scoped)
{
        if (!s->journal_lazy || (scoped && !journal_scope)) {
                store_core_strict(s);
                return false;
        }
        if (s->lazy_left)   /* still lazy from the last journal write */
                return true;
        return s->ops->lazy_commit(s, true) == 0;
}

/* The end of one journal write's scope, before the lock is released: the
 * owner is told. A backend that is not serialized switches back now (no
 * lock would keep another thread's write from committing lazily). */
void store_core_lazy_off(struct store **sp)
{
        struct store *s = *sp;
        if (!s)
                return;
        if (s->ops->serialize)
                s->lazy_left = true;
        else
                s->ops->lazy_commit(s, false);
        if (s->lazy_written)
                s->lazy_written(s->lazy_userdata);
}

void store_set_journal_lazy(struct store *s, bool lazy, void (*written)(void *userdata), void *userdata)
{
        if (!s)
                return;
        s->journal_lazy = lazy;
        s->lazy_written = written;
        s->lazy_userdata = userdata;
}

int store_sync(struct store *s)
{
        return s ? s->ops->sync(s) : -EINVAL;
}
