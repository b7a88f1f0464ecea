/* Shell commands in a sandbox, with or without a session (sandbox.h).
 *
 * Every command is `bash --norc --noprofile -c WRAPPER bash PRELUDE` in its
 * own jail, the user's text on stdin. WRAPPER reads stdin whole, points
 * stdin at /dev/null, evals PRELUDE, then evals the text, all on its line 1
 * (so bash's messages say "bash: line 1", as with `bash -c`). The text is
 * evaluated in the shell itself (not a subshell), so its `cd`, `export`,
 * functions and variables change that shell.
 *
 * In a session, PRELUDE restores the session's shell text (functions,
 * aliases, non-exported variables) and cwd (its exported environment is the
 * process's), and installs an EXIT trap that writes the shell's state to
 * fd 3, a socket to the daemon beside stdout and stderr (so `exit N` still
 * saves): "SBXSTATE\0", "P<cwd>\0", "E<name>=<value>\0" per exported
 * variable, "S<shell text>\0", ".\0". The daemon takes a complete frame from
 * a shell that exited, checked (sizes, names, the cwd under /workspace):
 * it is guest output, though only about the guest's own session. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/utf8.h"
#include "base/util.h"
#include "engine/proc.h"
#include "jail/jail.h"
#include "sandbox/session.h"

/* The whole state frame; past it the session keeps its previous state. */
#define STATE_MAX (1024 * 1024)
/* The shell text rides in one argv string (the kernel's cap is 128 KiB). */
#define SHELL_TEXT_MAX (64 * 1024)
#define ENV_VALUE_MAX (32 * 1024)
#define WRITE_STALL_MS 10000

struct sbx_shell {
        char id[STORE_ID_MAX];
        struct sandbox *sbx;         /* a reference */
        struct session *se;          /* a reference, or NULL */
        bool turn;                   /* holds se->run_lock */
        char *script;
        char *cwd;                   /* the command's cwd, or NULL */
        struct proc *proc;
        json_t *start_env;           /* session: the environment it started with */
        struct buf state;
        bool state_lost;             /* over STATE_MAX */
        bool state_taken;            /* the session has this command's state */
};

static const char wrapper[] = "__sbx_c=$(/bin/cat); exec </dev/null; eval \"$1\"; shift; "
                              "eval \"unset __sbx_c; $__sbx_c\"";

/* Saves the state at exit. It removes itself first, so it is not part of
 * the functions it saves; __sbx_* names and bash's own (__sbx_base: the
 * variables bash had before anything was restored; BASH_*, FUNCNAME) are
 * never saved. Nothing is written when the command closed or replaced the
 * channel (it would be the user's stdout or a file). */
static const char save_trap[] =
        "exec {__sbx_fd}>&3 3>&-\n"
        "__sbx_save() {\n"
        "local __sbx_n IFS=$' \\t\\n'\n"
        "unset -f __sbx_save; set +xeu\n"
        "[[ -S /dev/fd/$__sbx_fd ]] || return\n"
        "{ builtin printf 'SBXSTATE\\0P%s\\0' \"$PWD\"\n"
        "for __sbx_n in $(compgen -e); do builtin printf 'E%s=%s\\0' \"$__sbx_n\" \"${!__sbx_n}\"; done\n"
        "builtin printf S\n"
        "for __sbx_n in $(compgen -v); do\n"
        "[[ $__sbx_n == @(__sbx_*|BASH_*|FUNCNAME) || -n ${__sbx_base[$__sbx_n]+x} || ${!__sbx_n@a} == *x* ]] &&"
        " continue\n"
        "declare -p \"$__sbx_n\" 2>/dev/null; done\n"
        "declare -f; alias -p; shopt -p expand_aliases\n"
        "builtin printf '\\0.\\0'; } 2>/dev/null >&$__sbx_fd\n"
        "}\n"
        "trap __sbx_save EXIT\n";

static const char baseline[] = "declare -A __sbx_base=(); for __sbx_n in $(compgen -v); do __sbx_base[$__sbx_n]=1; "
                               "done; unset __sbx_n\n";

/* 'text' for bash, a ' as '\''. */
static int quote_single(struct buf *b, const char *s)
{
        int r = buf_append(b, "'", 1);
        for (const char *p = s; r == 0 && *p; p++)
                r = *p == '\'' ? buf_append(b, "'\\''", 4) : buf_append(b, p, 1);
        return r ? r : buf_append(b, "'", 1);
}

