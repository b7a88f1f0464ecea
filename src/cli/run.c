/* `sandboxd run LANG [-c CODE | FILE | -]`: code once (POST /execute/<lang>),
 * or in a sandbox's context (the gateway's execute). The ExecutionResult is
 * printed as a script's run would look: its stdout lines on stdout, stderr
 * lines on stderr, the result's value on stdout, an error on stderr. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "cli/cli.h"

static const char help[] =
        "Usage: sandboxd run LANG [-c CODE | FILE | -] [--sandbox ID [--context CID]] [-e K=V]...\n"
        "       sandboxd run FILE.py|.js|.ts|.pl|.rb|.sh [OPTIONS]\n"
        "\n"
        "Runs code once in a fresh jail (POST /execute/LANG), or with --sandbox in a\n"
        "code context of that sandbox (created on first use), where variables stay\n"
        "between runs. The code comes from -c, from FILE, or from stdin ('-', or when\n"
        "stdin is not a terminal). Output lines go to stdout and stderr, the value of\n"
        "the last expression to stdout, an error and its traceback to stderr.\n"
        "\n"
        "LANG: python, javascript, typescript, perl, ruby, shell (and their aliases);\n"
        "without LANG, a FILE's extension names it.\n"
        "\n"
        "Options:\n"
        "  -c, --code CODE      the code to run\n"
        "  -s, --sandbox ID     run in this sandbox (the gateway API)\n"
        "      --context CID    in this context of the sandbox (default: its oldest)\n"
        "  -e, --env K=V        an environment variable for the code (repeatable)\n"
        "\n"
        "Exit status: 0; 1 when the code raised (or failed a limit) or the server\n"
        "refused; 2 for a usage error. --json prints the ExecutionResult as it came.\n"
        "\n"
        "Examples:\n"
        "  sandboxd run python -c 'print(1)'\n"
        "  sandboxd run javascript script.js     (or: sandboxd run script.js)\n"
        "  echo 'puts 6*7' | sandboxd run ruby -\n"
        "  sandboxd run python --sandbox demo -c 'x = 41'; sandboxd run python --sandbox demo -c 'x + 1'\n";

struct run_args {
        const char *lang, *code, *file, *sandbox, *context;
        json_t *env;
};

/* `sandboxd run hello.py`: a lone operand that is a file with a known
 * extension names its language. */
static const char *lang_of_file(const char *path)
{
        static const char *const ext[][2] = {
                { ".py", "python" }, { ".js", "javascript" }, { ".mjs", "javascript" }, { ".ts", "typescript" },
                { ".pl", "perl" },   { ".rb", "ruby" },       { ".sh", "shell" },
        };
        const char *dot = strrchr(path, '.');
        if (!dot || access(path, R_OK) < 0)
                return NULL;
        for (size_t i = 0; i < ARRAY_SIZE(ext); i++)
                if (!strcmp(dot, ext[i][0]))
                        return ext[i][1];
        return NULL;
}

static int parse(struct cli_ctx *ctx, int argc, char **argv, struct run_args *a)
{
        int r = 0;
        static const struct option opts[] = {
                { "code", required_argument, NULL, 'c' },   { "sandbox", required_argument, NULL, 's' },
                { "context", required_argument, NULL, 'C' }, { "env", required_argument, NULL, 'e' },
                { NULL, 0, NULL, 0 },
        };
        optind = 0;
        /* "-" first in the option string: operands come back as 1, in
         * order, so options may stand before or after them. */
        for (int c; (c = cli_getopt(ctx, argc, argv, "-c:s:e:", opts)) != -1;) {
                if (c == 1 && !a->lang)
                        a->lang = optarg;
                else if (c == 1 && !a->file)
                        a->file = optarg;
                else if (c == 1)
                        return cli_usage_error(ctx, "unexpected argument '%s'", optarg);
                else if (c == 'c')
                        a->code = optarg;
                else if (c == 's')
                        a->sandbox = optarg;
                else if (c == 'C')
                        a->context = optarg;
                else if (c == 'e')
                        r = cli_env_add(ctx, a->env, optarg);
                else
                        return 2;
                if (r != 0)
                        return r;
        }
        if (optind < argc)
                return cli_usage_error(ctx, "unexpected argument '%s'", argv[optind]);
        if (a->lang && !a->file && !a->code && lang_of_file(a->lang)) {
                a->file = a->lang;
                a->lang = lang_of_file(a->file);
        }
        if (a->lang && strpbrk(a->lang, "/."))
                return cli_usage_error(ctx, "'%s' is neither a language nor a readable file", a->lang);
        if (a->file && a->code)
                return cli_usage_error(ctx, "both -c and a FILE");
        if (!a->lang)
                return cli_usage_error(ctx, "which language? (python, javascript, perl, ruby, shell)");
        if (a->context && !a->sandbox)
                return cli_usage_error(ctx, "--context needs --sandbox");
        if (!a->code && !a->file) {
                if (isatty(STDIN_FILENO))
                        return cli_usage_error(ctx, "no code: -c CODE, a FILE, or - for stdin");
                a->file = "-";
        }
        return 0;
}

