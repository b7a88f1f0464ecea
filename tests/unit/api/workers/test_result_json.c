/* Unit tests for the pure half of src/api/workers/result_json.c (and exec_build_request, src/engine/kproc.c): turning a synthetic
 * struct exec_outcome into the ExecutionResult object, and building the
 * kernel wire request. No kernel process is spawned. */
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>

#include "api/workers/result_json.h"
#include "config/config.h"
#include "engine/exec.h"
#include "tap.h"

static const struct exec_limits LIM = {
        .cpu_ms = 10000, .wall_ms = 30000, .memory_bytes = 256 * MiB, .pids = 64,
        .output_bytes = 32 * KiB, .output_entries = 200, .result_bytes = 64 * KiB,
};

/* A fresh outcome; out/err hold the given bytes (len-delimited, may hold
 * NULs), response is parsed from JSON text (NULL: none). */
static void outcome(struct exec_outcome *o, const char *out, size_t out_len, const char *err, size_t err_len,
                    const char *response)
{
        *o = (struct exec_outcome){ 0 };
        buf_init(&o->out, 1 * MiB);
        buf_init(&o->err, 1 * MiB);
        if (out)
                ASSERT_OK(buf_append(&o->out, out, out_len));
        if (err)
                ASSERT_OK(buf_append(&o->err, err, err_len));
        if (response) {
                json_error_t e;
                o->response = json_loads(response, 0, &e);
                if (!o->response)
                        TAP_FAIL("bad test JSON: %s", e.text);
        }
}

#define S(lit) lit, sizeof(lit) - 1

static const struct runtime *py(void)
{
        const struct runtime *rt = runtime_find("python");
        ASSERT_TRUE(rt != NULL);
        return rt;
}

static json_t *result(const struct exec_outcome *o)
{
        json_t *r = exec_result_json(py(), "print(1)", o, &LIM);
        ASSERT_TRUE(json_is_object(r));
        return r;
}

/* Asserts arr is exactly the n given strings (length-aware). */
static void expect_lines(json_t *arr, size_t n, const char *const *lines, const size_t *lens)
{
        ASSERT_TRUE(json_is_array(arr));
        if (json_array_size(arr) != n) {
                char *dump = json_dumps(arr, JSON_COMPACT);
                TAP_FAIL("%zu lines, want %zu: %s", json_array_size(arr), n, dump);
        }
        for (size_t i = 0; i < n; i++) {
                json_t *s = json_array_get(arr, i);
                ASSERT_TRUE(json_is_string(s));
                size_t want = lens ? lens[i] : strlen(lines[i]);
                if (json_string_length(s) != want || memcmp(json_string_value(s), lines[i], want) != 0)
                        TAP_FAIL("line %zu: '%s', want '%s'", i, json_string_value(s), lines[i]);
        }
}

static json_t *logs(json_t *res, const char *which)
{
        return json_object_get(json_object_get(res, "logs"), which);
}

static const char *error_name(json_t *res)
{
        return json_string_value(json_object_get(json_object_get(res, "error"), "name"));
}

static const char *error_message(json_t *res)
{
        return json_string_value(json_object_get(json_object_get(res, "error"), "message"));
}

static void expect_results_empty(json_t *res)
{
        json_t *r = json_object_get(res, "results");
        ASSERT_TRUE(json_is_array(r));
        ASSERT_EQ(json_array_size(r), 0);
}

