/* Shared fixture of the sandbox domain tests (test_context.c,
 * test_session.c, test_pool.c): a real engine (jails), a real SQLite store and a
 * manager in a temp dir, freed at exit. Needs root (skips otherwise). */
#pragma once

#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "engine/proc.h"
#include "sandbox/sandbox.h"
#include "tap.h"

static struct {
        char dir[64];
        struct engine *engine;
        struct store *store;
        struct sandbox_mgr *mgr;
} g;

static void cleanup(void)
{
        sbx_mgr_free(g.mgr);
        store_close(g.store);
        engine_free(g.engine);
        if (g.dir[0])
                rm_rf(g.dir);
}

static const struct exec_limits LIM = {
        .cpu_ms = 5000, .wall_ms = 10000, .memory_bytes = 256 * MiB, .pids = 64,
        .output_bytes = 32 * KiB, .output_entries = 200, .result_bytes = 64 * KiB,
};

static void kernels_dir(char *out, size_t len)
{
        const char *me = __FILE__;
        const char *tail = strstr(me, "tests/unit/sandbox/sandbox_fixture.h");
        char cwd[PATH_MAX] = ".";
        if (tail && tail > me)
                snprintf(out, len, "%.*ssrc/runtimes/kernels", (int)(tail - me), me);
        else if (getcwd(cwd, sizeof(cwd)))
                snprintf(out, len, "%s/src/runtimes/kernels", cwd);
}

static void start_engine(void)
{
        struct engine_options o = {
                .cgroup_force = -1, .limits = LIM, .file_bytes = 1 * MiB, .nofile = 256,
                .tmp_bytes = 16 * MiB, .tmp_inodes = 1024, .workspace_bytes = 16 * MiB,
                .workspace_inodes = 1024, .workers = 2,
        };
        snprintf(o.run_dir, sizeof(o.run_dir), "%s/run", g.dir);
        kernels_dir(o.kernels_dir, sizeof(o.kernels_dir));
        struct err e = { 0 };
        int r = engine_new(&o, &g.engine, &e);
        if (r == -EPERM || r == -EACCES || r == -ENOSYS || r == -EOPNOTSUPP)
                SKIP("namespaces or cgroups not available here");
        if (r < 0)
                TAP_FAIL("engine_new: %d (%s)", r, e.msg);
        err_done(&e);
}

/* Starts the engine and the store, then a manager with opt (its data_dir
 * is filled in). Skips without root, or without python when need_python. */
static struct sandbox_mgr *mgr_start(struct sandbox_options *opt, bool need_python)
{
        if (geteuid() != 0)
                SKIP("needs root");
        atexit(cleanup);
        snprintf(g.dir, sizeof(g.dir), "/tmp/sbx-ctx-XXXXXX");
        ASSERT_TRUE(mkdtemp(g.dir) != NULL);
        char missing[128];
        runtime_probe_versions(missing, sizeof(missing));
        if (need_python && (!runtime_find("python") || !runtime_find("python")->version[0]))
                SKIP("python3 not installed");
        start_engine();
        char url[128];
        snprintf(url, sizeof(url), "sqlite:%s/db", g.dir);
        struct err e = { 0 };
        ASSERT_OK(store_open(url, &g.store, &e));
        snprintf(opt->data_dir, sizeof(opt->data_dir), "%s", g.dir);
        ASSERT_OK(sbx_mgr_new(opt, g.engine, g.store, &g.mgr));
        return g.mgr;
}

/* A manager with at most max_resident live interpreters. */
static UNUSED struct sandbox_mgr *mgr(uint64_t max_resident)
{
        struct sandbox_options opt = {
                .idle_ttl_ms = 0, .max_contexts = 3, .max_resident_contexts = max_resident,
                .workspace_bytes = 16 * MiB, .workspace_inodes = 1024, .file_bytes = 1 * MiB, .limits = LIM,
        };
        return mgr_start(&opt, true);
}

/* The pool tests' ids: warm1, warm2, … in the order made. */
static UNUSED int seq_id(char *out)
{
        static int n;
        snprintf(out, STORE_ID_MAX, "warm%d", ++n);
        return 0;
}

/* A manager's options with a warm pool of target (ids by seq_id when
 * target > 0) and at most max_sandboxes tenants' sandboxes. */
static UNUSED struct sandbox_options pool_opts(uint64_t target, uint64_t max_sandboxes)
{
        return (struct sandbox_options){
                .idle_ttl_ms = 3600000, .max_contexts = 3, .max_resident_contexts = 8,
                .max_sandboxes = max_sandboxes, .workspace_bytes = 16 * MiB, .workspace_inodes = 1024,
                .file_bytes = 1 * MiB, .limits = LIM,
                .pool = { .target = target, .refresh_ms = 100, .batch = 5, .new_id = target ? seq_id : NULL },
        };
}

/* Whether sandbox id's workspace image exists (the pool tests). */
static UNUSED bool image_exists(const char *id)
{
        char path[256];
        snprintf(path, sizeof(path), "%s/sandboxes/%s/workspace.img", g.dir, id);
        return access(path, F_OK) == 0;
}

static UNUSED struct sbx_pool_stats stats(void)
{
        struct sbx_pool_stats st;
        struct err e = { 0 };
        ASSERT_OK(sbx_pool_stats(g.mgr, &st, &e));
        return st;
}

/* A cell's first result text, or "error:<name>" (static buffer). */
static inline const char *cell_answer(const struct exec_outcome *o)
{
        static char out[256];
        json_t *err = json_object_get(o->response, "error");
        json_t *first = json_array_get(json_object_get(o->response, "results"), 0);
        if (err && !json_is_null(err))
                snprintf(out, sizeof(out), "error:%s", json_string_value(json_object_get(err, "name")));
        else
                snprintf(out, sizeof(out), "%s", first ? json_string_value(json_object_get(first, "text")) : "");
        return out;
}

/* Runs sh -c script in sandbox id of org_id (NULL: the default org, made
 * on first use) as a command (sbx_spawn); its stdout (static buffer), or
 * "ERR:<msg>". */
static UNUSED const char *run_command(const char *id, const char *org_id, const char *script, json_t *env)
{
        static char out[1024];
        const char *argv[] = { "/bin/sh", "-c", script, NULL };
        struct sbx_command cmd = { .argv = argv, .env = env, .org_id = org_id };
        struct proc *p = NULL;
        struct err e = { 0 };
        if (sbx_spawn(g.mgr, id, &cmd, &p, &e) < 0) {
                snprintf(out, sizeof(out), "ERR:%s", e.msg);
                err_done(&e);
                return out;
        }
        size_t len = 0;
        for (;;) {
                struct proc_fds fds;
                proc_fds(p, &fds);
                struct pollfd pf = { fds.stdout_fd, POLLIN, 0 };
                ASSERT_TRUE(poll(&pf, 1, 10000) > 0);
                ssize_t n = proc_read(p, 1, out + len, sizeof(out) - 1 - len);
                if (n > 0)
                        len += (size_t)n;
                else if (n != -EAGAIN && n != -EINTR)
                        break;
        }
        out[len] = '\0';
        struct proc_status st;
        ASSERT_OK(proc_wait(p, 10000, &st));
        proc_free(p);
        return out;
}