/* A timeout's SIGTERM reaches the whole process group: the command's own
 * processes may handle it (a child's trap runs; a handler is reset to the
 * default in children, where an ignored signal would stay ignored), and
 * this shell ends as bash killed by SIGTERM would, once its foreground
 * child is gone. */
static const char term_trap[] = "trap 'exit 143' TERM\n";

static int prelude_build(const struct sbx_shell *sh, const char *cwd, const char *shell_text, struct buf *b)
{
        int r = buf_append(b, term_trap, strlen(term_trap));
        /* The trap first: shell text that ends the shell (it is the guest's
         * to write) is then replaced by what the shell really holds. */
        if (r == 0 && sh->se) {
                r = buf_printf(b, "%s%s", baseline, save_trap);
                if (r == 0 && shell_text)
                        r = buf_printf(b, "%s\n", shell_text);
                if (r == 0)
                        r = buf_append(b, "cd -- ", 6);
                if (r == 0)
                        r = quote_single(b, cwd);
                if (r == 0)
                        r = buf_append(b, " 2>/dev/null || cd /workspace\n", 30);
        }
        if (r == 0 && sh->cwd) {
                r = buf_append(b, "cd -- ", 6);
                if (r == 0)
                        r = quote_single(b, sh->cwd);
                if (r == 0)
                        r = buf_append(b, " || exit 1\n", 11);
        }
        return r == 0 ? buf_append(b, "", 1) : r;
}

int sbx_shell_open(struct sandbox_mgr *m, const char *id, const char *sid, const char *script, const char *cwd,
                   struct sbx_shell **ret, struct err *err)
{
        struct sbx_shell *sh = calloc(1, sizeof(*sh));
        if (!sh || !(sh->script = strdup(script)) || (cwd && !(sh->cwd = strdup(cwd)))) {
                sbx_shell_end(m, sh);
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        }
        snprintf(sh->id, sizeof(sh->id), "%s", id);
        buf_init(&sh->state, STATE_MAX);
        sh->sbx = sandbox_enter(m, id, err);
        if (!sh->sbx) {
                sbx_shell_end(m, sh);
                return err_ret(err);
        }
        if (sid) {
                sh->se = session_find(m, sh->sbx, sid, true, err);
                if (sh->se)
                        session_ref(sh->se);
        }
        pthread_mutex_unlock(&sh->sbx->lock);
        if (sid && !sh->se) {
                sbx_shell_end(m, sh);
                return err_ret(err);
        }
        *ret = sh;
        return 0;
}

static int take_turn(struct sbx_shell *sh, int timeout_ms)
{
        if (!sh->se || sh->turn)
                return 0;
        int r;
        if (timeout_ms < 0) {
                r = pthread_mutex_lock(&sh->se->run_lock);
        } else {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_sec += timeout_ms / 1000;
                ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
                if (ts.tv_nsec >= 1000000000L) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000L;
                }
                r = pthread_mutex_timedlock(&sh->se->run_lock, &ts);
        }
        if (r != 0)
                return -r;
        sh->turn = true;
        return 0;
}

/* The session's state for this command (under the sandbox lock): its env,
 * cwd and shell text, and the whole environment it starts with. */
static int session_snapshot(struct sbx_shell *sh, json_t **ret_env, char *cwd, size_t cwd_len, char **ret_text,
                            struct err *err)
{
        struct session *se = sh->se;
        pthread_mutex_lock(&sh->sbx->lock);
        int r = 0;
        if (se->deleted) {
                r = err_set(err, ERR_NOT_FOUND, ENOENT, "Session '%s' not found", se->id);
        } else {
                *ret_env = json_deep_copy(se->env);
                sh->start_env = command_env_json(sh->sbx->env, se->env);
                *ret_text = se->shell ? strdup(se->shell) : NULL;
                snprintf(cwd, cwd_len, "%s", se->cwd);
                if (!*ret_env || !sh->start_env || (se->shell && !*ret_text))
                        r = err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        }
        pthread_mutex_unlock(&sh->sbx->lock);
        return r;
}

/* Feeds the text to the shell, which reads it whole before running any of
 * it, then closes its stdin. A shell that died early just ends the feed. */
static void feed_script(struct proc *p, const char *text, size_t len)
{
        struct proc_fds fds;
        proc_fds(p, &fds);
        size_t off = 0;
        while (off < len) {
                ssize_t n = proc_write(p, text + off, len - off);
                if (n > 0) {
                        off += (size_t)n;
                        continue;
                }
                struct pollfd pf = { fds.stdin_fd, POLLOUT, 0 };
                if ((n != -EAGAIN && n != -EINTR) || poll(&pf, 1, WRITE_STALL_MS) == 0)
                        break;
        }
        proc_close_stdin(p);
}

