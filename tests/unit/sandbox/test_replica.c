/* The workspace replica (src/sandbox/replica.c, replica_sched.c): the
 * debounce rule alone; the target's files (atomic write, manifest,
 * unchanged content, a failed write); and with a real manager (root): a
 * persist and a restore round trip, the debounced thread, a running
 * command keeping its sandbox dirty, the replica deleted with its
 * sandbox. Each TEST runs in its own process. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/time.h"
#include "sandbox/archive.h"
#include "sandbox/replica.h"
#include "sandbox/replica_internal.h"
#include "sandbox_fixture.h"

#define MS 1000000ULL

TEST(replica_debounce_bounded_delay)
{
        struct replica_mark k = { 0 };
        ASSERT_FALSE(replica_mark_due(&k, 0));
        replica_mark_dirty(&k, 1000 * MS, 200 * MS);
        /* A burst: later marks never push the due time out. */
        for (uint64_t t = 1001; t < 1199; t += 7)
                replica_mark_dirty(&k, t * MS, 200 * MS);
        ASSERT_U64_EQ(k.due_ns, 1200 * MS);
        ASSERT_FALSE(replica_mark_due(&k, 1199 * MS));
        ASSERT_TRUE(replica_mark_due(&k, 1200 * MS));
        /* Persisted: the next mark starts a new burst, one delay later. */
        k.dirty = false;
        ASSERT_FALSE(replica_mark_due(&k, 5000 * MS));
        replica_mark_dirty(&k, 1201 * MS, 200 * MS);
        ASSERT_U64_EQ(k.due_ns, 1401 * MS);
}

static char dir[64];

static void tmpdir(void)
{
        snprintf(dir, sizeof(dir), "/tmp/replica-XXXXXX");
        ASSERT_TRUE(mkdtemp(dir) != NULL);
}

static struct replica *open_dir(const char *path)
{
        char target[128];
        snprintf(target, sizeof(target), "dir:%s", path);
        struct replica *r = NULL;
        struct err e = { 0 };
        ASSERT_OK(replica_open(target, NULL, &r, &e));
        return r;
}

TEST(replica_open_refuses_bad_targets)
{
        const char *bad[] = { "", "dir:relative/path", "ftp://x", "s3://", "/abs/without/scheme" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                struct replica *r = NULL;
                struct err e = { 0 };
                ASSERT_TRUE(replica_open(bad[i], NULL, &r, &e) < 0);
                ASSERT_EQ(e.reason, ERR_INVALID);
                ASSERT_NULL(r);
                err_done(&e);
        }
}

struct blob {
        const char *data;
        bool fail;
};

static int write_blob(void *userdata, int fd, struct err *err)
{
        const struct blob *b = userdata;
        if (write(fd, b->data, strlen(b->data)) != (ssize_t)strlen(b->data))
                return -EIO;
        if (b->fail)
                return err_set(err, ERR_FILESYSTEM, EIO, "writer failed");
        return 0;
}

/* Entries of dir but "." and ".."; a hidden one (a temp file) counts too. */
static int entries(const char *path)
{
        DIR *d = opendir(path);
        ASSERT_NOT_NULL(d);
        int n = 0;
        for (struct dirent *de; (de = readdir(d));)
                n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
        closedir(d);
        return n;
}

static void cat(const char *path, char *out, size_t len)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ssize_t n = read(fd, out, len - 1);
        ASSERT_TRUE(n >= 0);
        out[n] = '\0';
        close(fd);
}

TEST(replica_write_manifest_generations)
{
        tmpdir();
        char sub[128], path[256], text[64];
        snprintf(sub, sizeof(sub), "%s/made/here", dir); /* made by replica_open */
        struct replica *r = open_dir(sub);
        struct replica_manifest mf, rd;
        struct err e = { 0 };
        struct blob b = { "first" };
        uint64_t before = wall_ms();
        ASSERT_OK(replica_write(r, "sb1", write_blob, &b, &mf, &e));
        ASSERT_U64_EQ(mf.generation, 1);
        ASSERT_U64_EQ(mf.bytes, 5);
        ASSERT_TRUE(mf.persisted_at >= before);
        snprintf(path, sizeof(path), "%s/sb1.tar", sub);
        cat(path, text, sizeof(text));
        ASSERT_STREQ(text, "first");
        ASSERT_OK(replica_manifest_read(r, "sb1", &rd));
        ASSERT_STREQ(rd.sha256, mf.sha256);
        ASSERT_U64_EQ(rd.generation, 1);
        ASSERT_EQ(entries(sub), 2); /* sb1.tar, sb1.json: no temp file left */

        /* The same bytes again: nothing written, no new generation. */
        ASSERT_OK(replica_write(r, "sb1", write_blob, &b, &mf, &e));
        ASSERT_U64_EQ(mf.generation, 1);
        b.data = "second";
        ASSERT_OK(replica_write(r, "sb1", write_blob, &b, &mf, &e));
        ASSERT_U64_EQ(mf.generation, 2);
        cat(path, text, sizeof(text));
        ASSERT_STREQ(text, "second");

        /* A writer failing half-way leaves the old tar whole and no temp. */
        b = (struct blob){ "third, torn", true };
        ASSERT_TRUE(replica_write(r, "sb1", write_blob, &b, &mf, &e) < 0);
        err_done(&e);
        cat(path, text, sizeof(text));
        ASSERT_STREQ(text, "second");
        ASSERT_EQ(entries(sub), 2);
        ASSERT_OK(replica_manifest_read(r, "sb1", &rd));
        ASSERT_U64_EQ(rd.generation, 2);

        int fd = -1;
        ASSERT_OK(replica_read(r, "sb1", &fd, &e));
        close(fd);
        replica_delete(r, "sb1");
        ASSERT_EQ(entries(sub), 0);
        ASSERT_EQ(replica_read(r, "sb1", &fd, &e), -ENOENT);
        ASSERT_EQ(e.reason, ERR_NOT_FOUND);
        err_done(&e);
        ASSERT_EQ(replica_manifest_read(r, "sb1", &rd), -ENOENT);
        replica_free(r);
        rm_rf(dir);
}

