/* Structured logging to stderr in logfmt: ts=… level=… msg="…" k=v.
 * Only main, http/ and api/ log above debug (house style R8). */
#pragma once

#include <stdarg.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR, _LOG_LEVEL_MAX };

void log_set_level(enum log_level level);
int log_parse_level(const char *s, enum log_level *ret);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
/* Logs with the errno text appended and returns r (a negative errno). */
int log_error_errno(int r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
