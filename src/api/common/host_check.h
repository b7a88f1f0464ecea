/* Shared by every facade: the Host check that keeps a keyless daemon on
 * loopback from being reached by DNS rebinding (a web page whose name
 * resolves to 127.0.0.1 sends its own name as Host). */
#pragma once

#include <stdbool.h>

/* True when host (a Host header value, may be NULL) names this machine by
 * a loopback literal: 127.0.0.1, localhost (any case) or [::1], each with
 * an optional ":port" (1-5 digits). Anything else, a missing header
 * included, is false. */
bool api_host_is_loopback_literal(const char *host);
/* The host[:port] of an Origin header value "http://…" or "https://…"
 * (the scheme in any case), or NULL for anything else ("null" included). */
const char *api_origin_authority(const char *origin);
