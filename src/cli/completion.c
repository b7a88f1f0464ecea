/* `sandboxd completion`. */
#include "cli/cli.h"

int cli_completion(int argc, char **argv)
{
        (void)argc;
        return cli_pending(argv[0]);
}
