/* Error messages every facade's envelope carries: they quote client input
 * (decoded URL bytes, paths), which need not be valid UTF-8, and a JSON
 * encoder refuses invalid UTF-8 (the client would get a 500 instead). */
#pragma once

#include <stdarg.h>
#include <stddef.h>

/* msg itself when it is valid UTF-8, else a sanitised copy left in *owned
 * (the caller frees it; NULL when none was needed or memory ran out, and
 * then msg is returned as is). */
const char *api_message_utf8(const char *msg, char **owned);
/* vsnprintf into buf; a truncation never ends inside a UTF-8 sequence. */
void api_vformat(char *buf, size_t size, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
