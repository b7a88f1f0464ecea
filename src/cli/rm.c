/* `sandboxd rm`. */
#include "cli/cli.h"

int cli_rm(int argc, char **argv)
{
        (void)argc;
        return cli_pending(argv[0]);
}
