/* The command table and `sandboxd help`. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

#include "base/cleanup.h"

int cli_pending(const char *name)
{
        fprintf(stderr, "sandboxd %s: not available in this build\n", name);
        return 1;
}

static int cli_help(int argc, char **argv);

static const struct cli_command commands[] = {
        { "serve", "[--listen HOST:PORT] [--data-dir DIR] …", "run the server (the default without a command)", NULL },
        { "run", "LANG [-c CODE | FILE | -] [--sandbox ID [--context ID]]", "run code once (or in a sandbox's context)", cli_run },
        { "exec", "SANDBOX [--cwd DIR] [-e K=V] -- ARGV…", "run a command in a sandbox, streaming its output", cli_exec },
        { "cp", "SRC DST  (SANDBOX:PATH on one side)", "copy files and folders to or from a sandbox", cli_cp },
        { "shell", "SANDBOX [--cmd ARGV…]", "an interactive terminal in a sandbox", cli_shell },
        { "ls", "[SANDBOX[:PATH]]", "list sandboxes, or a sandbox's files", cli_ls },
        { "rm", "SANDBOX… | SANDBOX:PATH…", "delete sandboxes or files", cli_rm },
        { "contexts", "SANDBOX [create LANG | rm ID]", "list, create or delete code contexts", cli_contexts },
        { "keys", "[create NAME | rm ID | regenerate ID]", "the controller API keys of your org", cli_keys },
        { "completion", "bash", "print the shell completion script", cli_completion },
        { "mcp", "[--url URL] [--key KEY]", "an MCP server on stdio, for AI agents", cli_mcp },
        { "help", "[COMMAND]", "this list, or a command's help", cli_help },
};

bool cli_is_command(const char *name)
{
        if (!name || name[0] == '-')
                return false;
        for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
                if (!strcmp(commands[i].name, name))
                        return true;
        return false;
}

static int cli_help(int argc, char **argv)
{
        if (argc > 1) {
                for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
                        if (!strcmp(commands[i].name, argv[1]) && commands[i].run && commands[i].run != cli_help) {
                                char help[] = "--help";
                                char *args[] = { argv[1], help, NULL };
                                return commands[i].run(2, args);
                        }
        }
        printf("Usage: sandboxd COMMAND [ARGS]   (without a command: serve)\n\nCommands:\n");
        for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
                printf("  %-11s %s\n", commands[i].name, commands[i].summary);
        printf("\nEvery client command takes --url URL, --key KEY, --json and --help.\n"
               "Server and key: flags, then SANDBOXD_URL / SANDBOXD_API_KEY, then\n"
               "~/.config/sandboxd/client.conf (url = …, key = …), else http://127.0.0.1:8787.\n");
        return 0;
}

/* Global client options may come before the command too (`sandboxd --json
 * ls`): when argv[1..] is such options and then a command, the command is
 * moved to argv[1] (the options follow it, where the commands take them). */
bool cli_take_command(int argc, char **argv)
{
        int i = 1;
        while (i < argc) {
                const char *a = argv[i];
                if (!strcmp(a, "--url") || !strcmp(a, "--key"))
                        i += 2;
                else if (!strcmp(a, "--json") || !strncmp(a, "--url=", 6) || !strncmp(a, "--key=", 6))
                        i++;
                else
                        break;
        }
        if (i >= argc || !cli_is_command(argv[i]) || !strcmp(argv[i], "serve"))
                return i == 1 && i < argc && cli_is_command(argv[i]);
        char *cmd = argv[i];
        memmove(&argv[2], &argv[1], (size_t)(i - 1) * sizeof(*argv));
        argv[1] = cmd;
        return true;
}

int cli_main(int argc, char **argv)
{
        for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
                if (commands[i].run && !strcmp(commands[i].name, argv[1]))
                        return commands[i].run(argc - 1, argv + 1);
        fprintf(stderr, "sandboxd: unknown command '%s' (sandboxd help)\n", argv[1]);
        return 2;
}
