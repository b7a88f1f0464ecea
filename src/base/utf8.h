/* UTF-8 validation (RFC 3629: no overlongs, no surrogates, max U+10FFFF). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

bool utf8_valid(const char *s, size_t len);
/* Copies s to out replacing invalid sequences with U+FFFD, so the result is
 * valid UTF-8 for JSON (NUL is kept; JSON escapes it). out must hold 3*len+1
 * bytes. Returns the length written (without the NUL). */
size_t utf8_sanitize(const char *s, size_t len, char *out);
/* The length of s's longest prefix that does not end inside a UTF-8
 * sequence (a chunk of a stream split mid-character keeps its last 1-3
 * bytes for the next chunk). */
size_t utf8_complete_len(const char *s, size_t len);