/* ---- with a real manager ---- */

static struct replica *rep;
static char rdir[256];

static void with_replica(uint64_t delay_ms)
{
        mgr(4);
        snprintf(rdir, sizeof(rdir), "%s/replica", g.dir);
        rep = open_dir(rdir);
        sbx_mgr_set_replica(g.mgr, rep, delay_ms);
}

/* The manager goes before exit: its shutdown flush hashes with OpenSSL,
 * whose own atexit clean-up would run before the fixture's. */
static void done(void)
{
        sbx_mgr_free(g.mgr);
        g.mgr = NULL;
        replica_free(rep);
        rep = NULL;
}

static void put(const char *id, const char *path, const char *text)
{
        struct sbx_workspace ws;
        struct err e = { 0 };
        ASSERT_OK(sbx_workspace_acquire(g.mgr, id, &ws, &e));
        struct files_root root = { .fd = ws.root_fd, .limits = ws.limits, .uid = ws.uid, .gid = ws.gid };
        int r = files_put(&root, path, text, strlen(text), FILES_RECURSIVE, &e);
        sbx_workspace_release(g.mgr, &ws);
        if (r < 0)
                TAP_FAIL("files_put %s: %s", path, e.msg);
}

/* The workspace file's text, or "" when it does not exist. */
static const char *get(const char *id, const char *path)
{
        static char out[256];
        struct sbx_workspace ws;
        struct err e = { 0 };
        struct files_blob b = { 0 };
        ASSERT_OK(sbx_workspace_acquire(g.mgr, id, &ws, &e));
        struct files_root root = { .fd = ws.root_fd, .limits = ws.limits, .uid = ws.uid, .gid = ws.gid };
        int r = files_read(&root, path, &b, &e);
        sbx_workspace_release(g.mgr, &ws);
        snprintf(out, sizeof(out), "%.*s", r == 0 ? (int)b.len : 0, r == 0 ? (const char *)b.data : "");
        files_blob_done(&b);
        err_done(&e);
        return out;
}

static void del(const char *id, const char *path)
{
        struct sbx_workspace ws;
        struct err e = { 0 };
        ASSERT_OK(sbx_workspace_acquire(g.mgr, id, &ws, &e));
        struct files_root root = { .fd = ws.root_fd, .limits = ws.limits, .uid = ws.uid, .gid = ws.gid };
        ASSERT_OK(files_delete(&root, path, 0, &e));
        sbx_workspace_release(g.mgr, &ws);
}

struct find {
        const char *rel;
        bool found;
};

static int find_entry(void *userdata, const struct files_tar_entry *te)
{
        struct find *f = userdata;
        f->found |= strcmp(te->rel, f->rel) == 0;
        return 0;
}

/* Whether id's replica tar holds rel. */
static bool replica_has(const char *id, const char *rel)
{
        char path[512];
        snprintf(path, sizeof(path), "%s/%s.tar", rdir, id);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        struct find f = { rel, false };
        struct err e = { 0 };
        ASSERT_OK(files_tar_each(fd, find_entry, &f, &e));
        close(fd);
        return f.found;
}

static uint64_t generation(const char *id)
{
        struct replica_manifest mf;
        return replica_manifest_read(rep, id, &mf) == 0 ? mf.generation : 0;
}

static bool wait_for(const char *id, const char *rel, uint64_t timeout_ms)
{
        for (uint64_t end = wall_ms() + timeout_ms; wall_ms() < end; usleep(20000))
                if (replica_has(id, rel))
                        return true;
        return false;
}

/* A manager whose thread never fires on its own, and sandbox id with
 * path = text persisted now. */
