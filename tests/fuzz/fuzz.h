/* Shared bits of the libFuzzer targets (see mk/fuzz.mk, docs/security.md#fuzzing).
 * CHECK() is an invariant: when it fails the input is reported with the
 * failing expression and the process traps, so libFuzzer saves it as a
 * crash artifact and `make fuzz` fails. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);
/* Optional (weak): a target with temp files defines it; it runs before a
 * failed CHECK traps, on sanitizer deaths and at normal exit. */
void fuzz_cleanup(void) __attribute__((weak));

#define CHECK(cond)                                                                              \
        do {                                                                                     \
                if (!(cond)) {                                                                   \
                        fprintf(stderr, "INVARIANT FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
                        if (fuzz_cleanup)                                                        \
                                fuzz_cleanup();                                                  \
                        __builtin_trap();                                                        \
                }                                                                                \
        } while (0)
