/* `sandboxd ls`. */
#include "cli/cli.h"

int cli_ls(int argc, char **argv)
{
        (void)argc;
        return cli_pending(argv[0]);
}
