/* `sandboxd mcp`: the MCP server (src/mcp/) on stdio. One JSON-RPC message
 * (or batch) per line on stdin; responses and notifications, one per line,
 * on stdout and nothing else (logs go to stderr). Each message is handled
 * on its own thread, so a ping is answered while a long command runs; EOF
 * waits for the calls in flight, then exits 0. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "mcp/mcp.h"

/* Messages handled at once; more wait for a slot (a client flooding us
 * gets back-pressure through its pipe, not unbounded threads). */
#define MCP_STDIO_WORKERS 16

struct stdio_server {
        struct mcp_session *session;
        struct client *client;
        struct mcp_out out;
        pthread_mutex_t write_lock;
        pthread_mutex_t lock;
        pthread_cond_t changed;
        int running;
};

static void send_line(void *cls, json_t *msg)
{
        struct stdio_server *srv = cls;
        char *s = json_dumps(msg, JSON_COMPACT);        /* no raw newline in compact JSON */
        if (!s)
                return;
        pthread_mutex_lock(&srv->write_lock);
        fputs(s, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        pthread_mutex_unlock(&srv->write_lock);
        free(s);
}

struct job {
        struct stdio_server *srv;
        json_t *msg;
};

static void *job_run(void *cls)
{
        struct job *job = cls;
        struct stdio_server *srv = job->srv;
        json_t *r = mcp_session_handle_any(srv->session, srv->client, job->msg, &srv->out);
        if (r)
                send_line(srv, r);
        json_decref(r);
        json_decref(job->msg);
        free(job);
        pthread_mutex_lock(&srv->lock);
        srv->running--;
        pthread_cond_broadcast(&srv->changed);
        pthread_mutex_unlock(&srv->lock);
        return NULL;
}

static void wait_running_below(struct stdio_server *srv, int n)
{
        pthread_mutex_lock(&srv->lock);
        while (srv->running >= n)
                pthread_cond_wait(&srv->changed, &srv->lock);
        pthread_mutex_unlock(&srv->lock);
}

/* A job counted as running, or NULL (msg dropped: out of memory). */
static struct job *job_new(struct stdio_server *srv, json_t *msg)
{
        struct job *job = malloc(sizeof(*job));
        if (!job) {
                json_decref(msg);
                return NULL;
        }
        *job = (struct job){ srv, msg };
        pthread_mutex_lock(&srv->lock);
        srv->running++;
        pthread_mutex_unlock(&srv->lock);
        return job;
}

static void start_job(struct stdio_server *srv, json_t *msg)
{
        pthread_attr_t attr;
        pthread_t t;
        wait_running_below(srv, MCP_STDIO_WORKERS);
        struct job *job = job_new(srv, msg);
        if (!job)
                return;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, job_run, job) != 0)
                job_run(job);   /* no thread: handle it here */
        pthread_attr_destroy(&attr);
}

static void run_inline(struct stdio_server *srv, json_t *msg)
{
        struct job *job = job_new(srv, msg);
        if (job)
                job_run(job);
}

static bool blank(const char *l)
{
        return l[strspn(l, " \t\r\n")] == '\0';
}

static void serve(struct stdio_server *srv)
{
        char *line = NULL;
        size_t cap = 0;
        while (getline(&line, &cap, stdin) >= 0) {
                if (blank(line))
                        continue;
                json_error_t jerr;
                json_t *msg = json_loads(line, JSON_DECODE_ANY, &jerr);
                if (!msg) {
                        json_t *r = mcp_error_response(NULL, MCP_PARSE_ERROR, "Parse error: not JSON");
                        send_line(srv, r);
                        json_decref(r);
                        continue;
                }
                /* Until initialize is through, messages are handled in
                 * order: a client that does not wait for its answer must
                 * not see its next request refused as too early. */
                if (!mcp_session_protocol(srv->session))
                        run_inline(srv, msg);
                else
                        start_job(srv, msg);
        }
        free(line);
        wait_running_below(srv, 1);
}

static int usage(void)
{
        printf("Usage: sandboxd mcp [--url URL] [--key KEY]\n\n"
               "An MCP server (Model Context Protocol, revision %s and older) on stdin/stdout\n"
               "for AI agents: tools to run code and commands and to handle files in sandboxes\n"
               "of a sandboxd server (docs/mcp.md). Configure your MCP client with\n"
               "  {\"command\": \"sandboxd\", \"args\": [\"mcp\"], \"env\": {\"SANDBOXD_URL\": \"http://127.0.0.1:8787\"}}\n",
               MCP_PROTOCOL_LATEST);
        return 0;
}

int cli_mcp(int argc, char **argv)
{
        struct cli_ctx ctx;
        int r = cli_ctx_open(&ctx, "mcp", &argc, argv);
        if (r != 0)
                return r;
        if (ctx.help)
                return usage();
        if (argc > 1) {
                r = cli_usage_error(&ctx, "unexpected argument '%s'", argv[1]);
                cli_ctx_close(&ctx);
                return r;
        }
        struct stdio_server srv = { .client = ctx.client };
        if (mcp_session_new(&srv.session) < 0) {
                cli_ctx_close(&ctx);
                return cli_fail(&ctx, "out of memory");
        }
        srv.out = (struct mcp_out){ send_line, &srv };
        pthread_mutex_init(&srv.write_lock, NULL);
        pthread_mutex_init(&srv.lock, NULL);
        pthread_cond_init(&srv.changed, NULL);
        /* A client that went away must not kill us mid-call with SIGPIPE. */
        signal(SIGPIPE, SIG_IGN);
        fprintf(stderr, "sandboxd mcp: serving MCP on stdio for %s (%s)\n", ctx.cfg.url, ctx.cfg.source);
        serve(&srv);
        pthread_cond_destroy(&srv.changed);
        pthread_mutex_destroy(&srv.lock);
        pthread_mutex_destroy(&srv.write_lock);
        mcp_session_free(srv.session);
        cli_ctx_close(&ctx);
        return 0;
}
