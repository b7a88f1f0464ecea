/* The daemon's version; also names the kernel build in context journals. */
#pragma once

#define SANDBOXD_VERSION "0.2.0"
