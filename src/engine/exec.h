/* TRANSITION header, for sandbox/ until its rewrite lands (issue 9): the
 * engine's interface is engine.h, proc.h and kproc.h. The two declarations
 * below are defined outside engine/ (engine/ knows no config and no JSON
 * view) and go away with this file. */
#pragma once

#include "engine/engine.h"
#include "engine/kproc.h"
#include "engine/proc.h"

struct config;
/* Defined in src/api/workers/result_json.c. */
void exec_limits_from_config(const struct config *cfg, struct exec_limits *ret);
json_t *exec_result_json(const struct runtime *rt, const char *code, const struct exec_outcome *o,
                         const struct exec_limits *lim);
