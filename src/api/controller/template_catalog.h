/* The sandbox templates (seed 003, "Templates"): shipped as data files,
 * one directory per template under controller.templates_dir:
 *
 *   <id>/template.json   {id, name, description, category, language,
 *                         tags: [string], env: {name: string},
 *                         setup_command: bash text (optional)}
 *   <id>/files/…         copied into /workspace as they are
 *
 * Loaded once at start and read-only afterwards (no lock). */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* One template at most: its files together, and how many. */
#define CTL_TEMPLATE_BYTES_MAX (16u << 20)
#define CTL_TEMPLATE_FILES_MAX 1000

struct ctl_template_file {
        char *path;                  /* relative to /workspace, owned */
        unsigned char *data;         /* owned, NUL-terminated (not counted) */
        size_t len;
};

struct ctl_template {
        json_t *meta;                /* the checked template.json object, owned */
        const char *id, *category, *language, *setup_command; /* borrowed from meta; setup NULL: none */
        json_t *env;                 /* borrowed from meta: {name: string} */
        struct ctl_template_file *files;   /* sorted by path */
        size_t nfiles;
        uint64_t bytes;
};

struct ctl_templates {
        struct ctl_template *v;      /* sorted by id */
        size_t n;
};

/* Loads every <id>/template.json under dir. A dir that does not exist is
 * an empty catalog; a template that is malformed (bad JSON, a missing or
 * mistyped field, id unlike its directory's name, a symlink or special
 * file under files/, over the caps) fails the whole load with err
 * (ERR_INVALID) naming it. *ret: free with ctl_templates_free. */
int ctl_templates_load(const char *dir, struct ctl_templates **ret, struct err *err);
void ctl_templates_free(struct ctl_templates *t);
/* NULL when there is no template id (t may be NULL). */
const struct ctl_template *ctl_template_find(const struct ctl_templates *t, const char *id);
