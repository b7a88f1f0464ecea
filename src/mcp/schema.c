/* A tool's parameter table as the JSON Schema of tools/list, and the same
 * table checking a call's arguments. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mcp/internal.h"

static json_t *param_schema(const struct mcp_param *p)
{
        json_t *s = NULL;
        switch (p->type) {
        case MCP_P_STRING:
                s = json_pack("{s:s}", "type", "string");
                if (s && p->choices) {
                        json_t *e = json_array();
                        for (const char *const *c = p->choices; *c; c++)
                                json_array_append_new(e, json_string(*c));
                        json_object_set_new(s, "enum", e);
                }
                break;
        case MCP_P_INTEGER:
                s = json_pack("{s:s}", "type", "integer");
                if (s && (p->min || p->max)) {
                        json_object_set_new(s, "minimum", json_integer(p->min));
                        json_object_set_new(s, "maximum", json_integer(p->max));
                }
                break;
        case MCP_P_BOOLEAN:
                s = json_pack("{s:s}", "type", "boolean");
                break;
        case MCP_P_ARGV:
                s = json_pack("{s:[{s:s}, {s:s, s:{s:s}, s:i}]}", "anyOf", "type", "string", "type", "array", "items",
                              "type", "string", "minItems", 1);
                break;
        case MCP_P_STRING_MAP:
                s = json_pack("{s:s, s:{s:s}}", "type", "object", "additionalProperties", "type", "string");
                break;
        default:
                return NULL;
        }
        if (s)
                json_object_set_new(s, "description", json_string(p->description));
        return s;
}

json_t *mcp_tool_json(const struct mcp_tool *t)
{
        json_t *props = json_object(), *required = json_array();
        for (const struct mcp_param *p = t->params; p && p->name; p++) {
                json_object_set_new(props, p->name, param_schema(p));
                if (p->required)
                        json_array_append_new(required, json_string(p->name));
        }
        return json_pack("{s:s, s:s, s:s, s:{s:s, s:o, s:o, s:b}, s:{s:s, s:b, s:b, s:b, s:b}}", "name", t->name,
                         "title", t->title, "description", t->description, "inputSchema", "type", "object",
                         "properties", props, "required", required, "additionalProperties", 0, "annotations",
                         "title", t->title, "readOnlyHint", !!(t->hints & MCP_HINT_READ_ONLY), "destructiveHint",
                         !!(t->hints & MCP_HINT_DESTRUCTIVE), "idempotentHint", !!(t->hints & MCP_HINT_IDEMPOTENT),
                         "openWorldHint", 0);
}

static bool all_strings(json_t *v, bool array)
{
        size_t i;
        const char *k;
        json_t *x;
        if (array) {
                json_array_foreach(v, i, x) if (!json_is_string(x)) return false;
        } else {
                json_object_foreach(v, k, x) if (!json_is_string(x)) return false;
        }
        return true;
}

static bool in_choices(const char *v, const char *const *choices)
{
        for (const char *const *c = choices; *c; c++)
                if (!strcmp(*c, v))
                        return true;
        return false;
}

/* NULL when v fits p, else what p wants ("a string", …). */
static const char *param_misfit(const struct mcp_param *p, json_t *v)
{
        switch (p->type) {
        case MCP_P_STRING:
                if (!json_is_string(v))
                        return "a string";
                if (p->choices && !in_choices(json_string_value(v), p->choices))
                        return "one of the listed values";
                return NULL;
        case MCP_P_INTEGER:
                /* 30.0 is an integer to a JSON Schema validator too. */
                if (json_is_real(v) && json_real_value(v) == (double)(long long)json_real_value(v))
                        v = NULL;
                else if (!json_is_integer(v))
                        return "a whole number";
                long long n = v ? json_integer_value(v) : 0;
                if ((p->min || p->max) && v && (n < p->min || n > p->max))
                        return "within its bounds";
                return NULL;
        case MCP_P_BOOLEAN:
                return json_is_boolean(v) ? NULL : "true or false";
        case MCP_P_ARGV:
                if (json_is_string(v))
                        return NULL;
                return json_is_array(v) && json_array_size(v) > 0 && all_strings(v, true)
                               ? NULL
                               : "a string or a non-empty array of strings";
        case MCP_P_STRING_MAP:
                return json_is_object(v) && all_strings(v, false) ? NULL : "an object of string values";
        default:
                return "nothing";
        }
}

static void choices_text(const struct mcp_param *p, char *out, size_t len)
{
        size_t o = 0;
        out[0] = '\0';
        for (const char *const *c = p->choices; c && *c && o < len; c++)
                o += (size_t)snprintf(out + o, len - o, "%s%s", c == p->choices ? "" : ", ", *c);
}

int mcp_args_check(const struct mcp_tool *t, json_t *args, char *msg, size_t len)
{
        const char *key;
        json_t *v;
        json_object_foreach(args, key, v) {
                const struct mcp_param *p = t->params;
                while (p && p->name && strcmp(p->name, key))
                        p++;
                if (!p || !p->name) {
                        snprintf(msg, len, "%s has no argument '%.100s'", t->name, key);
                        return -EINVAL;
                }
                const char *want = param_misfit(p, v);
                if (!want)
                        continue;
                char extra[200] = "";
                if (p->choices)
                        choices_text(p, extra, sizeof(extra));
                else if (p->min || p->max)
                        snprintf(extra, sizeof(extra), "%lld to %lld", p->min, p->max);
                snprintf(msg, len, "argument '%s' of %s must be %s%s%s%s", p->name, t->name, want,
                         extra[0] ? " (" : "", extra, extra[0] ? ")" : "");
                return -EINVAL;
        }
        for (const struct mcp_param *p = t->params; p && p->name; p++)
                if (p->required && !json_object_get(args, p->name)) {
                        snprintf(msg, len, "%s needs the argument '%s': %s", t->name, p->name, p->description);
                        return -EINVAL;
                }
        return 0;
}
