/* `sandboxd completion bash`: a bash completion script — the commands, each
 * command's options, languages, and sandbox ids asked of the server
 * (`sandboxd ls --ids`, with the --url/--key already typed). Load it with
 *   source <(sandboxd completion bash)
 * or save it under /etc/bash_completion.d/sandboxd. */
#include <stdio.h>
#include <string.h>

#include "base/cleanup.h"
#include "cli/cli.h"

static const char help[] =
        "Usage: sandboxd completion bash\n"
        "\n"
        "Prints a bash completion script: commands, options, languages and sandbox ids\n"
        "(asked of the server as you type, with `sandboxd ls --ids`).\n"
        "\n"
        "Examples:\n"
        "  source <(sandboxd completion bash)            # this shell\n"
        "  sandboxd completion bash > /etc/bash_completion.d/sandboxd\n";

/* What each command takes, for the script: its options, and what its
 * operands are ("ids": sandbox ids; "lang": a language first; "cmds"). */
struct completion {
        const char *command;
        const char *options;
        const char *operands;
};

static const struct completion table[] = {
        { "serve", "--listen --data-dir --set --log-level --help", "" },
        { "run", "-c --code -s --sandbox --context -e --env", "lang" },
        { "exec", "-w --cwd -e --env -t --timeout", "ids" },
        { "cp", "-r --recursive -q --quiet", "ids" },
        { "shell", "--session --cmd", "ids" },
        { "ls", "-a --all --ids", "ids" },
        { "rm", "-r --recursive -f --force", "ids" },
        { "contexts", "-w --cwd", "contexts" },
        { "keys", "", "keys" },
        { "completion", "", "shells" },
        { "mcp", "", "" },
        { "help", "", "cmds" },
};

static const char script_head[] =
        "# bash completion for sandboxd (sandboxd completion bash)\n"
        "_sandboxd_ids() {\n"
        "    local i args=()\n"
        "    for ((i = 1; i < ${#COMP_WORDS[@]} - 1; i++)); do\n"
        "        case ${COMP_WORDS[i]} in\n"
        "            --url|--key) args+=(\"${COMP_WORDS[i]}\" \"${COMP_WORDS[i+1]}\") ;;\n"
        "        esac\n"
        "    done\n"
        "    \"${COMP_WORDS[0]}\" ls --ids \"${args[@]}\" 2>/dev/null\n"
        "}\n"
        "_sandboxd() {\n"
        "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
        "    local global='--url --key --json --help'\n"
        "    local langs='python javascript typescript perl ruby shell'\n";

static const char script_tail[] =
        "    if ((COMP_CWORD == 1)); then\n"
        "        COMPREPLY=($(compgen -W \"$cmds\" -- \"$cur\")); return\n"
        "    fi\n"
        "    local cmd=${COMP_WORDS[1]} i n=0 dashdash=0\n"
        "    case $prev in\n"
        "        --url|--key|-c|--code|-e|--env|-t|--timeout|--context|--set|--listen|--log-level) return ;;\n"
        "        -s|--sandbox) COMPREPLY=($(compgen -W \"$(_sandboxd_ids)\" -- \"$cur\")); return ;;\n"
        "        -w|--cwd|--data-dir) return ;;\n"
        "    esac\n"
        "    # n: the operands before this word; dashdash: an exec command began\n"
        "    for ((i = 2; i < COMP_CWORD; i++)); do\n"
        "        case ${COMP_WORDS[i]} in\n"
        "            --) dashdash=1 ;;\n"
        "            --url|--key|-c|--code|-e|--env|-t|--timeout|--context|-s|--sandbox|-w|--cwd) ((i++)) ;;\n"
        "            -*) ;;\n"
        "            *) ((n++)) ;;\n"
        "        esac\n"
        "    done\n"
        "    if [[ $cur == -* && $dashdash == 0 ]]; then\n"
        "        COMPREPLY=($(compgen -W \"${opts[$cmd]} $global\" -- \"$cur\")); return\n"
        "    fi\n"
        "    case ${operands[$cmd]}:$n in\n"
        "        lang:0) COMPREPLY=($(compgen -W \"$langs\" -- \"$cur\")) ;;\n"
        "        lang:*) COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n"
        "        ids:0) COMPREPLY=($(compgen -W \"$(_sandboxd_ids)\" -- \"$cur\")) ;;\n"
        "        ids:1) [[ $cmd == exec ]] && COMPREPLY=($(compgen -c -- \"$cur\")) ||\n"
        "               COMPREPLY=($(compgen -W \"$(_sandboxd_ids)\" -- \"$cur\")) ;;\n"
        "        ids:*) [[ $cmd != exec ]] && COMPREPLY=($(compgen -W \"$(_sandboxd_ids)\" -- \"$cur\")) ;;\n"
        "        contexts:0) COMPREPLY=($(compgen -W \"$(_sandboxd_ids)\" -- \"$cur\")) ;;\n"
        "        contexts:1) COMPREPLY=($(compgen -W 'create rm' -- \"$cur\")) ;;\n"
        "        contexts:2) [[ ${COMP_WORDS[3]} == create ]] && COMPREPLY=($(compgen -W \"$langs\" -- \"$cur\")) ;;\n"
        "        keys:0) COMPREPLY=($(compgen -W 'create rm regenerate' -- \"$cur\")) ;;\n"
        "        shells:0) COMPREPLY=($(compgen -W 'bash' -- \"$cur\")) ;;\n"
        "        cmds:0) COMPREPLY=($(compgen -W \"$cmds\" -- \"$cur\")) ;;\n"
        "    esac\n"
        "}\n"
        "complete -o default -F _sandboxd sandboxd\n";

static void print_script(void)
{
        fputs(script_head, stdout);
        fputs("    local cmds='", stdout);
        for (size_t i = 0; i < ARRAY_SIZE(table); i++)
                printf("%s%s", i ? " " : "", table[i].command);
        fputs("'\n    local -A opts=(", stdout);
        for (size_t i = 0; i < ARRAY_SIZE(table); i++)
                printf(" [%s]='%s'", table[i].command, table[i].options);
        fputs(")\n    local -A operands=(", stdout);
        for (size_t i = 0; i < ARRAY_SIZE(table); i++)
                printf(" [%s]='%s'", table[i].command, table[i].operands);
        fputs(")\n", stdout);
        fputs(script_tail, stdout);
}

int cli_completion(int argc, char **argv)
{
        struct cli_ctx ctx;
        int r = cli_ctx_open(&ctx, "completion", &argc, argv);
        if (r != 0 || ctx.help)
                return r ? r : cli_print_help(help);
        if (argc != 2 || strcmp(argv[1], "bash"))
                r = cli_usage_error(&ctx, "only bash is supported: sandboxd completion bash");
        else
                print_script();
        cli_ctx_close(&ctx);
        return r;
}
