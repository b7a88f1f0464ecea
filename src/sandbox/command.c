/* Commands in a sandbox: one jailed process per call, in the same jail
 * context as the sandbox's interpreters (workspace, network namespace, host
 * id, parent cgroup). The bridge API's /exec, sessions and terminals are
 * built on this; nothing here knows a facade. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "engine/kproc.h"
#include "engine/proc.h"
#include "jail/jail.h"
#include "sandbox/internal.h"
#include "sandbox/replica.h"

/* "K=V" strings of the command's environment, owned by the struct. */
struct command_env {
        char *strings[JAIL_MAX_ENV];
        const char *envp[JAIL_MAX_ENV + 1];
        size_t n;
};

static void command_env_done(struct command_env *ce)
{
        for (size_t i = 0; i < ce->n; i++)
                free(ce->strings[i]);
        ce->n = 0;
}

static int command_env_strings(json_t *all, struct command_env *ce, struct err *err)
{
        const char *k;
        json_t *v;
        json_object_foreach(all, k, v)
        {
                if (ce->n >= JAIL_MAX_ENV)
                        return err_set(err, ERR_INVALID, E2BIG, "more than %d environment variables", JAIL_MAX_ENV);
                if (asprintf(&ce->strings[ce->n], "%s=%s", k, json_string_value(v)) < 0)
                        return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
                ce->envp[ce->n] = ce->strings[ce->n];
                ce->n++;
        }
        ce->envp[ce->n] = NULL;
        return 0;
}

json_t *command_env_json(json_t *sandbox_env, json_t *call_env)
{
        const char *base[JAIL_MAX_ENV];
        size_t nbase = exec_base_env(runtime_find("shell"), base, ARRAY_SIZE(base));
        json_t *all = json_object();
        if (!all)
                return NULL;
        for (size_t i = 0; i < nbase; i++) {
                const char *eq = strchr(base[i], '=');
                char key[128];
                snprintf(key, sizeof(key), "%.*s", (int)(eq - base[i]), base[i]);
                json_object_set_new(all, key, json_string(eq + 1));
        }
        /* HOME is the workspace for a command: tools keep their dotfiles
         * (shell history, caches) where the user's files persist. */
        json_object_set_new(all, "HOME", json_string("/workspace"));
        env_merge(all, sandbox_env);
        if (call_env)
                env_merge(all, call_env);
        return all;
}

/* base < the org's env < the sandbox's < the call's. Caller holds s->lock. */
static int command_env_build(struct sandbox_mgr *m, struct sandbox *s, json_t *call_env, struct command_env *ce,
                             struct err *err)
{
        *ce = (struct command_env){ 0 };
        json_t *org = NULL;
        int r = sandbox_env_over_org(m, s, s->env, &org, err);
        if (r < 0)
                return r;
        json_t *all = command_env_json(org, call_env);
        json_decref(org);
        if (!all)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        sandbox_egress_env(m, s, all);
        r = command_env_strings(all, ce, err);
        json_decref(all);
        return r;
}

/* The sandbox's execution limits without the per-call CPU and wall caps. */
static struct exec_limits command_limits(const struct sandbox_mgr *m, const struct sandbox *s)
{
        struct exec_limits lim = m->opt.limits;
        lim.cpu_ms = 0;
        lim.wall_ms = 0;
        lim.file_bytes = sandbox_file_bytes(m, s);
        /* A sandbox's own memory is its commands' too (its group holds
         * them all together anyway). */
        if (s->row.memory_bytes)
                lim.memory_bytes = s->row.memory_bytes;
        return lim;
}

void command_site_done(struct command_site *cs)
{
        mount_view_done(&cs->view);
        if (cs->fd >= 0)
                close(cs->fd);
        cs->fd = -1;
}

/* Caller holds s->lock: the workspace stays mounted while the jail takes
 * its copy of the mount. */
