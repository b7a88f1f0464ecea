/* The controller's sandbox sizes (seed 003 POST /sandbox/create): k8s-style
 * quantities parsed and bounded. Shared by the files of api/controller/. */
#pragma once

#include <jansson.h>
#include <stdint.h>

/* timeout_seconds: absent → the default; 1 … max. */
#define CTL_SANDBOX_TIMEOUT_DEFAULT_S 600
#define CTL_SANDBOX_TIMEOUT_MAX_S 86400
/* cpus: 0.1 CPU … the host's CPUs; memory: 16 MiB … half the host's RAM. */
#define CTL_CPU_MILLIS_MIN 100
#define CTL_MEMORY_MIN (16ULL << 20)

/* cpus: a number (2, 0.5) or a string ("2", "0.5", "500m") into
 * thousandths of a CPU; absent or null: 0 (the service's quota). 0, or
 * -EINVAL with *ret_msg (static) for the client's 400. */
int ctl_parse_cpus(json_t *v, uint64_t *ret, const char **ret_msg);
/* memory: bytes as a number, or a string with an optional suffix (Ki Mi Gi
 * Ti: powers of 1024; K M G T: of 1000): "2Gi", "512Mi", "1G", "1048576".
 * Absent or null: 0 (the service's limit). As ctl_parse_cpus. */
int ctl_parse_memory(json_t *v, uint64_t *ret, const char **ret_msg);
