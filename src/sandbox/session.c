/* The bridge's shell sessions: a named shell state (cwd, environment,
 * shell text) per sandbox, kept in memory beside the sandbox (shell.c runs
 * commands in it). Sessions are not a security boundary: they share the
 * sandbox's files and processes, as the anchor's do. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "engine/proc.h"
#include "jail/jail.h"
#include "sandbox/session.h"
#include "sandbox/terminal.h"

int sbx_workspace_path(const char *path, char *out, size_t len)
{
        char buf[4096];
        if (snprintf(buf, sizeof(buf), "%s%s", path[0] == '/' ? "" : "/workspace/", path) >= (int)sizeof(buf))
                return -ENAMETOOLONG;
        size_t n = 0;
        char *save = NULL;
        for (char *seg = strtok_r(buf, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
                if (strcmp(seg, ".") == 0)
                        continue;
                if (strcmp(seg, "..") == 0) {
                        while (n > 0 && out[--n] != '/')
                                ;
                        continue;
                }
                size_t l = strlen(seg);
                if (n + 1 + l + 1 > len)
                        return -ENAMETOOLONG;
                out[n++] = '/';
                memcpy(out + n, seg, l);
                n += l;
        }
        out[n] = '\0';
        if (strcmp(out, "/workspace") != 0 && strncmp(out, "/workspace/", 11) != 0)
                return -EPERM;
        return 0;
}

void session_ref(struct session *se)
{
        se->refs++;
}

void session_unref(struct session *se)
{
        if (!se || --se->refs > 0)
                return;
        json_decref(se->env);
        free(se->shell);
        pthread_mutex_destroy(&se->run_lock);
        free(se);
}

static struct session *session_new(const char *sid)
{
        struct session *se = calloc(1, sizeof(*se));
        if (!se || !(se->env = json_object())) {
                free(se);
                return NULL;
        }
        snprintf(se->id, sizeof(se->id), "%s", sid);
        strcpy(se->cwd, "/workspace");
        pthread_mutex_init(&se->run_lock, NULL);
        se->refs = 1;
        return se;
}

struct session *session_find(struct sandbox_mgr *m, struct sandbox *s, const char *sid, bool create,
                             struct err *err)
{
        size_t n = 0;
        for (struct session *se = s->sessions; se; se = se->next, n++)
                if (strcmp(se->id, sid) == 0)
                        return se;
        if (!create) {
                err_set(err, ERR_NOT_FOUND, ENOENT, "Session '%s' not found", sid);
                return NULL;
        }
        if (m->opt.max_sessions && n >= m->opt.max_sessions) {
                err_set(err, ERR_LIMIT, ENOSPC, "Too many sessions in this sandbox (at most %llu)",
                        (unsigned long long)m->opt.max_sessions);
                return NULL;
        }
        struct session *se = session_new(sid);
        if (!se) {
                err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
                return NULL;
        }
        se->next = s->sessions;
        s->sessions = se;
        return se;
}

static void session_unlink(struct sandbox *s, struct session *se)
{
        for (struct session **pp = &s->sessions; *pp; pp = &(*pp)->next)
                if (*pp == se) {
                        *pp = se->next;
                        break;
                }
        se->deleted = true;
        if (se->running)
                proc_signal(se->running, SIGKILL);
        session_unref(se);
}

void sessions_kill(struct sandbox *s)
{
        for (struct session *se = s->sessions; se; se = se->next)
                if (se->running)
                        proc_signal(se->running, SIGKILL);
}

void sessions_free(struct sandbox *s)
{
        while (s->sessions)
                session_unlink(s, s->sessions);
}

static bool env_name_valid(const char *k)
{
        if (!*k || (*k >= '0' && *k <= '9'))
                return false;
        return strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == strlen(k);
}

static int create_locked(struct sandbox_mgr *m, struct sandbox *s, const char *sid, const char *cwd, json_t *env, struct err *err)
{
        for (struct session *se = s->sessions; se; se = se->next)
                if (strcmp(se->id, sid) == 0)
                        return err_set(err, ERR_EXISTS, EEXIST, "Session '%s' already exists", sid);
        struct session *se = session_find(m, s, sid, true, err);
        if (!se)
                return err_ret(err);
        snprintf(se->cwd, sizeof(se->cwd), "%s", cwd);
        if (env)
                json_object_update(se->env, env);
        return 0;
}

int sbx_session_create(struct sandbox_mgr *m, const char *id, const char *sid, const char *cwd, json_t *env,
                       struct err *err)
{
        if (strcmp(sid, SBX_SESSION_DISABLED) == 0)
                return err_set(err, ERR_INVALID, EINVAL, "Session id '%s' is reserved", sid);
        char path[4096] = "/workspace";
        if (cwd && sbx_workspace_path(cwd, path, sizeof(path)) < 0)
                return err_set(err, ERR_PERMISSION, EPERM, "cwd must resolve to a location within /workspace");
        const char *k;
        json_t *v;
        json_object_foreach(env, k, v)
        {
                if (!env_name_valid(k) || !json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
                        return err_set(err, ERR_INVALID, EINVAL, "env must map variable names to strings");
        }
        if (json_object_size(env) > JAIL_MAX_ENV)
                return err_set(err, ERR_INVALID, E2BIG, "more than %d environment variables", JAIL_MAX_ENV);
        struct sandbox *s = sandbox_enter(m, id, err);
        if (!s)
                return err_ret(err);
        int r = create_locked(m, s, sid, path, env, err);
        sandbox_leave(m, s);
        return r;
}

int sbx_session_delete(struct sandbox_mgr *m, const char *id, const char *sid, struct err *err)
{
        struct sandbox *s = sandbox_enter(m, id, err);
        if (!s)
                return err_ret(err);
        struct session *se = session_find(m, s, sid, false, err);
        if (se)
                session_unlink(s, se);
        sandbox_leave(m, s);
        if (se)
                sbx_terminal_close(m, id, sid); /* its terminal goes with it */
        return se ? 0 : err_ret(err);
}

int sbx_session_state(struct sandbox_mgr *m, const char *id, const char *sid, bool create, char *ret_cwd,
                      size_t cwd_len, json_t **ret_env, struct err *err)
{
        if (create && strcmp(sid, SBX_SESSION_DISABLED) == 0)
                return err_set(err, ERR_INVALID, EINVAL, "Session id '%s' is reserved", sid);
        struct sandbox *s = sandbox_enter(m, id, err);
        if (!s)
                return err_ret(err);
        struct session *se = session_find(m, s, sid, create, err);
        json_t *env = se ? json_deep_copy(se->env) : NULL;
        if (se && env) {
                snprintf(ret_cwd, cwd_len, "%s", se->cwd);
                *ret_env = env;
        } else if (se) {
                err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        }
        sandbox_leave(m, s);
        return env ? 0 : err_ret(err);
}
