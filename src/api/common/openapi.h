/* The one OpenAPI viewer page every facade serves beside its document
 * (src/api/common/openapi.html): it fetches openapi.json from its own
 * directory, passing on a ?token= it was opened with. */
#pragma once

#include <stdbool.h>

#include "http/server.h"

/* Fills res with the viewer and its headers (a CSP that lets it load
 * nothing but its own origin's JSON). false when out of memory. */
bool api_openapi_viewer(struct http_response *res);
