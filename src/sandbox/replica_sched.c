/* The manager's side of the workspace replica (sandbox/replica.h): which
 * sandboxes are dirty, and one background thread that persists each at
 * most delay after its first mark since its last persist. A write burst
 * becomes one persist; a sandbox is never persisted more often than every
 * delay. Commands are long: one that runs keeps its sandbox dirty until it
 * has ended, so its last writes are caught. */
#include "sandbox/internal.h"
#include "sandbox/replica_internal.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/time.h"
#include "base/util.h"
#include "sandbox/archive.h"

/* Commands of one sandbox watched at once; past it the newest is not
 * watched (the sandbox is dirty anyway, and the older ones keep it so). */
#define ITEM_MAX_FDS 32

struct replica_item {
        char id[STORE_ID_MAX];
        struct replica_mark mark;
        int fds[ITEM_MAX_FDS];       /* exit fds of commands that may still run */
        size_t nfds;
};

struct replica_sched {
        struct replica *r;
        uint64_t delay_ns;
        struct bg_thread bg;         /* its own lock guards what follows; a leaf lock */
        struct replica_item *items;
        size_t n, cap;
};

/* ---- the debounce rule ---- */

void replica_mark_dirty(struct replica_mark *k, uint64_t now_ns, uint64_t delay_ns)
{
        if (k->dirty)
                return;
        k->dirty = true;
        k->due_ns = now_ns + delay_ns;
}

bool replica_mark_due(const struct replica_mark *k, uint64_t now_ns)
{
        return k->dirty && k->due_ns <= now_ns;
}

/* ---- the table (bg lock held) ---- */

static struct replica_item *item_find(struct replica_sched *q, const char *id)
{
        for (size_t i = 0; i < q->n; i++)
                if (strcmp(q->items[i].id, id) == 0)
                        return &q->items[i];
        return NULL;
}

static struct replica_item *item_get(struct replica_sched *q, const char *id)
{
        struct replica_item *it = item_find(q, id);
        if (it)
                return it;
        if (q->n == q->cap) {
                size_t cap = q->cap ? q->cap * 2 : 16;
                void *p = realloc(q->items, cap * sizeof(*q->items));
                if (!p)
                        return NULL;
                q->items = p;
                q->cap = cap;
        }
        it = &q->items[q->n++];
        *it = (struct replica_item){ 0 };
        snprintf(it->id, sizeof(it->id), "%s", id);
        return it;
}

static void item_remove(struct replica_sched *q, struct replica_item *it)
{
        for (size_t i = 0; i < it->nfds; i++)
                close(it->fds[i]);
        *it = q->items[--q->n];
}

/* Closes the exit fds of commands that have ended; true while one runs. */
static bool item_running(struct replica_item *it)
{
        for (size_t i = 0; i < it->nfds;) {
                struct pollfd p = { .fd = it->fds[i], .events = POLLIN };
                if (poll(&p, 1, 0) == 0) {
                        i++;
                        continue;
                }
                close(it->fds[i]);
                it->fds[i] = it->fds[--it->nfds];
        }
        return it->nfds > 0;
}

/* ---- persisting ---- */

static int write_tar(void *userdata, int fd, struct err *err)
{
        const struct sbx_workspace *ws = userdata;
        struct files_root root = { .fd = ws->root_fd, .limits = ws->limits, .uid = ws->uid, .gid = ws->gid };
        return files_persist(&root, NULL, 0, fd, err);
}

/* The tar is taken under s->lock (a files operation never runs half-way
 * through it, and the workspace stays mounted); its bytes travel to the
 * replica (fsync: an upload for a bucket) and are renamed into place
 * without it. A sandbox deleted meanwhile loses the replica this may just
 * have renamed in: sandbox_wipe marks it deleted before it deletes the
 * replica, so one of the two deletions comes last. */
