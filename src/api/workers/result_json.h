/* The sandbox-workers ExecutionResult view of an execution outcome
 * (shared/reference/sandbox-workers.md). */
#pragma once

#include <jansson.h>

#include "engine/engine.h"
#include "runtimes/runtime.h"

/* Turns an outcome into the ExecutionResult object (new ref, NULL on OOM).
 * A process runtime (shell) that exits non-zero reports
 * {"name":"ExitError","message":"exit status N","exitCode":N} and one
 * killed by a signal {"name":"ExitError","message":"killed by signal N",
 * "signal":N}; its results are always []. */
json_t *exec_result_json(const struct runtime *rt, const char *code, const struct exec_outcome *o,
                         const struct exec_limits *lim);

struct config;
/* The limits of one execution as the configuration sets them (the
 * facade reports them in /languages and in every result's usage). */
void exec_limits_from_config(const struct config *cfg, struct exec_limits *ret);
