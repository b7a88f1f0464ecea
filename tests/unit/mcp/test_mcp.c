/* The MCP server's pure parts: version negotiation, JSON-RPC dispatch
 * without a server (lifecycle, errors), the tools' schemas and argument
 * checks, resource URIs. Tool calls against a server are tests/mcp/. */
#include <errno.h>
#include <string.h>

#include "mcp/internal.h"
#include "mcp/mcp.h"
#include "tap.h"

TEST(protocol_negotiation)
{
        ASSERT_STREQ(mcp_protocol_negotiate("2024-11-05"), "2024-11-05");
        ASSERT_STREQ(mcp_protocol_negotiate("2025-06-18"), "2025-06-18");
        ASSERT_STREQ(mcp_protocol_negotiate(MCP_PROTOCOL_LATEST), MCP_PROTOCOL_LATEST);
        ASSERT_STREQ(mcp_protocol_negotiate("2099-01-01"), MCP_PROTOCOL_LATEST);
        ASSERT_STREQ(mcp_protocol_negotiate(NULL), MCP_PROTOCOL_LATEST);
        ASSERT_TRUE(mcp_protocol_supported("2025-03-26"));
        ASSERT_FALSE(mcp_protocol_supported("2025-03-2"));
        ASSERT_FALSE(mcp_protocol_supported(NULL));
}

/* One message through a fresh or given session; the response (owned). */
static json_t *handle(struct mcp_session *s, const char *text)
{
        json_t *msg = json_loads(text, 0, NULL);
        ASSERT_NOT_NULL(msg);
        json_t *r = mcp_session_handle(s, NULL, msg, NULL);
        json_decref(msg);
        return r;
}

static long long error_code(json_t *r)
{
        return json_integer_value(json_object_get(json_object_get(r, "error"), "code"));
}