TEST(result_success_shape)
{
        struct exec_outcome o;
        outcome(&o, S("hello\nworld\n"), NULL, 0,
                "{\"results\":[{\"type\":\"text\",\"value\":\"2\"}],\"error\":null,\"cwd\":\"/workspace\"}");
        o.duration_ns = 2500000;
        o.cpu_ns = 1234567;
        o.memory_peak = 9999;
        o.refused_syscalls = 7;
        json_t *res = result(&o);

        ASSERT_STREQ(json_string_value(json_object_get(res, "code")), "print(1)");
        ASSERT_STREQ(json_string_value(json_object_get(res, "language")), "python");
        ASSERT_TRUE(json_is_string(json_object_get(res, "engine")));
        ASSERT_TRUE(json_is_real(json_object_get(res, "durationMs")));
        ASSERT_TRUE(json_real_value(json_object_get(res, "durationMs")) == 2.5);
        ASSERT_TRUE(json_object_get(res, "error") == NULL);

        const char *const out[] = { "hello", "world" };
        expect_lines(logs(res, "stdout"), 2, out, NULL);
        expect_lines(logs(res, "stderr"), 0, NULL, NULL);

        json_t *results = json_object_get(res, "results");
        ASSERT_EQ(json_array_size(results), 1);
        ASSERT_STREQ(json_string_value(json_object_get(json_array_get(results, 0), "value")), "2");

        json_t *usage = json_object_get(res, "usage");
        ASSERT_EQ(json_integer_value(json_object_get(usage, "fuelConsumed")), 1234); /* cpu_ns / 1000 */
        ASSERT_EQ(json_integer_value(json_object_get(usage, "fuelLimit")), 10000000); /* cpu_ms * 1000 */
        ASSERT_EQ(json_integer_value(json_object_get(usage, "memoryBytes")), 9999);
        /* seccomp refusals of the run (issue 10 row 15) */
        ASSERT_TRUE(json_is_integer(json_object_get(usage, "refusedSyscalls")));
        ASSERT_EQ(json_integer_value(json_object_get(usage, "refusedSyscalls")), 7);

        /* the outcome is not consumed: the result holds its own reference */
        ASSERT_EQ(o.response->refcount, 1);
        json_decref(res);
        exec_outcome_done(&o);
}

TEST(result_usage_other_limits)
{
        struct exec_outcome o;
        outcome(&o, NULL, 0, NULL, 0, "{\"results\":[],\"error\":null}");
        o.cpu_ns = 999; /* below one fuel unit */
        struct exec_limits lim = LIM;
        lim.cpu_ms = 250;
        json_t *res = exec_result_json(py(), "x", &o, &lim);
        json_t *usage = json_object_get(res, "usage");
        ASSERT_EQ(json_integer_value(json_object_get(usage, "fuelConsumed")), 0);
        ASSERT_EQ(json_integer_value(json_object_get(usage, "fuelLimit")), 250000);
        ASSERT_EQ(json_integer_value(json_object_get(usage, "memoryBytes")), 0);
        json_decref(res);
        exec_outcome_done(&o);
}

struct split_case {
        const char *in;
        size_t in_len;
        size_t n;
        const char *lines[4];
        size_t lens[4];
};

TEST(result_logs_split_per_line)
{
        static const struct split_case cases[] = {
                { S(""), 0, { 0 }, { 0 } },
                { S("one"), 1, { "one" }, { 3 } },
                { S("one\n"), 1, { "one" }, { 3 } },           /* trailing empty piece dropped */
                { S("a\nb"), 2, { "a", "b" }, { 1, 1 } },
                { S("a\n\nb\n"), 3, { "a", "", "b" }, { 1, 0, 1 } }, /* inner empty kept */
                { S("\n"), 1, { "" }, { 0 } },
                { S("\n\n"), 2, { "", "" }, { 0, 0 } },
                { S("x\r\ny\n"), 2, { "x\r", "y" }, { 2, 1 } },  /* only \n splits */
                { S("a\0b\n"), 1, { "a\0b" }, { 3 } },          /* NUL kept */
                { S("x\xFFy\n"), 1, { "x\xEF\xBF\xBDy" }, { 5 } }, /* invalid → U+FFFD */
                { S("\xC3\xA9t\xC3\xA9\n"), 1, { "\xC3\xA9t\xC3\xA9" }, { 5 } },
                /* a sequence broken by a newline: each stray byte is replaced */
                { S("\xE2\x82\n\xAC"), 2, { "\xEF\xBF\xBD\xEF\xBF\xBD", "\xEF\xBF\xBD" }, { 6, 3 } },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                const struct split_case *c = &cases[i];
                struct exec_outcome o;
                /* same bytes on both streams, both must split alike */
                outcome(&o, c->in, c->in_len, c->in, c->in_len, "{\"results\":[],\"error\":null}");
                json_t *res = result(&o);
                expect_lines(logs(res, "stdout"), c->n, c->lines, c->lens);
                expect_lines(logs(res, "stderr"), c->n, c->lines, c->lens);
                /* and the whole result serialises (valid UTF-8 everywhere) */
                char *text = json_dumps(res, JSON_COMPACT);
                ASSERT_TRUE(text != NULL);
                free(text);
                json_decref(res);
                exec_outcome_done(&o);
        }
}

