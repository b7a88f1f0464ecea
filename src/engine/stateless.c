/* One stateless execution end to end: a fresh jail (pre-spawned or made
 * now), one run, teardown. */
#include "engine/internal.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"

/* The process started but the engine lost it while running (not a guest
 * failure, which is an outcome). */
static void run_err(struct err *err, int r)
{
        err_set(err, ERR_INTERNAL, -r, "execution failed at run: %s", strerror(-r));
}

static int run_kernel(struct engine *e, const struct runtime *rt, const char *code, json_t *env,
                      bool typescript, struct exec_outcome *o, struct err *err)
{
        const struct exec_limits *lim = &e->opt.limits;
        uint64_t t0 = now_ns();
        /* Cheapest first: a booted pool member answers fastest; when the
         * pool is drained (sustained load) a template fork costs far less
         * CPU than a cold interpreter start. */
        struct kproc *kp = pool_take(e, rt);
        if (!kp)
                kp = zygote_fork(e, rt, lim);
        bool pooled = kp != NULL;
        int r = 0;
        if (!kp && (r = kproc_spawn(e, rt, "once", NULL, false, lim, &kp, err)) < 0)
                return r;
        json_t *req = exec_build_request(code, env, JAIL_WORKSPACE, typescript, lim->result_bytes, false);
        /* A fork below the interpreter (the shim) shares the template's
         * random state with every sibling until the kernel reseeds. */
        if (kp->forked)
                json_object_set_new(req, "reseed", json_true());
        uint64_t t1 = now_ns();
        if ((r = kproc_run(kp, req, lim, o)) < 0)
                run_err(err, r);
        log_debug("msg=\"stateless\" lang=%s pooled=%d take_ms=%.2f run_ms=%.2f", rt->id, pooled,
                  (double)(t1 - t0) / 1e6, (double)(now_ns() - t1) / 1e6);
        json_decref(req);
        engine_bury(e, &kp->p);
        return r;
}

/* The guest env as "K=V" strings after the base environment; keys with
 * '=' cannot be expressed and are skipped (the kernels reject them too). */
static size_t add_guest_env(json_t *env, const char **envp, size_t n, size_t max, char *scratch, size_t len)
{
        const char *key;
        json_t *v;
        size_t used = 0;
        json_object_foreach(env, key, v) {
                const char *val = json_string_value(v);
                if (!val || strchr(key, '=') || n + 1 >= max)
                        continue;
                int w = snprintf(scratch + used, len - used, "%s=%s", key, val);
                if (w < 0 || (size_t)w >= len - used)
                        break;
                envp[n++] = scratch + used;
                used += (size_t)w + 1;
        }
        envp[n] = NULL;
        return n;
}

/* The jail for one process: a pool member pre-spawned for exactly this
 * shape (private tmpfs workspace, its own netns, the engine's limits,
 * pipes, stdin /dev/null: pool.c) given its command now, else a cold one.
 * Either way a jail no command ran in before. */
static int process_jail(struct engine *e, const struct runtime *rt, const struct proc_spec *spec, struct proc **ret,
                        struct err *err)
{
        struct kproc *kp = pool_take(e, rt);
        if (kp && proc_start(&kp->p, spec, err) == 0) {
                *ret = &kp->p;
                return 1;
        }
        /* A member that died waiting (or any other failure) costs only
         * the cold spawn, which reports what is really wrong. */
        if (kp) {
                log_warn("msg=\"pooled jail failed, spawning cold\" lang=%s err=\"%s\"", rt->id, err->msg);
                err_done(err);
                engine_bury(e, &kp->p);
        }
        return proc_spawn(e, spec, ret, err);
}

/* A process runtime: its argv with the code as the last argument (bash -c). */
static int run_process(struct engine *e, const struct runtime *rt, const char *code, json_t *env,
                       struct exec_outcome *o, struct err *err)
{
        const char *argv[RUNTIME_MAX_ARGV + 2], *envp[JAIL_MAX_ENV + 1];
        size_t n = 0;
        for (; n < RUNTIME_MAX_ARGV && rt->argv[n]; n++)
                argv[n] = rt->argv[n];
        argv[n++] = code;
        argv[n] = NULL;
        size_t nenv = exec_base_env(rt, envp, JAIL_MAX_ENV);
        _cleanup_free_ char *scratch = malloc(64 * KiB);
        if (!scratch)
                return err_set(err, ERR_INTERNAL, ENOMEM, "execution failed: out of memory");
        if (env)
                add_guest_env(env, envp, nenv, JAIL_MAX_ENV, scratch, 64 * KiB);
        struct proc_spec spec = { .argv = argv, .envp = envp, .io = PROC_IO_PIPES };
        struct proc *p = NULL;
        uint64_t t0 = now_ns();
        int r = process_jail(e, rt, &spec, &p, err);
        if (r < 0)
                return r;
        bool pooled = r > 0;
        uint64_t t1 = now_ns();
        if ((r = proc_run(p, NULL, 0, &e->opt.limits, o)) < 0)
                run_err(err, r);
        log_debug("msg=\"stateless\" lang=%s pooled=%d take_ms=%.2f run_ms=%.2f early_exit=%d", rt->id, pooled,
                  (double)(t1 - t0) / 1e6, (double)(now_ns() - t1) / 1e6, p->exit_early);
        /* The run is over (init reaped, or, after an early end, killed and
         * left to the teardown): the teardown can wait until the requests
         * that follow this one are answered. */
        engine_bury_idle(e, p, o->memory_peak ? o->memory_peak : 1 * MiB);
        return r;
}

int exec_stateless(struct engine *e, const struct runtime *rt, const char *code, json_t *env,
                   bool typescript, struct exec_outcome *ret, struct err *err)
{
        *ret = (struct exec_outcome){ 0 };
        engine_inflight(e, +1);
        int r = rt->kind == RUNTIME_PROCESS ? run_process(e, rt, code, env, ret, err)
                                            : run_kernel(e, rt, code, env, typescript, ret, err);
        if (r < 0) {
                log_error("msg=\"execution failed\" lang=%s reason=%s err=\"%s\"", rt->id,
                          err_reason_name(err->reason), err->msg);
                exec_outcome_done(ret);
        }
        engine_inflight(e, -1);
        return r;
}
