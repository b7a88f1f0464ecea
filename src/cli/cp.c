/* `sandboxd cp`. */
#include "cli/cli.h"

int cli_cp(int argc, char **argv)
{
        (void)argc;
        return cli_pending(argv[0]);
}