TEST(result_logs_many_lines)
{
        struct exec_outcome o;
        outcome(&o, NULL, 0, NULL, 0, NULL);
        for (int i = 0; i < 500; i++)
                ASSERT_OK(buf_printf(&o.out, "line %d\n", i));
        ASSERT_OK(buf_append(&o.err, S("oops")));
        o.response = json_loads("{\"results\":[],\"error\":null}", 0, NULL);
        json_t *res = result(&o);
        json_t *out = logs(res, "stdout");
        ASSERT_EQ(json_array_size(out), 500);
        ASSERT_STREQ(json_string_value(json_array_get(out, 0)), "line 0");
        ASSERT_STREQ(json_string_value(json_array_get(out, 499)), "line 499");
        const char *const err[] = { "oops" };
        expect_lines(logs(res, "stderr"), 1, err, NULL);
        json_decref(res);
        exec_outcome_done(&o);
}

/* Each limit produces an ExecutionLimitError naming it, results are
 * dropped, and the traceback is an empty array. */
TEST(result_limit_errors_name_the_limit)
{
        static const struct {
                enum exec_limit l;
                const char *words[2];
        } cases[] = {
                { EXEC_LIMIT_CPU, { "fuel", "10000 ms" } },
                { EXEC_LIMIT_WALL, { "Wall-clock", "30000 ms" } },
                { EXEC_LIMIT_MEMORY, { "Memory", "256 MiB" } },
                { EXEC_LIMIT_OUTPUT, { "Output", "32768" } },
                { EXEC_LIMIT_PIDS, { "Process", "64" } },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                struct exec_outcome o;
                outcome(&o, S("partial\n"), NULL, 0, NULL);
                o.limit = cases[i].l;
                o.died = true;
                o.exit_status = SIGKILL; /* killed by the daemon */
                json_t *res = result(&o);
                ASSERT_STREQ(error_name(res), "ExecutionLimitError");
                const char *msg = error_message(res);
                ASSERT_TRUE(msg != NULL);
                for (size_t w = 0; w < 2; w++)
                        if (!strstr(msg, cases[i].words[w]))
                                TAP_FAIL("limit %d: '%s' lacks '%s'", cases[i].l, msg, cases[i].words[w]);
                json_t *tb = json_object_get(json_object_get(res, "error"), "traceback");
                ASSERT_TRUE(json_is_array(tb) && json_array_size(tb) == 0);
                expect_results_empty(res);
                /* output gathered before the kill is still reported */
                const char *const out[] = { "partial" };
                expect_lines(logs(res, "stdout"), 1, out, NULL);
                json_decref(res);
                exec_outcome_done(&o);
        }
}

/* A limit wins over what the guest saw, and over the guest's results. */
TEST(result_limit_beats_guest_answer)
{
        struct exec_outcome o;
        outcome(&o, NULL, 0, NULL, 0,
                "{\"results\":[{\"type\":\"text\",\"value\":\"1\"}],"
                "\"error\":{\"name\":\"MemoryError\",\"message\":\"\",\"traceback\":[]}}");
        o.limit = EXEC_LIMIT_MEMORY;
        json_t *res = result(&o);
        ASSERT_STREQ(error_name(res), "ExecutionLimitError");
        ASSERT_TRUE(strstr(error_message(res), "Memory") != NULL);
        expect_results_empty(res);
        json_decref(res);
        exec_outcome_done(&o);

        /* CPU limit hit after a successful answer (kernel killed at exit) */
        outcome(&o, NULL, 0, NULL, 0, "{\"results\":[{\"type\":\"text\",\"value\":\"1\"}],\"error\":null}");
        o.limit = EXEC_LIMIT_CPU;
        o.died = true;
        res = result(&o);
        ASSERT_STREQ(error_name(res), "ExecutionLimitError");
        expect_results_empty(res);
        json_decref(res);
        exec_outcome_done(&o);
}

/* The pids counter tripped (e.g. a thread pool probing), but the guest
 * answered without error and the kernel is alive: keep the result. */
