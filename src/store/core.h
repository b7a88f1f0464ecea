/* What the store core's files (store.c, journal.c, journal_mode.c, logs.c, platform.c) share: the
 * frame every public function uses — arguments checked once for every
 * backend, the backend's op run under the lock of a backend that needs
 * serialising — and the row-list helpers. Private to src/store/. */
#pragma once

#include <pthread.h>
#include <stdint.h>

#include "base/cleanup.h"
#include "store/backend.h"

void store_core_rows_done(struct store_rows *l);
void *store_core_row(const struct store_rows *l, size_t i);
int store_core_check_id(const char *id);
int store_core_check_str(const char *v, size_t size);
pthread_mutex_t *store_core_lock(struct store *s);   /* NULL when the backend needs none */
void store_core_unlockp(pthread_mutex_t **m);

/* Rows a backend handed over, released whatever happens. */
#define _cleanup_rows_ _cleanup_(store_core_rows_done)

/* A char[] field of a row fits with its NUL (see store_core_check_str). */
#define CHECK_FIELD(row, f) store_core_check_str((row)->f, sizeof((row)->f))

/* Held until the end of the enclosing scope; the backend's own cleanups
 * (statements, transactions) have all run by then. Every write under it
 * waits for the disk (store_core_strict). */
#define STORE_GUARD(s) _cleanup_(store_core_unlockp) UNUSED pthread_mutex_t *store_guard_ = store_core_lock(s)

/* The guard of a write committed like a journal write
 * (store_set_journal_lazy): always, or with SCOPED_ only inside a
 * store_journal_scope of the calling thread. In place of STORE_GUARD. */
pthread_mutex_t *store_core_lock_journal(struct store *s);
bool store_core_lazy_on(struct store *s, bool scoped);
void store_core_lazy_off(struct store **sp);
void store_core_strict(struct store *s);
#define JOURNAL_GUARD_(s, scoped)                                                                         \
        _cleanup_(store_core_unlockp) UNUSED pthread_mutex_t *store_guard_ = store_core_lock_journal(s); \
        _cleanup_(store_core_lazy_off) struct store *lazy_ = store_core_lazy_on(s, scoped) ? (s) : NULL
#define JOURNAL_WRITE(s) JOURNAL_GUARD_(s, false)
#define SCOPED_JOURNAL_WRITE(s) JOURNAL_GUARD_(s, true)

/* The frame of most public functions: the arguments checked once for every
 * backend, then the backend's op run under the guard. */
#define STORE_CALL(s, args_ok, id, call)                \
        do {                                            \
                if (!(s) || !(args_ok))                 \
                        return -EINVAL;                 \
                int r_ = store_core_check_id(id);       \
                if (r_ < 0)                             \
                        return r_;                      \
                STORE_GUARD(s);                         \
                return (call);                          \
        } while (0)

/* One page of an org's rows into l (under the lock) and its total count. */
typedef int (*org_page_op)(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                           struct store_rows *out, uint64_t *ret_total);
int store_core_org_page(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, org_page_op op,
                        struct store_rows *l, uint64_t *ret_total);
