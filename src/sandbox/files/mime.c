/* What a file's bytes are: a MIME type by extension, binary or text. */
#include <string.h>
#include <strings.h>

#include "base/util.h"
#include "sandbox/files.h"

static const struct {
        const char *ext;
        const char *type;
} mime_table[] = {
        { ".json", "application/json" }, { ".js", "text/javascript" },
        { ".mjs", "text/javascript" },   { ".py", "text/x-python" },
        { ".pl", "text/x-perl" },        { ".rb", "text/x-ruby" },
        { ".txt", "text/plain" },        { ".md", "text/markdown" },
        { ".html", "text/html" },        { ".css", "text/css" },
        { ".csv", "text/csv" },          { ".png", "image/png" },
        { ".jpg", "image/jpeg" },        { ".jpeg", "image/jpeg" },
        { ".gif", "image/gif" },         { ".svg", "image/svg+xml" },
        { ".pdf", "application/pdf" },   { ".wasm", "application/wasm" },
        { ".zip", "application/zip" },   { ".gz", "application/gzip" },
};

const char *files_mime_type(const char *path, bool binary)
{
        /* Same as /\.[^./]+$/ on the path: the last dot of the last name. */
        const char *slash = strrchr(path, '/');
        const char *dot = strrchr(slash ? slash : path, '.');
        if (dot && dot[1] != '\0')
                for (size_t i = 0; i < ARRAY_SIZE(mime_table); i++)
                        if (strcasecmp(dot, mime_table[i].ext) == 0)
                                return mime_table[i].type;
        return binary ? "application/octet-stream" : "text/plain";
}

bool files_is_binary(const void *data, size_t len)
{
        return !utf8_valid(data, len) || memchr(data, '\0', len) != NULL;
}