static int persist(struct sandbox_mgr *m, struct replica *r, const char *id, struct replica_manifest *ret,
                   struct err *err)
{
        struct sandbox *s = sandbox_get_existing(m, NULL, id, err);
        if (!s)
                return err_ret(err);
        pthread_mutex_lock(&s->lock);
        struct sbx_workspace ws = { .root_fd = -1 };
        struct replica_stage st = { .fd = -1 };
        int k = s->deleted ? (sandbox_not_found(id, err), -ENOENT) : sandbox_workspace_locked(m, s, &ws, err);
        if (k == 0)
                k = replica_stage_open(r, id, write_tar, &ws, &st, err);
        if (ws.root_fd >= 0)
                close(ws.root_fd);
        pthread_mutex_unlock(&s->lock);
        if (k == 0)
                k = replica_stage_commit(r, id, &st, ret, err);
        pthread_mutex_lock(&m->lock);
        bool deleted = s->deleted;
        pthread_mutex_unlock(&m->lock);
        if (k == 0 && deleted)
                replica_delete(r, id);
        sandbox_put(m, s);
        return k;
}

static void persist_logged(struct sandbox_mgr *m, struct replica *r, const char *id)
{
        struct err err = { 0 };
        struct replica_manifest mf = { 0 };
        uint64_t t0 = now_ns(), wall0 = wall_ms();
        int k = persist(m, r, id, &mf, &err);
        if (k == -ENOENT)
                log_debug("msg=\"replica: sandbox gone\" sandbox=%s", id);
        else if (k == 0 && mf.persisted_at < wall0)
                log_debug("msg=\"replica unchanged\" sandbox=%s generation=%llu", id,
                          (unsigned long long)mf.generation);
        else if (k < 0)
                log_warn("msg=\"replica persist failed\" sandbox=%s error=\"%s\"", id, err.msg);
        else
                log_info("msg=\"replica persisted\" sandbox=%s generation=%llu bytes=%llu ms=%llu", id,
                         (unsigned long long)mf.generation, (unsigned long long)mf.bytes,
                         (unsigned long long)((now_ns() - t0) / 1000000));
        err_done(&err);
}

/* The earliest due time (0: nothing dirty). */
static uint64_t next_due(const struct replica_sched *q)
{
        uint64_t due = 0;
        for (size_t i = 0; i < q->n; i++)
                if (q->items[i].mark.dirty && (!due || q->items[i].mark.due_ns < due))
                        due = q->items[i].mark.due_ns;
        return due;
}

static void sched_loop(void *arg)
{
        struct sandbox_mgr *m = arg;
        struct replica_sched *q = m->replica;
        bg_thread_lock(&q->bg);
        while (bg_thread_running(&q->bg)) {
                uint64_t now = now_ns();
                struct replica_item *it = NULL;
                for (size_t i = 0; i < q->n && !it; i++)
                        if (replica_mark_due(&q->items[i].mark, now))
                                it = &q->items[i];
                if (!it) {
                        bg_thread_wait(&q->bg, next_due(q));
                        continue;
                }
                char id[STORE_ID_MAX];
                snprintf(id, sizeof(id), "%s", it->id);
                it->mark.dirty = false; /* a mark from now on is a new burst */
                bg_thread_unlock(&q->bg);
                persist_logged(m, q->r, id);
                bg_thread_lock(&q->bg);
                /* The item may have moved (the table grew) or gone (deleted). */
                if (!(it = item_find(q, id)))
                        continue;
                if (item_running(it))
                        replica_mark_dirty(&it->mark, now_ns(), q->delay_ns);
                else if (!it->mark.dirty)
                        item_remove(q, it);
        }
        bg_thread_unlock(&q->bg);
}

/* ---- the manager's calls ---- */

void sbx_mgr_set_replica(struct sandbox_mgr *m, struct replica *r, uint64_t delay_ms)
{
        if (m->replica || !r)
                return;
        struct replica_sched *q = calloc(1, sizeof(*q));
        if (!q || bg_thread_init(&q->bg, NULL) < 0) {
                free(q);
                log_error("msg=\"replica: out of memory; workspaces are not replicated\"");
                return;
        }
        q->r = r;
        q->delay_ns = delay_ms * 1000000ULL;
        m->replica = q;
        if (bg_thread_start(&q->bg, "sbx-replica", 1, sched_loop, m) < 0) {
                log_error("msg=\"replica: cannot start its thread; workspaces are not replicated\"");
                m->replica = NULL;
                bg_thread_done(&q->bg);
                free(q);
        }
}

