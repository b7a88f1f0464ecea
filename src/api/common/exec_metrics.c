/* Execution counters from an engine outcome (see exec_metrics.h). */
#include "api/common/exec_metrics.h"

#include <jansson.h>

#include "base/time.h"

static enum metrics_outcome outcome_of(const struct exec_outcome *o)
{
        if (!o)
                return METRICS_OUTCOME_FAILED;
        if (o->limit != EXEC_LIMIT_NONE)
                return METRICS_OUTCOME_LIMIT;
        /* Not the exit status: a one-shot kernel may be killed at teardown
         * after it answered. No answer at all: it died on its own. */
        json_t *error = o->response ? json_object_get(o->response, "error") : NULL;
        if (!o->response || (error && !json_is_null(error)))
                return METRICS_OUTCOME_ERROR;
        return METRICS_OUTCOME_OK;
}

void api_count_execution(enum metrics_api api, const struct exec_outcome *o, uint64_t start_ns)
{
        metrics_execution(api, outcome_of(o), now_ns() - start_ns);
}

void api_count_run(enum metrics_api api, const struct sbx_run_result *rr, uint64_t start_ns)
{
        enum metrics_outcome o = !rr               ? METRICS_OUTCOME_FAILED
                                 : rr->timed_out   ? METRICS_OUTCOME_LIMIT
                                 : rr->exit_code   ? METRICS_OUTCOME_ERROR
                                                   : METRICS_OUTCOME_OK;
        metrics_execution(api, o, now_ns() - start_ns);
}
