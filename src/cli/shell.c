/* `sandboxd shell`. */
#include "cli/cli.h"

int cli_shell(int argc, char **argv)
{
        (void)argc;
        return cli_pending(argv[0]);
}
