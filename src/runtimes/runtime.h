/* The language table: one row per runtime, data not code, so a deployment
 * adds a language by adding a row and a kernel script (docs/kernel-protocol.md). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define RUNTIME_MAX_ARGV 8

enum runtime_kind {
        RUNTIME_KERNEL,   /* an interpreter running a kernel script (JSON lines) */
        RUNTIME_PROCESS,  /* a plain process: argv + the code as its last argument */
};

struct runtime {
        const char *id;           /* canonical id, e.g. "python" */
        const char *name;         /* display name */
        const char *package;      /* Debian package providing the interpreter */
        const char *engine_name;  /* e.g. "CPython" */
        enum runtime_kind kind;
        const char *kernel;       /* kernel script in the kernels dir (RUNTIME_KERNEL) */
        const char *argv[RUNTIME_MAX_ARGV]; /* "@KERNEL@", "@MODE@", "@HEAP_MB@" expand */
        const char *version_argv[RUNTIME_MAX_ARGV]; /* prints the version on stdout */
        const char *capabilities[8];
        const char *extra_env[4]; /* added to the kernel's start-up environment */
        bool contexts;            /* REPL contexts supported */
        bool zygote;              /* single-threaded: can be a fork-server template */
        /* Its repl kernel stops the running cell on SIGINT with an error
         * and keeps serving (docs/kernel-protocol.md "Interrupts"); else an
         * interrupt kills it and its context is restored from the journal. */
        bool interruptible;
        char version[32];         /* probed at start-up */
        char engine[64];          /* "<engine_name> <version>" */
};

/* Looks up a canonical id. NULL if unknown (safe for names like "__proto__"). */
const struct runtime *runtime_find(const char *id);
/* Runtimes in listing order (javascript first, shell last). */
size_t runtime_count(void);
const struct runtime *runtime_at(size_t i);

/* Normalises a user-supplied language name (case-insensitive aliases:
 * python3→python, js/node→javascript, ts→typescript, bash/sh→shell). Returns the canonical
 * name ("typescript" stays "typescript") or NULL if unknown. */
const char *runtime_normalize(const char *name);
/* Resolves a path/body language to the runtime that executes it and whether
 * TypeScript stripping applies. NULL if unknown. */
const struct runtime *runtime_resolve(const char *name, bool *ret_typescript);

/* Runs each interpreter's version command once (outside the jail) and fills
 * version/engine. Missing interpreters are reported in ret_missing. */
void runtime_probe_versions(char *ret_missing, size_t len);

/* Builds argv for one kernel process into out (pointers into the table and
 * into scratch, which must outlive out). */
int runtime_build_argv(const struct runtime *rt, const char *mode, unsigned heap_mb,
                       const char **out, size_t max, char *scratch, size_t scratch_len);