static void persisted(const char *id, const char *path, const char *text)
{
        with_replica(3600000);
        put(id, path, text);
        struct err e = { 0 };
        ASSERT_OK(sbx_replica_persist_now(g.mgr, id, &e));
        ASSERT_TRUE(replica_has(id, path));
}

TEST(replica_persist_restore_round_trip)
{
        with_replica(3600000); /* the thread never fires on its own here */
        put("rt", "a.txt", "alpha");
        put("rt", "d/b.txt", "beta");
        ASSERT_FALSE(replica_has("rt", "a.txt"));
        struct err e = { 0 };
        ASSERT_OK(sbx_replica_persist_now(g.mgr, "rt", &e));
        ASSERT_TRUE(replica_has("rt", "a.txt"));
        ASSERT_TRUE(replica_has("rt", "d/b.txt"));
        ASSERT_U64_EQ(generation("rt"), 1);

        /* The workspace drifts; the restore makes it the replica again. */
        del("rt", "a.txt");
        put("rt", "c.txt", "gamma");
        ASSERT_STREQ(get("rt", "a.txt"), "");
        ASSERT_OK(sbx_replica_restore(g.mgr, "rt", &e));
        ASSERT_STREQ(get("rt", "a.txt"), "alpha");
        ASSERT_STREQ(get("rt", "d/b.txt"), "beta");
        ASSERT_STREQ(get("rt", "c.txt"), "");

        ASSERT_EQ(sbx_replica_restore(g.mgr, "never-persisted", &e), -ENOENT);
        ASSERT_EQ(e.reason, ERR_NOT_FOUND);
        err_done(&e);
        done();
}

/* The adoption path: node A persists and goes away; node B (its own data
 * dir, so no workspace image of the sandbox; the same store and replica)
 * fills a fresh workspace from the replica. */
TEST(replica_restore_on_another_node)
{
        persisted("adopt", "keep/me.txt", "survives");
        struct err e = { 0 };
        sbx_mgr_free(g.mgr);
        g.mgr = NULL;

        struct sandbox_options opt = {
                .max_contexts = 3, .max_resident_contexts = 4, .workspace_bytes = 16 * MiB,
                .workspace_inodes = 1024, .file_bytes = 1 * MiB, .limits = LIM,
        };
        snprintf(opt.data_dir, sizeof(opt.data_dir), "%s/node-b", g.dir);
        ASSERT_OK(mkdir_p(opt.data_dir, 0700));
        ASSERT_OK(sbx_mgr_new(&opt, g.engine, g.store, &g.mgr));
        sbx_mgr_set_replica(g.mgr, rep, 3600000);
        ASSERT_STREQ(get("adopt", "keep/me.txt"), ""); /* a fresh, empty workspace */
        ASSERT_OK(sbx_replica_restore(g.mgr, "adopt", &e));
        ASSERT_STREQ(get("adopt", "keep/me.txt"), "survives");
        done();
}

TEST(replica_thread_coalesces_a_burst)
{
        with_replica(300);
        for (int i = 0; i < 20; i++) {
                char name[32];
                snprintf(name, sizeof(name), "f%02d.txt", i);
                put("burst", name, "x");
        }
        ASSERT_TRUE(wait_for("burst", "f19.txt", 10000));
        /* 20 writes within the delay: one persist (two if the burst
         * straddled the first due time), never one per write. */
        usleep(800000);
        uint64_t gen = generation("burst");
        ASSERT_TRUE(gen >= 1 && gen <= 2);
        done();
}

TEST(replica_running_command_stays_dirty)
{
        with_replica(200);
        const char *argv[] = { "/bin/sh", "-c", "sleep 0.8; echo late > /workspace/late.txt", NULL };
        const struct sbx_command cmd = { .argv = argv };
        struct proc *p = NULL;
        struct err e = { 0 };
        ASSERT_OK(sbx_spawn(g.mgr, "cmd", &cmd, &p, &e));
        /* No write by the API after the start: only the command's own
         * exit, watched by the thread, can bring late.txt in. */
        ASSERT_TRUE(wait_for("cmd", "late.txt", 10000));
        proc_bury(p);
        done();
}

TEST(replica_deleted_with_its_sandbox)
{
        persisted("gone", "a.txt", "alpha");
        struct err e = { 0 };
        ASSERT_OK(sbx_destroy(g.mgr, "gone", &e));
        char path[512];
        snprintf(path, sizeof(path), "%s/gone.tar", rdir);
        ASSERT_TRUE(access(path, F_OK) < 0);
        snprintf(path, sizeof(path), "%s/gone.json", rdir);
        ASSERT_TRUE(access(path, F_OK) < 0);
        done();
}

TEST(replica_flushed_at_shutdown)
{
        with_replica(3600000);
        put("flush", "a.txt", "alpha");
        ASSERT_FALSE(replica_has("flush", "a.txt"));
        done();
        ASSERT_TRUE(replica_has("flush", "a.txt"));
}
