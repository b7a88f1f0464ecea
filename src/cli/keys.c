/* `sandboxd keys`. */
#include "cli/cli.h"

int cli_keys(int argc, char **argv)
{
        (void)argc;
        return cli_pending(argv[0]);
}
