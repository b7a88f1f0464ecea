/* The command of a deferred jail (jail_spec.deferred): the bytes the daemon
 * sends to a workload that is already jailed and confined, and how that
 * workload reads them. The reading side runs in the jail's child, a copy
 * of the daemon: no malloc, no stdio (internal.h), only read and mmap.
 *
 * Wire format: struct jail_cmd_header, then len bytes: argc, envc and one
 * more (cwd, "" for the default) NUL-terminated strings, back to back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/io.h"
#include "jail/internal.h"

#define JAIL_CMD_MAGIC 0x53425843u /* "SBXC" */

struct jail_cmd_header {
        uint32_t magic, len, argc, envc;
};

static size_t count_strings(const char *const *v)
{
        size_t n = 0;
        while (v && v[n])
                n++;
        return n;
}

static char *put_string(char *p, const char *s)
{
        size_t n = strlen(s) + 1;
        memcpy(p, s, n);
        return p + n;
}

int jail_cmd_encode(const char *const *argv, const char *const *envp, const char *cwd, char **ret,
                    size_t *ret_len)
{
        size_t argc = count_strings(argv), envc = count_strings(envp), body = strlen(cwd ? cwd : "") + 1;
        if (argc == 0 || argc > JAIL_MAX_ARGS || envc > JAIL_MAX_ENV)
                return -E2BIG;
        for (size_t i = 0; i < argc; i++)
                body += strlen(argv[i]) + 1;
        for (size_t i = 0; i < envc; i++)
                body += strlen(envp[i]) + 1;
        if (body > JAIL_CMD_MAX)
                return -E2BIG;
        struct jail_cmd_header h = { JAIL_CMD_MAGIC, (uint32_t)body, (uint32_t)argc, (uint32_t)envc };
        char *buf = malloc(sizeof(h) + body);
        if (!buf)
                return -ENOMEM;
        memcpy(buf, &h, sizeof(h));
        char *p = buf + sizeof(h);
        for (size_t i = 0; i < argc; i++)
                p = put_string(p, argv[i]);
        for (size_t i = 0; i < envc; i++)
                p = put_string(p, envp[i]);
        put_string(p, cwd ? cwd : "");
        *ret = buf;
        *ret_len = sizeof(h) + body;
        return 0;
}

/* The next NUL-terminated string at *off in body, or NULL past its end. */
static const char *next_string(const char *body, size_t len, size_t *off)
{
        if (*off >= len)
                return NULL;
        const char *s = body + *off;
        const char *nul = memchr(s, '\0', len - *off);
        if (!nul)
                return NULL;
        *off = (size_t)(nul - body) + 1;
        return s;
}

int jail_cmd_decode(const char *body, size_t len, uint32_t argc, uint32_t envc, const char **argv,
                    const char **envp, const char **ret_cwd)
{
        size_t off = 0;
        if (argc == 0 || argc > JAIL_MAX_ARGS || envc > JAIL_MAX_ENV)
                return -E2BIG;
        for (uint32_t i = 0; i < argc; i++)
                if (!(argv[i] = next_string(body, len, &off)))
                        return -EPROTO;
        argv[argc] = NULL;
        for (uint32_t i = 0; i < envc; i++)
                if (!(envp[i] = next_string(body, len, &off)))
                        return -EPROTO;
        envp[envc] = NULL;
        const char *cwd = next_string(body, len, &off);
        if (!cwd || off != len)
                return -EPROTO;
        *ret_cwd = cwd[0] ? cwd : NULL;
        return 0;
}

int jail_cmd_read(int fd, const char **argv, const char **envp, const char **ret_cwd)
{
        struct jail_cmd_header h;
        int r = read_all(fd, &h, sizeof(h));
        if (r < 0)
                return r;
        if (h.magic != JAIL_CMD_MAGIC || h.len == 0 || h.len > JAIL_CMD_MAX)
                return -EPROTO;
        /* The pages go with the exec that follows: nothing to unmap. */
        char *body = mmap(NULL, h.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (body == MAP_FAILED)
                return -errno;
        if ((r = read_all(fd, body, h.len)) < 0)
                return r;
        return jail_cmd_decode(body, h.len, h.argc, h.envc, argv, envp, ret_cwd);
}
