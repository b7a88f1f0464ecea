/* Execution counters (base/metrics.h) from an engine outcome, for every
 * facade that runs code. */
#pragma once

#include <stdint.h>

#include "base/metrics.h"
#include "engine/engine.h"
#include "sandbox/runner.h"

/* Counts one execution of api begun at start_ns (now_ns()). o NULL: it
 * could not run. A limit is "limit"; a kernel's error (an exception) or no
 * answer at all is "error"; else "ok". */
void api_count_execution(enum metrics_api api, const struct exec_outcome *o, uint64_t start_ns);
/* The same for a command run by the sandbox's runner: rr NULL: it could
 * not start; timed out is "limit", a non-zero exit "error". */
void api_count_run(enum metrics_api api, const struct sbx_run_result *rr, uint64_t start_ns);
