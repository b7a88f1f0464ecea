#include "runtimes/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/jail.h"

static struct runtime table[] = {
        {
                .id = "javascript", .name = "JavaScript", .package = "nodejs", .engine_name = "Node.js",
                .kernel = "node_kernel.js",
                .argv = { "/usr/bin/node", "@HEAP@", "--stack-size=984", "@KERNEL@", "@MODE@" },
                .version_argv = { "/usr/bin/node", "-p", "process.versions.node" },
                .capabilities = { "console", "env-vars", "last-expression-result", "promises", "typescript",
                                  "web-builtins" },
                .contexts = true,
        },
        {
                .id = "python", .name = "Python", .package = "python3", .engine_name = "CPython",
                .kernel = "python_kernel.py",
                .argv = { "/usr/bin/python3", "-I", "@KERNEL@", "@MODE@" },
                .version_argv = { "/usr/bin/python3", "-I", "-S", "-c",
                                  "import platform; print(platform.python_version())" },
                .capabilities = { "stdout", "env-vars", "last-expression-result", "standard-library" },
                .extra_env = { "PYTHONDONTWRITEBYTECODE=1" },
                .contexts = true,
                .zygote = true,
                .interruptible = true,
        },
        {
                .id = "perl", .name = "Perl", .package = "perl", .engine_name = "Perl",
                .kernel = "perl_kernel.pl",
                .argv = { "/usr/bin/perl", "@KERNEL@", "@MODE@" },
                .version_argv = { "/usr/bin/perl", "-e", "printf qq{%vd\\n}, $^V" },
                .capabilities = { "stdout", "env-vars", "last-expression-result", "standard-library" },
                .contexts = true,
                .zygote = true,
        },
        {
                .id = "ruby", .name = "Ruby", .package = "ruby", .engine_name = "CRuby",
                .kernel = "ruby_kernel.rb",
                .argv = { "/usr/bin/ruby", "--disable-gems", "@KERNEL@", "@MODE@" },
                .version_argv = { "/usr/bin/ruby", "--disable-gems", "-e", "puts RUBY_VERSION" },
                .capabilities = { "stdout", "env-vars", "last-expression-result", "standard-library" },
                .contexts = true,
        },
        {
                /* No kernel: each request is `bash -c CODE` in a fresh jail. */
                .id = "shell", .name = "Shell", .package = "bash", .engine_name = "Bash",
                .kind = RUNTIME_PROCESS,
                .argv = { "/bin/bash", "-c" },
                .version_argv = { "/bin/bash", "-c",
                                  "echo ${BASH_VERSINFO[0]}.${BASH_VERSINFO[1]}.${BASH_VERSINFO[2]}" },
                .capabilities = { "stdout", "env-vars", "exit-status" },
        },
};

size_t runtime_count(void)
{
        return sizeof(table) / sizeof(table[0]);
}

const struct runtime *runtime_at(size_t i)
{
        return i < runtime_count() ? &table[i] : NULL;
}

const struct runtime *runtime_find(const char *id)
{
        for (size_t i = 0; id && i < runtime_count(); i++)
                if (strcmp(table[i].id, id) == 0)
                        return &table[i];
        return NULL;
}

const char *runtime_normalize(const char *name)
{
        static const char *const aliases[][2] = {
                { "python", "python" }, { "python3", "python" }, { "py", "python" },
                { "javascript", "javascript" }, { "js", "javascript" }, { "node", "javascript" },
                { "typescript", "typescript" }, { "ts", "typescript" },
                { "perl", "perl" }, { "ruby", "ruby" }, { "rb", "ruby" },
                { "shell", "shell" }, { "bash", "shell" }, { "sh", "shell" },
        };
        for (size_t i = 0; name && i < sizeof(aliases) / sizeof(aliases[0]); i++)
                if (strcasecmp(aliases[i][0], name) == 0)
                        return aliases[i][1];
        return NULL;
}

const struct runtime *runtime_resolve(const char *name, bool *ret_typescript)
{
        const char *id = runtime_normalize(name);
        if (!id)
                return NULL;
        bool ts = strcmp(id, "typescript") == 0;
        if (ret_typescript)
                *ret_typescript = ts;
        return runtime_find(ts ? "javascript" : id);
}

static void probe_one(struct runtime *rt)
{
        int pfd[2];
        snprintf(rt->engine, sizeof(rt->engine), "%s", rt->engine_name);
        if (access(rt->version_argv[0], X_OK) < 0 || pipe2(pfd, O_CLOEXEC) < 0)
                return;
        pid_t pid = fork();
        if (pid == 0) {
                dup2(pfd[1], 1);
                char *const envp[] = { "PATH=/usr/bin:/bin", "LANG=C.UTF-8", NULL };
                execve(rt->version_argv[0], (char *const *)rt->version_argv, envp);
                _exit(127);
        }
        close(pfd[1]);
        char buf[64] = { 0 };
        ssize_t n = pid > 0 ? read(pfd[0], buf, sizeof(buf) - 1) : -1;
        close(pfd[0]);
        if (pid > 0)
                waitpid(pid, NULL, 0);
        if (n <= 0)
                return;
        buf[strcspn(buf, "\r\n")] = '\0';
        snprintf(rt->version, sizeof(rt->version), "%s", buf);
        snprintf(rt->engine, sizeof(rt->engine), "%s %s", rt->engine_name, rt->version);
}

void runtime_probe_versions(char *ret_missing, size_t len)
{
        if (len)
                ret_missing[0] = '\0';
        for (size_t i = 0; i < runtime_count(); i++) {
                probe_one(&table[i]);
                if (table[i].version[0] == '\0' && len) {
                        size_t used = strlen(ret_missing);
                        snprintf(ret_missing + used, len - used, "%s%s", used ? " " : "", table[i].id);
                }
        }
}

int runtime_build_argv(const struct runtime *rt, const char *mode, unsigned heap_mb,
                       const char **out, size_t max, char *scratch, size_t scratch_len)
{
        size_t n = 0, used = 0;
        if (rt->kind != RUNTIME_KERNEL)
                return -EOPNOTSUPP; /* no kernel to start */
        for (size_t i = 0; i < RUNTIME_MAX_ARGV && rt->argv[i]; i++) {
                const char *a = rt->argv[i];
                if (n + 1 >= max)
                        return -E2BIG;
                if (strcmp(a, "@MODE@") == 0) {
                        out[n++] = mode;
                        continue;
                }
                int w;
                if (strcmp(a, "@KERNEL@") == 0)
                        w = snprintf(scratch + used, scratch_len - used, "%s/%s", JAIL_KERNELS_DIR, rt->kernel);
                else if (strcmp(a, "@HEAP@") == 0)
                        w = snprintf(scratch + used, scratch_len - used, "--max-old-space-size=%u", heap_mb);
                else {
                        out[n++] = a;
                        continue;
                }
                if (w < 0 || (size_t)w >= scratch_len - used)
                        return -E2BIG;
                out[n++] = scratch + used;
                used += (size_t)w + 1;
        }
        out[n] = NULL;
        return 0;
}