static void mark(struct sandbox_mgr *m, const char *id, int exit_fd)
{
        struct replica_sched *q = m->replica;
        if (!q)
                return;
        bg_thread_lock(&q->bg);
        struct replica_item *it = item_get(q, id);
        if (it) {
                replica_mark_dirty(&it->mark, now_ns(), q->delay_ns);
                int fd = exit_fd >= 0 && it->nfds < ITEM_MAX_FDS ? fcntl(exit_fd, F_DUPFD_CLOEXEC, 3) : -1;
                if (fd >= 0)
                        it->fds[it->nfds++] = fd;
        } else {
                log_warn("msg=\"replica: out of memory; a write is not replicated\" sandbox=%s", id);
        }
        bg_thread_wake(&q->bg);
        bg_thread_unlock(&q->bg);
}

void sbx_replica_dirty(struct sandbox_mgr *m, const char *id)
{
        mark(m, id, -1);
}

void replica_dirty_command(struct sandbox_mgr *m, const char *id, int exit_fd)
{
        mark(m, id, exit_fd);
}

void replica_forget(struct sandbox_mgr *m, const char *id)
{
        struct replica_sched *q = m->replica;
        if (!q)
                return;
        bg_thread_lock(&q->bg);
        struct replica_item *it = item_find(q, id);
        if (it)
                item_remove(q, it);
        bg_thread_unlock(&q->bg);
        replica_delete(q->r, id);
}

void replica_sched_stop(struct sandbox_mgr *m)
{
        struct replica_sched *q = m->replica;
        if (!q)
                return;
        bg_thread_stop(&q->bg);
        /* The thread is gone: the table is ours. Every sandbox with a mark
         * or a command still running is persisted once more. */
        for (size_t i = 0; i < q->n; i++)
                if (q->items[i].mark.dirty || item_running(&q->items[i]))
                        persist_logged(m, q->r, q->items[i].id);
        while (q->n)
                item_remove(q, &q->items[q->n - 1]);
        free(q->items);
        bg_thread_done(&q->bg);
        m->replica = NULL;
        free(q);
}

int sbx_replica_persist_now(struct sandbox_mgr *m, const char *id, struct err *err)
{
        if (!m->replica)
                return err_set(err, ERR_UNAVAILABLE, ENOTSUP, "No workspace replica is configured");
        struct replica_manifest mf;
        return persist(m, m->replica->r, id, &mf, err);
}

/* ---- restore ---- */

static int restore_locked(struct sandbox_mgr *m, struct sandbox *s, const void *data, size_t len, struct err *err)
{
        struct sbx_workspace ws = { .root_fd = -1 };
        int k = sandbox_workspace_locked(m, s, &ws, err);
        if (k < 0)
                return k;
        struct files_root root = { .fd = ws.root_fd, .limits = ws.limits, .uid = ws.uid, .gid = ws.gid };
        const struct files_filter all = { 0 };
        k = files_restore(&root, &all, data, len, err);
        close(ws.root_fd);
        return k;
}

int sbx_replica_restore(struct sandbox_mgr *m, const char *id, struct err *err)
{
        if (!m->replica)
                return err_set(err, ERR_NOT_FOUND, ENOENT, "No workspace replica is configured");
        _cleanup_close_ int fd = -1;
        int k = replica_read(m->replica->r, id, &fd, err);
        if (k < 0)
                return k;
        /* Mapped, not read: a workspace's tar may be as large as its quota. */
        struct stat st;
        if (fstat(fd, &st) < 0 || st.st_size <= 0)
                return err_set(err, ERR_FILESYSTEM, st.st_size <= 0 ? EBADMSG : errno,
                               "Cannot read the replica of '%s'", id);
        size_t len = (size_t)st.st_size;
        void *data = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (data == MAP_FAILED)
                return err_set(err, ERR_FILESYSTEM, errno, "Cannot map the replica of '%s'", id);
        struct sandbox *s = sandbox_get_existing(m, NULL, id, err);
        if (!s) {
                munmap(data, len);
                return err_ret(err);
        }
        pthread_mutex_lock(&s->lock);
        k = s->deleted ? (sandbox_not_found(id, err), -ENOENT) : restore_locked(m, s, data, len, err);
        pthread_mutex_unlock(&s->lock);
        sandbox_put(m, s);
        munmap(data, len);
        if (k == 0)
                log_info("msg=\"workspace restored from its replica\" sandbox=%s bytes=%zu", id, len);
        return k;
}
