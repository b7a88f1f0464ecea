/* Files assembled into the binary (.incbin), so the daemon never reads them
 * at run time: the bridge's OpenAPI document and viewer, the playground.
 * The Makefile's EMBEDDED list makes the including object depend on them
 * (-MMD does not see .incbin). */
#pragma once

#include <stdint.h>

/* EMBED(sym, "path") defines `const char sym[]` (the bytes, no NUL added)
 * and `const uint64_t sym_len`. .incbin paths are relative to the compiler's
 * working directory: make runs from the top of the tree (the daemon,
 * sanitizer and fuzz builds alike). The length is assembled too, so C never
 * subtracts pointers of two objects. */
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
