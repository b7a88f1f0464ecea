/* Process-wide counters (see metrics.h). Plain arrays of 64-bit counters
 * updated with relaxed atomics: nothing orders one counter against
 * another, and a scrape needs none of that. */
#include "base/metrics.h"

#include <errno.h>

#include "base/util.h"

/* Upper bounds in seconds (Prometheus' "le"), then +Inf. Executions run
 * from a few milliseconds (a warm kernel) to the wall limit (minutes). */
static const double bucket_le[] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300 };
#define NBUCKETS (ARRAY_SIZE(bucket_le) + 1)

static uint64_t executions[_METRICS_API_MAX][_METRICS_OUTCOME_MAX];
static uint64_t latency_bucket[_METRICS_API_MAX][NBUCKETS]; /* not cumulative: rendered so */
static uint64_t latency_sum_ns[_METRICS_API_MAX];
static uint64_t http_replies[6]; /* [0]: other, [1..5]: 1xx..5xx */
static uint64_t errors[_METRICS_ERROR_MAX];

static const char *const api_names[] = {
        [METRICS_API_RUNTIME] = "runtime",
        [METRICS_API_GATEWAY] = "gateway",
        [METRICS_API_BRIDGE] = "bridge",
        [METRICS_API_CONTROLLER] = "controller",
};
static const char *const outcome_names[] = {
        [METRICS_OUTCOME_OK] = "ok",
        [METRICS_OUTCOME_ERROR] = "error",
        [METRICS_OUTCOME_LIMIT] = "limit",
        [METRICS_OUTCOME_FAILED] = "failed",
};
static const char *const error_names[] = {
        [METRICS_ERROR_HTTP_5XX] = "http_5xx",
        [METRICS_ERROR_EXECUTION] = "execution",
        [METRICS_ERROR_SECRETS] = "secrets",
};

static inline void bump(uint64_t *c, uint64_t by)
{
        __atomic_fetch_add(c, by, __ATOMIC_RELAXED);
}

static inline uint64_t peek(const uint64_t *c)
{
        return __atomic_load_n(c, __ATOMIC_RELAXED);
}

const char *metrics_api_name(enum metrics_api api)
{
        return (unsigned)api < _METRICS_API_MAX ? api_names[api] : "unknown";
}

const char *metrics_outcome_name(enum metrics_outcome o)
{
        return (unsigned)o < _METRICS_OUTCOME_MAX ? outcome_names[o] : "unknown";
}

void metrics_execution(enum metrics_api api, enum metrics_outcome outcome, uint64_t duration_ns)
{
        if ((unsigned)api >= _METRICS_API_MAX || (unsigned)outcome >= _METRICS_OUTCOME_MAX)
                return;
        double s = (double)duration_ns / 1e9;
        size_t b = 0;
        while (b < ARRAY_SIZE(bucket_le) && s > bucket_le[b])
                b++;
        bump(&executions[api][outcome], 1);
        bump(&latency_bucket[api][b], 1);
        bump(&latency_sum_ns[api], duration_ns);
        if (outcome == METRICS_OUTCOME_FAILED)
                metrics_error(METRICS_ERROR_EXECUTION);
}

void metrics_http_status(int status)
{
        int cls = status / 100;
        bump(&http_replies[cls >= 1 && cls <= 5 ? cls : 0], 1);
        if (status >= 500)
                metrics_error(METRICS_ERROR_HTTP_5XX);
}

void metrics_error(enum metrics_error kind)
{
        if ((unsigned)kind < _METRICS_ERROR_MAX)
                bump(&errors[kind], 1);
}

static int header(struct buf *out, const char *name, const char *type, const char *help)
{
        return buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* _bucket lines are cumulative and end with +Inf; _count is that +Inf
 * sum (not a separate counter), so the two always agree in one scrape. */
static int render_histogram(struct buf *out, enum metrics_api api)
{
        const char *name = "sandboxd_execution_duration_seconds";
        uint64_t cum = 0;
        int r = 0;
        for (size_t b = 0; b < NBUCKETS && r >= 0; b++) {
                cum += peek(&latency_bucket[api][b]);
                if (b < ARRAY_SIZE(bucket_le))
                        r = buf_printf(out, "%s_bucket{api=\"%s\",le=\"%g\"} %llu\n", name, api_names[api],
                                       bucket_le[b], (unsigned long long)cum);
                else
                        r = buf_printf(out, "%s_bucket{api=\"%s\",le=\"+Inf\"} %llu\n", name, api_names[api],
                                       (unsigned long long)cum);
        }
        if (r >= 0)
                r = buf_printf(out, "%s_sum{api=\"%s\"} %.9f\n%s_count{api=\"%s\"} %llu\n", name, api_names[api],
                               (double)peek(&latency_sum_ns[api]) / 1e9, name, api_names[api],
                               (unsigned long long)cum);
        return r;
}

static int render_executions(struct buf *out)
{
        int r = header(out, "sandboxd_executions_total", "counter", "Executions by API and outcome.");
        for (size_t a = 0; a < _METRICS_API_MAX && r >= 0; a++)
                for (size_t o = 0; o < _METRICS_OUTCOME_MAX && r >= 0; o++)
                        r = buf_printf(out, "sandboxd_executions_total{api=\"%s\",outcome=\"%s\"} %llu\n",
                                       api_names[a], outcome_names[o], (unsigned long long)peek(&executions[a][o]));
        if (r >= 0)
                r = header(out, "sandboxd_execution_duration_seconds", "histogram",
                           "Wall time of executions, by API.");
        for (size_t a = 0; a < _METRICS_API_MAX && r >= 0; a++)
                r = render_histogram(out, (enum metrics_api)a);
        return r;
}

int metrics_render(struct buf *out)
{
        static const char *const classes[] = { "other", "1xx", "2xx", "3xx", "4xx", "5xx" };
        int r = render_executions(out);
        if (r >= 0)
                r = header(out, "sandboxd_http_requests_total", "counter", "HTTP replies by status class.");
        for (size_t i = 0; i < ARRAY_SIZE(classes) && r >= 0; i++)
                r = buf_printf(out, "sandboxd_http_requests_total{code=\"%s\"} %llu\n", classes[i],
                               (unsigned long long)peek(&http_replies[i]));
        if (r >= 0)
                r = header(out, "sandboxd_errors_total", "counter", "Errors by kind.");
        for (size_t i = 0; i < _METRICS_ERROR_MAX && r >= 0; i++)
                r = buf_printf(out, "sandboxd_errors_total{kind=\"%s\"} %llu\n", error_names[i],
                               (unsigned long long)peek(&errors[i]));
        return r < 0 ? -ENOMEM : 0;
}
