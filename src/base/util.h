/* Umbrella header for the small shared helpers: include the one you need
 * (base/cleanup.h, io.h, fs.h, buf.h, utf8.h, time.h) in new code.
 * Nothing here logs or allocates behind the caller's back. */
#pragma once

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/io.h"
#include "base/time.h"
#include "base/utf8.h"