TEST(result_pids_limit_with_success_keeps_result)
{
        struct exec_outcome o;
        outcome(&o, S("ok\n"), NULL, 0, "{\"results\":[{\"type\":\"text\",\"value\":\"42\"}],\"error\":null}");
        o.limit = EXEC_LIMIT_PIDS;
        json_t *res = result(&o);
        ASSERT_TRUE(json_object_get(res, "error") == NULL);
        json_t *results = json_object_get(res, "results");
        ASSERT_EQ(json_array_size(results), 1);
        ASSERT_STREQ(json_string_value(json_object_get(json_array_get(results, 0), "value")), "42");
        json_decref(res);
        exec_outcome_done(&o);

        /* …but with a guest error the pids limit is the better explanation */
        outcome(&o, NULL, 0, NULL, 0,
                "{\"results\":[],\"error\":{\"name\":\"BlockingIOError\",\"message\":\"EAGAIN\",\"traceback\":[]}}");
        o.limit = EXEC_LIMIT_PIDS;
        res = result(&o);
        ASSERT_STREQ(error_name(res), "ExecutionLimitError");
        ASSERT_TRUE(strstr(error_message(res), "Process") != NULL);
        json_decref(res);
        exec_outcome_done(&o);

        /* …and so it is when the kernel died */
        outcome(&o, NULL, 0, NULL, 0, "{\"results\":[1],\"error\":null}");
        o.limit = EXEC_LIMIT_PIDS;
        o.died = true;
        o.exit_status = SIGKILL;
        res = result(&o);
        ASSERT_STREQ(error_name(res), "ExecutionLimitError");
        expect_results_empty(res);
        json_decref(res);
        exec_outcome_done(&o);
}

TEST(result_died_status_zero_without_answer_is_not_an_error)
{
        struct exec_outcome o;
        outcome(&o, S("bye\n"), NULL, 0, NULL);
        o.died = true;
        o.exit_status = 0; /* WIFEXITED, status 0: sys.exit(0) */
        ASSERT_TRUE(WIFEXITED(o.exit_status) && WEXITSTATUS(o.exit_status) == 0);
        json_t *res = result(&o);
        ASSERT_TRUE(json_object_get(res, "error") == NULL);
        expect_results_empty(res);
        const char *const out[] = { "bye" };
        expect_lines(logs(res, "stdout"), 1, out, NULL);
        json_decref(res);
        exec_outcome_done(&o);
}

