/* Base64 (RFC 4648, standard alphabet) as the files APIs speak it. */
#pragma once

#include <stddef.h>

/* Decodes in[0..len) exactly as atob() (WHATWG "forgiving-base64") accepts
 * it: ASCII whitespace is ignored, padding is optional but must be right
 * when present. Returns 0 with *ret (malloc, caller frees; NUL-terminated
 * for convenience) and *ret_len, -EINVAL for anything else, -EFBIG when len
 * is beyond what can be decoded, -ENOMEM. */
int b64_decode(const char *in, size_t len, unsigned char **ret, size_t *ret_len);
/* Encodes with padding into a new NUL-terminated string, or NULL (out of
 * memory, or len too large). */
char *b64_encode(const unsigned char *in, size_t len);
