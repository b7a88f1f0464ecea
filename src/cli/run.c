/* `sandboxd run`. */
#include "cli/cli.h"

int cli_run(int argc, char **argv)
{
        (void)argc;
        return cli_pending(argv[0]);
}