int command_site_open(struct sandbox_mgr *m, struct sandbox *s, struct command_site *cs, struct err *err)
{
        cs->fd = -1;
        cs->view.n = 0;
        int r = sandbox_open_workspace(m, s, err);
        if (r < 0)
                return r;
        sandbox_netns(m, s);
        /* Without its group a sandbox of its own cpus/memory would run
         * unlimited: refuse rather than downgrade. */
        r = sandbox_cgroup(m, s);
        if (r < 0 && (s->row.cpu_millis || s->row.memory_bytes))
                return err_set(err, ERR_UNAVAILABLE, -r, "Cannot enforce the sandbox's CPU and memory limits: %s",
                               strerror(-r));
        cs->fd = open(s->ws.mount, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (cs->fd < 0 || fstat(cs->fd, &cs->st) < 0)
                return err_set(err, ERR_INTERNAL, errno, "Cannot open the workspace: %s", strerror(errno));
        cs->ws = (struct kproc_workspace){ .dir = s->ws.mount, .fd = cs->fd };
        mount_view_take(s, &cs->view);
        /* Commands may use TCP/UDP on the sandbox's own loopback (servers
         * for its tunnels); only when it has a namespace of its own. */
        cs->where = (struct kproc_where){ .ws = &cs->ws, .netns_fd = s->netns_fd, .host_id = s->row.host_id,
                                          .group = s->cgroup, .allow_inet = s->netns_fd >= 0,
                                          .local_dns = s->egress != NULL, .binds = cs->view.binds,
                                          .nbinds = cs->view.n };
        cs->lim = command_limits(m, s);
        return 0;
}

static int spawn_locked(struct sandbox_mgr *m, struct sandbox *s, const struct sbx_command *cmd,
                        const struct command_env *ce, struct proc **ret, struct err *err)
{
        _cleanup_(command_site_done) struct command_site cs;
        int r = command_site_open(m, s, &cs, err);
        if (r < 0)
                return r;
        struct proc_spec spec = {
                .argv = cmd->argv,
                .envp = ce->envp,
                .cwd = cmd->cwd,
                .io = cmd->pty ? PROC_IO_PTY : PROC_IO_PIPES,
                .stdin_pipe = cmd->stdin_pipe,
                .side_channel = cmd->side_channel,
                .rows = cmd->rows,
                .cols = cmd->cols,
                .limits = cmd->limits ? cmd->limits : &cs.lim,
                .where = &cs.where,
        };
        struct err why = { 0 };
        /* The sandbox's spare jail when it was built for exactly this
         * (spare.c), else a cold one; either way a jail no command ran in. */
        if (!cmd->pty && !cmd->limits)
                *ret = spare_take(m, s, &cs, &spec);
        r = *ret ? 0 : proc_spawn(m->engine, &spec, ret, &why);
        if (r == 0) {
                struct proc_fds fds;
                proc_fds(*ret, &fds);
                sandbox_jail_started(s, fds.exit_fd);
                replica_dirty_command(m, s->row.id, fds.exit_fd); /* dirty until it ends */
                if (!cmd->pty && !cmd->limits)
                        spare_want(m, s, cmd->stdin_pipe, cmd->side_channel);
        }
        if (r < 0) {
                err_set(err, why.reason == ERR_INVALID ? ERR_INVALID : ERR_UNAVAILABLE, -r, "Cannot start the command (%s)",
                        why.msg);
                err_done(&why);
        }
        return r;
}

int sbx_spawn(struct sandbox_mgr *m, const char *id, const struct sbx_command *cmd, struct proc **ret,
              struct err *err)
{
        *ret = NULL;
        struct sandbox *s = sandbox_enter_org(m, cmd->org_id, id, err);
        if (!s)
                return err_ret(err);
        struct command_env ce;
        /* Its namespace (and egress proxy, whose variables the env gets)
         * before the env is built. */
        sandbox_netns(m, s);
        int r = command_env_build(m, s, cmd->env, &ce, err);
        if (r == 0)
                r = spawn_locked(m, s, cmd, &ce, ret, err);
        command_env_done(&ce);
        sandbox_leave(m, s);
        return r;
}
