/* Is a sandbox there? The bridge routes provision an unknown id on first
 * use, so `cp`/`shell` ask the list first: a typo must fail, not create. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

#define SANDBOX_PAGE 1000

int cli_sandbox_check(struct cli_ctx *ctx, const char *id)
{
        for (size_t offset = 0;; offset += SANDBOX_PAGE) {
                char path[128];
                struct client_reply r;
                snprintf(path, sizeof(path), "/sandboxes?limit=%d&offset=%zu", SANDBOX_PAGE, offset);
                int rc = cli_call(ctx, "GET", path, NULL, &r);
                if (rc != 0)
                        return rc;
                json_t *list = json_object_get(r.json, "sandboxes"), *s;
                size_t i, n = json_array_size(list);
                json_array_foreach(list, i, s)
                        if (!strcmp(json_string_value(json_object_get(s, "id")) ?: "", id)) {
                                client_reply_clear(&r);
                                return 0;
                        }
                client_reply_clear(&r);
                if (n < SANDBOX_PAGE)
                        return cli_fail(ctx, "no sandbox '%s' on %s (sandboxd ls lists them)", id, ctx->cfg.url);
        }
}
