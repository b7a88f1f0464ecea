/* `sandboxd mcp`. */
#include "cli/cli.h"

int cli_mcp(int argc, char **argv)
{
        (void)argc;
        return cli_pending(argv[0]);
}