static void print_lines(FILE *f, json_t *lines)
{
        size_t i;
        json_t *l;
        json_array_foreach(lines, i, l)
                fprintf(f, "%s\n", json_string_value(l) ?: "");
}

/* A traceback that ends with "Name: message" (Python's) is printed as it
 * is; otherwise the line is added. */
static void print_error(json_t *error)
{
        const char *name = json_string_value(json_object_get(error, "name")) ?: "Error";
        const char *msg = json_string_value(json_object_get(error, "message")) ?: "";
        json_t *tb = json_object_get(error, "traceback");
        print_lines(stderr, tb);
        const char *last = json_string_value(json_array_get(tb, json_array_size(tb) - 1));
        char line[1024];
        snprintf(line, sizeof(line), "%s: %s", name, msg);
        if (!last || strcmp(last, line))
                fprintf(stderr, "%s\n", line);
}

static int print_result(json_t *res)
{
        json_t *logs = json_object_get(res, "logs");
        print_lines(stdout, json_object_get(logs, "stdout"));
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(res, "results"), i, r) {
                json_t *text = json_object_get(r, "text"), *value = json_object_get(r, "json");
                if (json_is_string(text)) {
                        printf("%s\n", json_string_value(text));
                } else if (value) {
                        json_dumpf(value, stdout, JSON_COMPACT | JSON_ENCODE_ANY);
                        fputc('\n', stdout);
                }
        }
        fflush(stdout);
        print_lines(stderr, json_object_get(logs, "stderr"));
        json_t *error = json_object_get(res, "error");
        if (json_is_object(error)) {
                print_error(error);
                return 1;
        }
        return 0;
}

static int run_code(struct cli_ctx *ctx, const struct run_args *a, const char *code)
{
        char path[512];
        int r = a->sandbox ? cli_gateway_path(path, sizeof(path), a->lang, a->sandbox, "/execute")
                           : (snprintf(path, sizeof(path), "/execute/%s", a->lang) < (int)sizeof(path) ? 0 : -1);
        if (r < 0)
                return cli_usage_error(ctx, "sandbox id or language too long");
        json_auto_t *body = json_pack("{s:s}", "code", code);
        if (!body)
                return cli_fail(ctx, "the code is not valid UTF-8");
        if (json_object_size(a->env) > 0)
                json_object_set(body, "envVars", a->env);
        if (a->context)
                json_object_set_new(body, "contextId", json_string(a->context));
        struct client_reply reply;
        if (cli_call(ctx, "POST", path, body, &reply) != 0)
                return 1;
        if (!json_is_object(reply.json)) {
                client_reply_clear(&reply);
                return cli_fail(ctx, "the server's answer is not an ExecutionResult");
        }
        if (ctx->json)
                cli_print_json(reply.json);
        int status = ctx->json ? json_is_object(json_object_get(reply.json, "error")) : print_result(reply.json);
        client_reply_clear(&reply);
        return status;
}

int cli_run(int argc, char **argv)
{
        struct cli_ctx ctx;
        int r = cli_ctx_open(&ctx, "run", &argc, argv);
        if (r != 0 || ctx.help)
                return r ? r : cli_print_help(help);
        json_auto_t *env = json_object();
        struct run_args a = { .env = env };
        r = parse(&ctx, argc, argv, &a);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (r == 0 && a.file)
                r = cli_read_input(&ctx, a.file, &text, &len);
        if (r == 0)
                r = run_code(&ctx, &a, a.code ? a.code : text);
        cli_ctx_close(&ctx);
        return r;
}
