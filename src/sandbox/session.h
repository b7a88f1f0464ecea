/* Shared between session.c and shell.c only: a bridge shell session of a
 * sandbox. The list and every field but run_lock are guarded by the
 * sandbox's lock; run_lock (one command at a time) is taken without it. */
#pragma once

#include <jansson.h>
#include <pthread.h>

#include "sandbox/internal.h"

struct session {
        char id[SBX_SESSION_ID_MAX + 1];
        char cwd[4096];              /* always /workspace or below */
        json_t *env;                 /* {name: string|null} over the sandbox's env */
        char *shell;                 /* bash text restoring functions, aliases, variables; or NULL */
        pthread_mutex_t run_lock;
        int refs;                    /* the list's + each command's */
        bool deleted;                /* out of the list */
        struct proc *running;        /* the command in progress, or NULL */
        struct session *next;
};

/* The session sid of s (caller holds s->lock), created when create and
 * absent (cwd /workspace, no env; ERR_LIMIT past max_sessions); NULL
 * otherwise (err filled). */
struct session *session_find(struct sandbox_mgr *m, struct sandbox *s, const char *sid, bool create,
                             struct err *err);
/* References (caller holds s->lock). */
void session_ref(struct session *se);
void session_unref(struct session *se);
