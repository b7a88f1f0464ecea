/* `sandboxd contexts`. */
#include "cli/cli.h"

int cli_contexts(int argc, char **argv)
{
        (void)argc;
        return cli_pending(argv[0]);
}
