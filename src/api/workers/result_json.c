/* The ExecutionResult view (sandbox-workers.md): logs split into lines,
 * results, the error object and usage. */
#include "api/workers/result_json.h"

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "config/config.h"
#include "engine/proc.h"

static json_t *split_lines(const struct buf *b)
{
        json_t *arr = json_array();
        size_t start = 0;
        char *tmp = malloc(b->len * 3 + 1);
        if (!tmp)
                return arr;
        for (size_t i = 0; i <= b->len; i++) {
                bool end = i == b->len;
                if (!end && b->data[i] != '\n')
                        continue;
                if (end && i == start)
                        break; /* trailing empty piece */
                size_t n = utf8_sanitize(b->data + start, i - start, tmp);
                json_array_append_new(arr, json_stringn(tmp, n));
                start = i + 1;
        }
        free(tmp);
        return arr;
}

static json_t *error_json(const char *name, const char *msg)
{
        return json_pack("{s:s, s:s, s:[]}", "name", name, "message", msg, "traceback");
}

static json_t *limit_error(enum exec_limit l, const struct exec_limits *lim)
{
        char msg[256];
        switch (l) {
        case EXEC_LIMIT_CPU:
                snprintf(msg, sizeof(msg), "Execution fuel exhausted: CPU time limit of %llu ms exceeded",
                         (unsigned long long)lim->cpu_ms);
                break;
        case EXEC_LIMIT_WALL:
                snprintf(msg, sizeof(msg), "Wall-clock time limit of %llu ms exceeded",
                         (unsigned long long)lim->wall_ms);
                break;
        case EXEC_LIMIT_MEMORY:
                snprintf(msg, sizeof(msg), "Memory limit of %llu MiB exceeded",
                         (unsigned long long)(lim->memory_bytes / MiB));
                break;
        case EXEC_LIMIT_OUTPUT:
                snprintf(msg, sizeof(msg), "Output limit exceeded (%llu bytes or %llu lines of stdout+stderr)",
                         (unsigned long long)lim->output_bytes, (unsigned long long)lim->output_entries);
                break;
        case EXEC_LIMIT_PIDS:
                snprintf(msg, sizeof(msg), "Process limit of %llu processes/threads exceeded",
                         (unsigned long long)lim->pids);
                break;
        case EXEC_LIMIT_NONE:
        case _EXEC_LIMIT_MAX:
        default:
                snprintf(msg, sizeof(msg), "Execution limit exceeded");
                break;
        }
        return error_json("ExecutionLimitError", msg);
}

static json_t *died_error(int status)
{
        char msg[128];
        if (WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) > 128))
                snprintf(msg, sizeof(msg), "The interpreter was killed by signal %d",
                         WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status) - 128);
        else
                snprintf(msg, sizeof(msg), "The interpreter exited with status %d before answering",
                         WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return error_json("EngineError", msg);
}

/* A process runtime's failure is its exit status: a command that fails is
 * the guest's error, like an exception, not the engine's. */
static json_t *exit_error(int wait_status)
{
        struct proc_status st;
        proc_status_decode(wait_status, &st);
        if (st.signal == 0 && st.code == 0)
                return NULL;
        char msg[64];
        if (st.signal)
                snprintf(msg, sizeof(msg), "killed by signal %d", st.signal);
        else
                snprintf(msg, sizeof(msg), "exit status %d", st.code);
        json_t *err = error_json("ExitError", msg);
        json_object_set_new(err, st.signal ? "signal" : "exitCode", json_integer(st.signal ? st.signal : st.code));
        return err;
}

/* The error to report: a limit wins over whatever the guest saw, because a
 * pids limit typically surfaces in the guest as a confusing EAGAIN error. */
static json_t *outcome_error(const struct runtime *rt, const struct exec_outcome *o,
                             const struct exec_limits *lim)
{
        json_t *guest = o->response ? json_object_get(o->response, "error") : NULL;
        bool guest_failed = guest && !json_is_null(guest);
        /* A process always ends; it failed when it exited non-zero. */
        bool process_failed = rt->kind == RUNTIME_PROCESS && (!WIFEXITED(o->exit_status) ||
                                                              WEXITSTATUS(o->exit_status) != 0);
        bool survived = rt->kind == RUNTIME_PROCESS ? !process_failed : !guest_failed && !o->died;
        if (o->limit == EXEC_LIMIT_PIDS && survived)
                return NULL; /* a fork that failed and was handled is no failure */
        if (o->limit != EXEC_LIMIT_NONE)
                return limit_error(o->limit, lim);
        if (rt->kind == RUNTIME_PROCESS)
                return exit_error(o->exit_status);
        if (guest_failed)
                return json_incref(guest);
        if (!o->response) {
                /* Exiting on purpose with status 0 (sys.exit(0), process.exit())
                 * is a run without a result, not an engine failure. */
                if (WIFEXITED(o->exit_status) && WEXITSTATUS(o->exit_status) == 0)
                        return NULL;
                return died_error(o->exit_status);
        }
        return NULL;
}

json_t *exec_result_json(const struct runtime *rt, const char *code, const struct exec_outcome *o,
                         const struct exec_limits *lim)
{
        json_t *error = outcome_error(rt, o, lim);
        json_t *results = NULL;
        if (!error && o->response)
                results = json_incref(json_object_get(o->response, "results"));
        if (!json_is_array(results)) {
                json_decref(results);
                results = json_array();
        }
        json_t *res = json_pack("{s:s, s:s, s:s, s:f, s:{s:o, s:o}, s:o}", "code", code, "language", rt->id,
                                "engine", rt->engine, "durationMs", (double)o->duration_ns / 1e6, "logs",
                                "stdout", split_lines(&o->out), "stderr", split_lines(&o->err), "results",
                                results);
        if (!res) {
                json_decref(error);
                return NULL;
        }
        if (error)
                json_object_set_new(res, "error", error);
        json_object_set_new(res, "usage",
                            json_pack("{s:I, s:I, s:I, s:I}", "fuelConsumed", (json_int_t)(o->cpu_ns / 1000),
                                      "fuelLimit", (json_int_t)(lim->cpu_ms * 1000), "memoryBytes",
                                      (json_int_t)o->memory_peak, "refusedSyscalls",
                                      (json_int_t)o->refused_syscalls));
        return res;
}

void exec_limits_from_config(const struct config *cfg, struct exec_limits *ret)
{
        *ret = (struct exec_limits){
                .cpu_ms = cfg->cpu_ms,
                .wall_ms = cfg->wall_ms,
                .memory_bytes = cfg->memory_bytes,
                .pids = cfg->pids,
                .output_bytes = cfg->output_bytes,
                .output_entries = cfg->output_entries,
                .result_bytes = cfg->result_bytes,
        };
}
