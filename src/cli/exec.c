/* `sandboxd exec`. */
#include "cli/cli.h"

int cli_exec(int argc, char **argv)
{
        (void)argc;
        return cli_pending(argv[0]);
}