static void set_running(struct sbx_shell *sh, struct proc *p)
{
        if (!sh->se)
                return;
        pthread_mutex_lock(&sh->sbx->lock);
        sh->se->running = p;
        if (p && sh->se->deleted)
                proc_signal(p, SIGKILL);
        pthread_mutex_unlock(&sh->sbx->lock);
}

int sbx_shell_start(struct sandbox_mgr *m, struct sbx_shell *sh, int timeout_ms, struct err *err)
{
        int r = take_turn(sh, timeout_ms);
        if (r < 0)
                return r == -ETIMEDOUT ? r : err_set(err, ERR_INTERNAL, -r, "Cannot lock the session");
        json_t *env = NULL;
        _cleanup_free_ char *text = NULL;
        char cwd[4096] = "/workspace";
        if (sh->se && (r = session_snapshot(sh, &env, cwd, sizeof(cwd), &text, err)) < 0) {
                json_decref(env);
                return r;
        }
        struct buf prelude;
        buf_init(&prelude, SHELL_TEXT_MAX * 2);
        if (prelude_build(sh, cwd, text, &prelude) < 0) {
                buf_free(&prelude);
                json_decref(env);
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        }
        const char *argv[] = { "/bin/bash", "--norc", "--noprofile", "-c", wrapper, "bash", prelude.data, NULL };
        struct sbx_command cmd = { .argv = argv, .env = env, .stdin_pipe = true, .side_channel = sh->se != NULL };
        r = sbx_spawn(m, sh->id, &cmd, &sh->proc, err);
        buf_free(&prelude);
        json_decref(env);
        if (r < 0)
                return r;
        set_running(sh, sh->proc);
        feed_script(sh->proc, sh->script, strlen(sh->script));
        return 0;
}

struct proc *sbx_shell_proc(struct sbx_shell *sh)
{
        return sh->proc;
}

bool sbx_shell_pump_state(struct sbx_shell *sh)
{
        struct proc_fds fds;
        if (!sh->proc)
                return false;
        proc_fds(sh->proc, &fds);
        char chunk[16384];
        ssize_t n = -1;
        while (fds.side_fd >= 0 && (n = read(fds.side_fd, chunk, sizeof(chunk))) > 0)
                if (!sh->state_lost && buf_append(&sh->state, chunk, (size_t)n) < 0)
                        sh->state_lost = true;
        return n < 0 && (errno == EAGAIN || errno == EINTR);
}

/* ---- taking the saved state ---- */

static bool env_name_ok(const char *k, size_t len)
{
        static const char *const shell_own[] = { "PWD", "OLDPWD", "SHLVL", "_" };
        if (len == 0 || (*k >= '0' && *k <= '9'))
                return false;
        for (size_t i = 0; i < len; i++)
                if (!(k[i] == '_' || (k[i] >= 'A' && k[i] <= 'Z') || (k[i] >= 'a' && k[i] <= 'z') ||
                      (k[i] >= '0' && k[i] <= '9')))
                        return false;
        for (size_t i = 0; i < ARRAY_SIZE(shell_own); i++)
                if (strlen(shell_own[i]) == len && memcmp(shell_own[i], k, len) == 0)
                        return false;
        return true;
}

struct saved_state {
        const char *cwd;
        json_t *env;                 /* {name: string} the shell exported */
        const char *text;
};

/* The last frame in the bytes (anything a command wrote before it is not
 * the trap's). Points into data; 0 or -EBADMSG. */
static int state_parse(char *data, size_t len, struct saved_state *st)
{
        static const char magic[] = "SBXSTATE";
        char *frame = NULL;
        for (char *p = data; (p = memmem(p, len - (size_t)(p - data), magic, sizeof(magic))); p++)
                frame = p;
        if (!frame)
                return -EBADMSG;
        char *end = data + len, *rec = frame + sizeof(magic);
        bool done = false;
        while (rec < end && !done) {
                char *nul = memchr(rec, '\0', (size_t)(end - rec));
                if (!nul)
                        return -EBADMSG;
                char *eq = rec[0] == 'E' ? memchr(rec, '=', (size_t)(nul - rec)) : NULL;
                if (rec[0] == 'P')
                        st->cwd = rec + 1;
                else if (rec[0] == 'S')
                        st->text = rec + 1;
                else if (rec[0] == '.')
                        done = true;
                else if (eq && env_name_ok(rec + 1, (size_t)(eq - rec - 1)) && nul - eq - 1 <= ENV_VALUE_MAX &&
                         utf8_valid(eq + 1, (size_t)(nul - eq - 1))) {
                        *eq = '\0';
                        json_object_set_new(st->env, rec + 1, json_string(eq + 1));
                }
                rec = nul + 1;
        }
        return done && st->cwd && st->text ? 0 : -EBADMSG;
}

