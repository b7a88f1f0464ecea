/* Shared by every facade's auth hook: the key comparison and the bearer
 * token of an Authorization header. */
#pragma once

#include <stdbool.h>

/* Compares every byte of the expected key whatever the input, so the time
 * taken does not tell how much of a guess was right. */
bool api_key_equal(const char *given, const char *key);
/* The token of "Authorization: Bearer <token>", the scheme name in any
 * case (RFC 9110 §11.1), or NULL. */
const char *api_bearer_token(const char *authorization);
