/* Files assembled into the binary (.incbin), so the daemon never reads them
 * at run time. .incbin paths are relative to the compiler's working
 * directory: make runs from the top of the tree (the daemon, sanitizer and
 * fuzz builds alike); the Makefile's EMBEDDED list makes the object depend
 * on the file. The length is assembled too, so C never subtracts pointers
 * of two objects. */
#pragma once

#include <stdint.h>

#define EMBED(sym, file)                                                \
        __asm__(".pushsection .rodata\n"                               \
                ".balign 16\n"                                         \
                ".type " #sym ", @object\n"                            \
                #sym ":\n"                                             \
                ".incbin \"" file "\"\n"                               \
                "1:\n"                                                 \
                ".size " #sym ", 1b - " #sym "\n"                      \
                ".balign 8\n"                                          \
                ".type " #sym "_len, @object\n"                        \
                #sym "_len:\n"                                         \
                ".quad 1b - " #sym "\n"                                \
                ".size " #sym "_len, 8\n"                              \
                ".popsection\n");                                      \
        extern const char sym[];                                        \
        extern const uint64_t sym##_len