TEST(result_died_by_signal_is_engine_error)
{
        static const struct {
                int status;
                const char *msg;
        } cases[] = {
                { SIGSEGV, "killed by signal 11" },              /* WIFSIGNALED */
                { SIGKILL, "killed by signal 9" },
                { 137 << 8, "killed by signal 9" },              /* jail init: exit 128+9 */
                { 139 << 8, "killed by signal 11" },
                { 3 << 8, "exited with status 3 before answering" },
                { 1 << 8, "exited with status 1 before answering" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                struct exec_outcome o;
                outcome(&o, NULL, 0, S("Segmentation fault\n"), NULL);
                o.died = true;
                o.exit_status = cases[i].status;
                json_t *res = result(&o);
                ASSERT_STREQ(error_name(res), "EngineError");
                const char *msg = error_message(res);
                if (!msg || !strstr(msg, cases[i].msg))
                        TAP_FAIL("status %#x: '%s' lacks '%s'", cases[i].status, msg ? msg : "(null)",
                                 cases[i].msg);
                expect_results_empty(res);
                json_decref(res);
                exec_outcome_done(&o);
        }
}

TEST(result_guest_error_passed_through)
{
        static const char guest[] =
                "{\"name\":\"ZeroDivisionError\",\"message\":\"division by zero\","
                "\"traceback\":[\"  File \\\"<exec>\\\", line 1\"],\"extra\":{\"k\":1}}";
        char resp[512];
        snprintf(resp, sizeof(resp), "{\"results\":[{\"type\":\"text\",\"value\":\"partial\"}],\"error\":%s}", guest);
        struct exec_outcome o;
        outcome(&o, NULL, 0, S("Traceback...\n"), resp);
        json_t *res = result(&o);
        json_t *want = json_loads(guest, 0, NULL);
        ASSERT_TRUE(json_equal(json_object_get(res, "error"), want));
        json_decref(want);
        expect_results_empty(res); /* results [] on error */
        json_decref(res);
        exec_outcome_done(&o);

        /* error explicitly null = success */
        outcome(&o, NULL, 0, NULL, 0, "{\"results\":[1,2],\"error\":null}");
        res = result(&o);
        ASSERT_TRUE(json_object_get(res, "error") == NULL);
        ASSERT_EQ(json_array_size(json_object_get(res, "results")), 2);
        json_decref(res);
        exec_outcome_done(&o);
}

TEST(result_malformed_results_become_empty)
{
        static const char *const responses[] = {
                "{\"error\":null}", "{\"results\":null,\"error\":null}", "{\"results\":\"x\"}",
                "{\"results\":{\"a\":1}}",
        };
        for (size_t i = 0; i < ARRAY_SIZE(responses); i++) {
                struct exec_outcome o;
                outcome(&o, NULL, 0, NULL, 0, responses[i]);
                json_t *res = result(&o);
                ASSERT_TRUE(json_object_get(res, "error") == NULL);
                expect_results_empty(res);
                json_decref(res);
                exec_outcome_done(&o);
        }
}

TEST(build_request_fields)
{
        json_t *env = json_pack("{s:s}", "A", "1");
        json_t *req = exec_build_request("print(1)", env, "/workspace/sub", true, 65536, false);
        ASSERT_TRUE(json_is_object(req));
        ASSERT_EQ(json_object_size(req), 6);
        ASSERT_STREQ(json_string_value(json_object_get(req, "code")), "print(1)");
        ASSERT_TRUE(json_object_get(req, "env") == env); /* borrowed: shared reference */
        ASSERT_EQ(env->refcount, 2);
        ASSERT_STREQ(json_string_value(json_object_get(req, "cwd")), "/workspace/sub");
        ASSERT_EQ(json_integer_value(json_object_get(req, "resultLimit")), 65536);
        ASSERT_TRUE(json_is_true(json_object_get(req, "typescript")));
        ASSERT_TRUE(json_is_false(json_object_get(req, "replay")));
        json_decref(req);
        ASSERT_EQ(env->refcount, 1);
        json_decref(env);

        /* defaults: env NULL → {}, cwd NULL → /workspace */
        req = exec_build_request("", NULL, NULL, false, 1, true);
        ASSERT_TRUE(json_is_object(json_object_get(req, "env")));
        ASSERT_EQ(json_object_size(json_object_get(req, "env")), 0);
        ASSERT_STREQ(json_string_value(json_object_get(req, "cwd")), JAIL_WORKSPACE);
        ASSERT_STREQ(json_string_value(json_object_get(req, "code")), "");
        ASSERT_TRUE(json_is_false(json_object_get(req, "typescript")));
        ASSERT_TRUE(json_is_true(json_object_get(req, "replay")));
        ASSERT_EQ(json_integer_value(json_object_get(req, "resultLimit")), 1);
        /* one line on the wire: compact dump has no newline */
        char *line = json_dumps(req, JSON_COMPACT);
        ASSERT_TRUE(line && !strchr(line, '\n'));
        free(line);
        json_decref(req);
}

TEST(limits_from_config)
{
        struct config cfg;
        config_defaults(&cfg);
        ASSERT_OK(config_set(&cfg, "limits.cpu_ms", "1234"));
        ASSERT_OK(config_set(&cfg, "limits.pids", "17"));
        struct exec_limits l;
        memset(&l, 0xFF, sizeof(l));
        exec_limits_from_config(&cfg, &l);
        ASSERT_EQ(l.cpu_ms, 1234);
        ASSERT_EQ(l.wall_ms, cfg.wall_ms);
        ASSERT_EQ(l.memory_bytes, cfg.memory_bytes);
        ASSERT_EQ(l.pids, 17);
        ASSERT_EQ(l.output_bytes, cfg.output_bytes);
        ASSERT_EQ(l.output_entries, cfg.output_entries);
        ASSERT_EQ(l.result_bytes, cfg.result_bytes);
}

TEST(base_env)
{
        const char *env[JAIL_MAX_ENV + 1];
        size_t n = exec_base_env(runtime_find("python"), env, ARRAY_SIZE(env));
        ASSERT_TRUE(env[n] == NULL);
        bool path = false, pyc = false;
        for (size_t i = 0; i < n; i++) {
                ASSERT_TRUE(strchr(env[i], '=') != NULL);
                path |= strncmp(env[i], "PATH=", 5) == 0;
                pyc |= strcmp(env[i], "PYTHONDONTWRITEBYTECODE=1") == 0;
        }
        ASSERT_TRUE(path && pyc);
        /* bounded by max, always NULL-terminated */
        n = exec_base_env(runtime_find("python"), env, 3);
        ASSERT_EQ(n, 2);
        ASSERT_TRUE(env[2] == NULL);
        n = exec_base_env(runtime_find("python"), env, 1);
        ASSERT_EQ(n, 0);
        ASSERT_TRUE(env[0] == NULL);
}

TEST(outcome_done_resets)
{
        struct exec_outcome o;
        outcome(&o, S("x"), S("y"), "{}");
        o.limit = EXEC_LIMIT_CPU;
        o.died = true;
        exec_outcome_done(&o);
        ASSERT_TRUE(o.response == NULL && o.out.data == NULL && o.err.data == NULL);
        ASSERT_EQ(o.limit, EXEC_LIMIT_NONE);
        ASSERT_EQ(o.died, false);
        exec_outcome_done(&o); /* twice is fine */
}

/* A process runtime (shell): no kernel answer; the exit status decides. */
static json_t *shell_result(int wait_status, enum exec_limit limit)
{
        const struct runtime *rt = runtime_find("shell");
        ASSERT_TRUE(rt != NULL && rt->kind == RUNTIME_PROCESS);
        struct exec_outcome o;
        outcome(&o, S("hi\n"), NULL, 0, NULL);
        o.died = true;
        o.exit_status = wait_status;
        o.limit = limit;
        json_t *r = exec_result_json(rt, "echo hi", &o, &LIM);
        exec_outcome_done(&o);
        ASSERT_TRUE(json_is_object(r));
        ASSERT_STREQ(json_string_value(json_object_get(r, "language")), "shell");
        ASSERT_EQ(json_array_size(json_object_get(r, "results")), 0);
        return r;
}

TEST(result_shell_exit_status)
{
        json_t *r = shell_result(0, EXEC_LIMIT_NONE);
        ASSERT_TRUE(json_object_get(r, "error") == NULL);
        ASSERT_STREQ(json_string_value(json_array_get(json_object_get(json_object_get(r, "logs"), "stdout"), 0)), "hi");
        json_decref(r);

        r = shell_result(3 << 8, EXEC_LIMIT_NONE);
        json_t *err = json_object_get(r, "error");
        ASSERT_STREQ(json_string_value(json_object_get(err, "name")), "ExitError");
        ASSERT_STREQ(json_string_value(json_object_get(err, "message")), "exit status 3");
        ASSERT_EQ(json_integer_value(json_object_get(err, "exitCode")), 3);
        ASSERT_TRUE(json_object_get(err, "signal") == NULL);
        json_decref(r);

        /* The jail's init reports a workload killed by signal N as 128+N;
         * the daemon's own SIGKILL of the jail is a real signal status. */
        static const int statuses[] = { (128 + SIGTERM) << 8, SIGKILL };
        static const int signals[] = { SIGTERM, SIGKILL };
        for (size_t i = 0; i < ARRAY_SIZE(statuses); i++) {
                r = shell_result(statuses[i], EXEC_LIMIT_NONE);
                err = json_object_get(r, "error");
                ASSERT_STREQ(json_string_value(json_object_get(err, "name")), "ExitError");
                ASSERT_EQ(json_integer_value(json_object_get(err, "signal")), signals[i]);
                ASSERT_TRUE(json_object_get(err, "exitCode") == NULL);
                json_decref(r);
        }
}

TEST(result_shell_limits_win)
{
        json_t *r = shell_result(SIGKILL, EXEC_LIMIT_WALL);
        json_t *err = json_object_get(r, "error");
        ASSERT_STREQ(json_string_value(json_object_get(err, "name")), "ExecutionLimitError");
        json_decref(r);
        /* A failed fork that the script survived (exit 0) is no error... */
        r = shell_result(0, EXEC_LIMIT_PIDS);
        ASSERT_TRUE(json_object_get(r, "error") == NULL);
        json_decref(r);
        /* ...one it did not survive is the process limit, not exit status 1. */
        r = shell_result(1 << 8, EXEC_LIMIT_PIDS);
        err = json_object_get(r, "error");
        ASSERT_STREQ(json_string_value(json_object_get(err, "name")), "ExecutionLimitError");
        ASSERT_TRUE(strstr(json_string_value(json_object_get(err, "message")), "Process limit") != NULL);
        json_decref(r);
}
