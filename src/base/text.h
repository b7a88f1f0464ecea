/* Small text helpers for key = value files (the daemon's config, the
 * client's). */
#pragma once

/* s without its leading and trailing ASCII whitespace: the end is cut in
 * place, the start is a pointer into s. */
char *text_trim(char *s);
