/* Where a client finds its server and key (the order is in client.h). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "base/cleanup.h"
#include "client/client.h"

static void config_file_path(char *out, size_t len)
{
        const char *explicit = getenv("SANDBOXD_CLIENT_CONFIG");
        const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
        if (explicit && *explicit)
                snprintf(out, len, "%s", explicit);
        else if (xdg && *xdg)
                snprintf(out, len, "%s/sandboxd/client.conf", xdg);
        else if (home && *home)
                snprintf(out, len, "%s/.config/sandboxd/client.conf", home);
        else
                out[0] = '\0';
}

/* `key = value` lines; url and key are taken only when not set already. */
static int read_config_file(const char *path, struct client_config *cfg, bool want_url, bool want_key,
                            struct err *err)
{
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? 0 : err_set(err, ERR_INVALID, errno, "%s: %s", path, strerror(errno));
        char line[1200];
        unsigned lineno = 0;
        while (fgets(line, sizeof(line), f)) {
                lineno++;
                char *s = text_trim(line);
                if (!*s || *s == '#')
                        continue;
                char *eq = strchr(s, '=');
                if (!eq)
                        return err_set(err, ERR_INVALID, EINVAL, "%s:%u: expected key = value", path, lineno);
                *eq = '\0';
                const char *k = text_trim(s), *v = text_trim(eq + 1);
                if (!strcmp(k, "url") && want_url) {
                        snprintf(cfg->url, sizeof(cfg->url), "%s", v);
                        snprintf(cfg->source, sizeof(cfg->source), "%.63s", path);
                } else if (!strcmp(k, "key") && want_key) {
                        snprintf(cfg->key, sizeof(cfg->key), "%s", v);
                } else if (strcmp(k, "url") && strcmp(k, "key")) {
                        return err_set(err, ERR_INVALID, EINVAL, "%s:%u: unknown key '%s' (url, key)", path, lineno, k);
                }
        }
        return 0;
}

static const char *env_first(const char *a, const char *b)
{
        const char *v = getenv(a);
        if (v && *v)
                return v;
        v = b ? getenv(b) : NULL;
        return v && *v ? v : NULL;
}

int client_config_resolve(struct client_config *cfg, const char *flag_url, const char *flag_key, struct err *err)
{
        memset(cfg, 0, sizeof(*cfg));
        const char *url = flag_url, *key = flag_key;
        snprintf(cfg->source, sizeof(cfg->source), "flag");
        if (!url && (url = env_first("SANDBOXD_URL", NULL)))
                snprintf(cfg->source, sizeof(cfg->source), "env");
        if (!key)
                key = env_first("SANDBOXD_API_KEY", "SANDBOX_API_KEY");
        if (url)
                snprintf(cfg->url, sizeof(cfg->url), "%s", url);
        if (key)
                snprintf(cfg->key, sizeof(cfg->key), "%s", key);
        char path[1024];
        config_file_path(path, sizeof(path));
        if (path[0] && (!url || !key)) {
                int r = read_config_file(path, cfg, !url, !key, err);
                if (r < 0)
                        return r;
        }
        if (!cfg->url[0]) {
                snprintf(cfg->url, sizeof(cfg->url), "%s", CLIENT_DEFAULT_URL);
                snprintf(cfg->source, sizeof(cfg->source), "default");
        }
        if (strncmp(cfg->url, "http://", 7) && strncmp(cfg->url, "https://", 8))
                return err_set(err, ERR_INVALID, EINVAL, "server URL must start with http:// or https://: %s", cfg->url);
        return 0;
}