/* The session's env after the command: what the shell changed against the
 * environment it started with, over the session's previous env (so the
 * sandbox's later env changes still show where the session never touched). */
static json_t *env_after(json_t *before, json_t *start, json_t *now)
{
        json_t *env = json_deep_copy(before);
        const char *k;
        json_t *v;
        json_object_foreach(now, k, v)
        {
                if (!json_equal(json_object_get(start, k), v))
                        json_object_set(env, k, v);
        }
        json_object_foreach(start, k, v)
        {
                if (!json_object_get(now, k) && env_name_ok(k, strlen(k)))
                        json_object_set_new(env, k, json_null());
        }
        return env;
}

/* Caller holds the sandbox's lock. */
static void state_apply(struct sbx_shell *sh, const struct saved_state *st)
{
        struct session *se = sh->se;
        char cwd[4096];
        /* The request's cwd is for that command; a cd in it still counts. */
        if (sh->cwd && strcmp(st->cwd, sh->cwd) == 0)
                snprintf(cwd, sizeof(cwd), "%s", se->cwd);
        else if (st->cwd[0] != '/' || sbx_workspace_path(st->cwd, cwd, sizeof(cwd)) < 0)
                strcpy(cwd, "/workspace");
        snprintf(se->cwd, sizeof(se->cwd), "%s", cwd);
        json_t *env = env_after(se->env, sh->start_env, st->env);
        json_t *all = env ? command_env_json(sh->sbx->env, env) : NULL;
        size_t n = 0;
        const char *k;
        json_t *v;
        json_object_foreach(all, k, v) n += json_is_string(v);
        if (env && all && n <= JAIL_MAX_ENV) {
                json_decref(se->env);
                se->env = json_incref(env);
        } else {
                log_warn("msg=\"session env not saved: more than %d variables\" sandbox=%s session=%s", JAIL_MAX_ENV,
                         sh->id, se->id);
        }
        json_decref(all);
        json_decref(env);
        free(se->shell);
        se->shell = strlen(st->text) <= SHELL_TEXT_MAX ? strdup(st->text) : NULL;
        if (!se->shell && st->text[0])
                log_warn("msg=\"session shell text not saved: over %d bytes\" sandbox=%s session=%s", SHELL_TEXT_MAX,
                         sh->id, se->id);
}

static void state_take(struct sbx_shell *sh)
{
        struct proc_status ps;
        if (sh->state_taken || !sh->se || !sh->proc || proc_wait(sh->proc, 0, &ps) < 0)
                return; /* killed or still running: no state it vouched for */
        sh->state_taken = true;
        sbx_shell_pump_state(sh);
        struct saved_state st = { .env = json_object() };
        if (!sh->state_lost && st.env && sh->state.len && state_parse(sh->state.data, sh->state.len, &st) == 0) {
                pthread_mutex_lock(&sh->sbx->lock);
                if (!sh->se->deleted)
                        state_apply(sh, &st);
                pthread_mutex_unlock(&sh->sbx->lock);
        } else if (sh->state_lost) {
                log_warn("msg=\"session state not saved: over %d bytes\" sandbox=%s session=%s", STATE_MAX, sh->id,
                         sh->se->id);
        }
        json_decref(st.env);
}

void sbx_shell_save_state(struct sbx_shell *sh)
{
        if (sh)
                state_take(sh);
}

void sbx_shell_end(struct sandbox_mgr *m, struct sbx_shell *sh)
{
        if (!sh)
                return;
        state_take(sh);
        if (sh->proc) {
                set_running(sh, NULL);
                proc_bury(sh->proc);
        }
        if (sh->turn)
                pthread_mutex_unlock(&sh->se->run_lock);
        if (sh->se) {
                pthread_mutex_lock(&sh->sbx->lock);
                session_unref(sh->se);
                pthread_mutex_unlock(&sh->sbx->lock);
        }
        if (sh->sbx)
                sandbox_put(m, sh->sbx);
        json_decref(sh->start_env);
        buf_free(&sh->state);
        free(sh->script);
        free(sh->cwd);
        free(sh);
}