TEST(session_lifecycle)
{
        struct mcp_session *s;
        ASSERT_OK(mcp_session_new(&s));
        ASSERT_TRUE(mcp_session_protocol(s) == NULL);
        json_t *r = handle(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
        ASSERT_EQ(error_code(r), MCP_INVALID_REQUEST);
        json_decref(r);
        r = handle(s, "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"ping\"}");
        ASSERT_STREQ(json_string_value(json_object_get(r, "id")), "a");
        ASSERT_EQ(json_object_size(json_object_get(r, "result")), 0);
        json_decref(r);
        r = handle(s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
                      "\"2024-11-05\"}}");
        ASSERT_STREQ(json_string_value(json_object_get(json_object_get(r, "result"), "protocolVersion")),
                     "2024-11-05");
        json_decref(r);
        ASSERT_STREQ(mcp_session_protocol(s), "2024-11-05");
        ASSERT_TRUE(handle(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}") == NULL);
        r = handle(s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}");
        ASSERT_EQ(json_array_size(json_object_get(json_object_get(r, "result"), "tools")), 12);
        json_decref(r);
        r = handle(s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"nope\"}");
        ASSERT_EQ(error_code(r), MCP_METHOD_NOT_FOUND);
        json_decref(r);
        mcp_session_free(s);
}

TEST(session_bad_messages)
{
        struct mcp_session *s;
        ASSERT_OK(mcp_session_new(&s));
        json_t *r = handle(s, "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}");
        ASSERT_EQ(error_code(r), MCP_INVALID_REQUEST);
        ASSERT_TRUE(json_is_null(json_object_get(r, "id")));
        json_decref(r);
        r = handle(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":[]}");
        ASSERT_EQ(error_code(r), MCP_INVALID_PARAMS);
        json_decref(r);
        r = handle(s, "{\"id\":1,\"method\":\"ping\"}");
        ASSERT_EQ(error_code(r), MCP_INVALID_REQUEST);
        json_decref(r);
        /* a response or a notification without jsonrpc: nothing to answer */
        ASSERT_TRUE(handle(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}") == NULL);
        ASSERT_TRUE(handle(s, "{\"method\":\"notifications/initialized\"}") == NULL);
        r = handle(s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{}}");
        ASSERT_EQ(error_code(r), MCP_INVALID_PARAMS);
        json_decref(r);
        mcp_session_free(s);
}

static int check(const char *tool, const char *args, char *msg, size_t len)
{
        json_t *a = json_loads(args, 0, NULL);
        ASSERT_NOT_NULL(a);
        int r = mcp_args_check(mcp_tool_find(tool), a, msg, len);
        json_decref(a);
        return r;
}

TEST(args_check)
{
        char msg[400];
        ASSERT_OK(check("run_code", "{\"language\":\"python\",\"code\":\"1\"}", msg, sizeof(msg)));
        ASSERT_ERR(check("run_code", "{\"language\":\"python\"}", msg, sizeof(msg)), EINVAL);
        ASSERT_TRUE(strstr(msg, "needs the argument 'code'") != NULL);
        ASSERT_ERR(check("run_code", "{\"language\":1,\"code\":\"1\"}", msg, sizeof(msg)), EINVAL);
        ASSERT_STREQ(msg, "argument 'language' of run_code must be a string");
        ASSERT_ERR(check("run_code", "{\"language\":\"python\",\"code\":\"1\",\"cwd\":\"/\"}", msg, sizeof(msg)),
                   EINVAL);
        ASSERT_STREQ(msg, "run_code has no argument 'cwd'");
        ASSERT_OK(check("run_command", "{\"sandbox\":\"a\",\"command\":[\"ls\",\"-l\"],\"timeout\":5}", msg,
                        sizeof(msg)));
        ASSERT_OK(check("run_command", "{\"sandbox\":\"a\",\"command\":\"ls\",\"timeout\":5.0}", msg, sizeof(msg)));
        ASSERT_ERR(check("run_command", "{\"sandbox\":\"a\",\"command\":[]}", msg, sizeof(msg)), EINVAL);
        ASSERT_ERR(check("run_command", "{\"sandbox\":\"a\",\"command\":[1]}", msg, sizeof(msg)), EINVAL);
        ASSERT_ERR(check("run_command", "{\"sandbox\":\"a\",\"command\":\"ls\",\"timeout\":0}", msg, sizeof(msg)),
                   EINVAL);
        ASSERT_TRUE(strstr(msg, "1 to 3600") != NULL);
        ASSERT_ERR(check("run_command", "{\"sandbox\":\"a\",\"command\":\"ls\",\"timeout\":2.5}", msg, sizeof(msg)),
                   EINVAL);
        ASSERT_ERR(check("run_command", "{\"sandbox\":\"a\",\"command\":\"ls\",\"env\":{\"A\":1}}", msg,
                         sizeof(msg)), EINVAL);
        ASSERT_ERR(check("read_file", "{\"sandbox\":\"a\",\"path\":\"x\",\"encoding\":\"latin1\"}", msg, sizeof(msg)),
                   EINVAL);
        ASSERT_TRUE(strstr(msg, "(utf-8, base64)") != NULL);
        ASSERT_OK(check("list_files", "{\"sandbox\":\"a\",\"recursive\":true}", msg, sizeof(msg)));
        ASSERT_ERR(check("list_files", "{\"sandbox\":\"a\",\"recursive\":\"yes\"}", msg, sizeof(msg)), EINVAL);
}

TEST(tool_schemas)
{
        size_t n;
        const struct mcp_tool *t = mcp_tools(&n);
        for (size_t i = 0; i < n; i++) {
                json_t *j = mcp_tool_json(&t[i]);
                ASSERT_NOT_NULL(j);
                json_t *schema = json_object_get(j, "inputSchema");
                ASSERT_STREQ(json_string_value(json_object_get(schema, "type")), "object");
                /* every required name is a property */
                size_t k;
                json_t *req;
                json_array_foreach(json_object_get(schema, "required"), k, req)
                        ASSERT_NOT_NULL(json_object_get(json_object_get(schema, "properties"),
                                                        json_string_value(req)));
                json_decref(j);
        }
        ASSERT_TRUE(mcp_tool_find("nope") == NULL);
        ASSERT_TRUE(mcp_tool_find(NULL) == NULL);
}

TEST(resource_uris)
{
        char id[64], path[256];
        ASSERT_OK(mcp_uri_parse("sandbox://abc/dir/a%20b.txt", id, sizeof(id), path, sizeof(path)));
        ASSERT_STREQ(id, "abc");
        ASSERT_STREQ(path, "dir/a b.txt");
        ASSERT_EQ(mcp_uri_parse("file:///etc/passwd", id, sizeof(id), path, sizeof(path)), -1);
        ASSERT_EQ(mcp_uri_parse("sandbox://abc", id, sizeof(id), path, sizeof(path)), -1);
        ASSERT_EQ(mcp_uri_parse("sandbox://abc/", id, sizeof(id), path, sizeof(path)), -1);
        ASSERT_EQ(mcp_uri_parse("sandbox:///x", id, sizeof(id), path, sizeof(path)), -1);
        ASSERT_EQ(mcp_uri_parse("sandbox://abc/a%00b", id, sizeof(id), path, sizeof(path)), -1);
        ASSERT_EQ(mcp_uri_parse("sandbox://abc/a%zz", id, sizeof(id), path, sizeof(path)), -1);
}

static json_t *handle_any(struct mcp_session *s, const char *text)
{
        json_t *msg = json_loads(text, JSON_DECODE_ANY, NULL);
        ASSERT_NOT_NULL(msg);
        json_t *r = mcp_session_handle_any(s, NULL, msg, NULL);
        json_decref(msg);
        return r;
}

TEST(batches)
{
        struct mcp_session *s;
        ASSERT_OK(mcp_session_new(&s));
        json_t *r = handle_any(s, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},"
                                  "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"},"
                                  "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}]");
        ASSERT_EQ(json_array_size(r), 2);
        ASSERT_EQ(json_object_size(json_object_get(json_array_get(r, 0), "result")), 0);
        ASSERT_EQ(error_code(json_array_get(r, 1)), MCP_INVALID_REQUEST);   /* not initialized */
        json_decref(r);
        ASSERT_TRUE(handle_any(s, "[{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}]") == NULL);
        r = handle_any(s, "[]");
        ASSERT_EQ(error_code(r), MCP_INVALID_REQUEST);
        json_decref(r);
        r = handle_any(s, "5");
        ASSERT_EQ(error_code(r), MCP_INVALID_REQUEST);
        json_decref(r);
        mcp_session_free(s);
}
