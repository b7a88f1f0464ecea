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

#define CHECK(cond)                                                                              \
        do {                                                                                     \
                if (!(cond)) {                                                                   \
                        fprintf(stderr, "INVARIANT FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
                        __builtin_trap();                                                        \
                }                                                                                \
        } while (0)
