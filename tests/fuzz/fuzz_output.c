/* Fuzzes the encoding of arbitrary guest output into an ExecutionResult
 * (exec_result_json in src/api/workers/result_json.c) and the UTF-8 helpers in
 * src/base/util.c.
 *
 * Input layout: 4 control bytes, then a payload. If the payload contains
 * the separator "\xff\xfe\xfd" (invalid UTF-8, so it cannot occur inside a
 * JSON line), what follows the last one is the kernel's answer line (parsed
 * with json_loadb as parse_ctl_lines() does, kept only if it is an object);
 * what precedes it is split in two halves: guest stdout and stderr, stored
 * in struct bufs capped like read_guest_pipe() caps them.
 * Control bytes: [0] limit that ended the run and whether the kernel died,
 * [1..2] the wait status, [3] which runtime / code string.
 *
 * Invariants:
 *  - exec_result_json never fails; json_dumps of the result with the
 *    server's flags (HTTP_JSON_DUMP_FLAGS) succeeds and json_loads parses
 *    it back (the answer is always valid UTF-8 JSON), with "results",
 *    "error" and "logs" equal to what was serialised (no number rounded);
 *  - logs.stdout / logs.stderr are arrays of strings with no '\n'; their
 *    count is the number of lines; when the raw output was valid UTF-8,
 *    joining the entries with '\n' gives back the raw output (minus one
 *    trailing newline);
 *  - "results" is an array, "error" (if any) is present exactly when the
 *    run failed, usage fields are integers;
 *  - utf8_sanitize of the raw payload is valid UTF-8 (utf8_valid), at most
 *    3x the input, identical to the input when that was valid, and
 *    utf8_valid agrees with jansson's own UTF-8 check. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "engine/exec.h"
#include "api/workers/result_json.h"
#include "base/util.h"
#include "fuzz.h"
#include "http/server.h"
#include "runtimes/runtime.h"

#define OUTPUT_MAX (32 * KiB)
static const char SEP[] = "\xff\xfe\xfd";

static void check_utf8(const char *s, size_t len)
{
        char *out = malloc(3 * len + 1);
        CHECK(out);
        size_t n = utf8_sanitize(s, len, out);
        CHECK(n <= 3 * len);
        CHECK(out[n] == '\0');
        CHECK(utf8_valid(out, n));
        bool valid = utf8_valid(s, len);
        if (valid)
                CHECK(n == len && memcmp(out, s, len) == 0);
        /* jansson's validator must agree (it is what the JSON layer uses). */
        json_t *js = json_stringn(s, len);
        CHECK((js != NULL) == valid);
        json_decref(js);
        json_t *jo = json_stringn(out, n);
        CHECK(jo != NULL);
        json_decref(jo);
        free(out);
}

/* Splits raw like the contract says: one entry per '\n'-terminated line,
 * plus a final unterminated piece if non-empty. */
static void check_lines(json_t *arr, const struct buf *raw)
{
        CHECK(json_is_array(arr));
        size_t lines = 0;
        for (size_t i = 0; i < raw->len; i++)
                lines += raw->data[i] == '\n';
        if (raw->len && raw->data[raw->len - 1] != '\n')
                lines++;
        CHECK(json_array_size(arr) == lines);

        struct buf joined;
        buf_init(&joined, 4 * raw->len + 16);
        size_t i;
        json_t *v;
        json_array_foreach(arr, i, v) {
                CHECK(json_is_string(v));
                const char *s = json_string_value(v);
                size_t n = json_string_length(v);
                CHECK(memchr(s, '\n', n) == NULL);
                CHECK(utf8_valid(s, n));
                if (i)
                        CHECK(buf_append(&joined, "\n", 1) == 0);
                CHECK(buf_append(&joined, s, n) == 0);
        }
        if (utf8_valid(raw->data ? raw->data : "", raw->len)) {
                size_t want = raw->len;
                if (want && raw->data[want - 1] == '\n')
                        want--;
                CHECK(joined.len == want);
                CHECK(want == 0 || memcmp(joined.data, raw->data, want) == 0);
        }
        buf_free(&joined);
}

static const uint8_t *find_last(const uint8_t *hay, size_t n, const char *needle, size_t nlen)
{
        const uint8_t *last = NULL;
        for (size_t i = 0; i + nlen <= n; i++)
                if (memcmp(hay + i, needle, nlen) == 0)
                        last = hay + i;
        return last;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        check_utf8((const char *)data, size);
        if (size < 4)
                return 0;
        const uint8_t *ctl = data;
        const uint8_t *payload = data + 4;
        size_t plen = size - 4;

        struct exec_outcome o = { 0 };
        o.limit = (enum exec_limit)((ctl[0] & 0x7f) % _EXEC_LIMIT_MAX);
        o.died = ctl[0] & 0x80;
        o.exit_status = ctl[1] | (ctl[2] << 8);
        o.duration_ns = (uint64_t)ctl[1] * 1234567ULL;
        o.cpu_ns = (uint64_t)ctl[2] * 7654321ULL;
        o.memory_peak = (uint64_t)ctl[3] << 20;

        size_t out_len = plen;
        const uint8_t *sep = find_last(payload, plen, SEP, sizeof(SEP) - 1);
        if (sep) {
                out_len = (size_t)(sep - payload);
                const uint8_t *line = sep + sizeof(SEP) - 1;
                size_t line_len = plen - out_len - (sizeof(SEP) - 1);
                json_t *msg = json_loadb((const char *)line, line_len, 0, NULL);
                if (json_is_object(msg))
                        o.response = msg;
                else
                        json_decref(msg);
        }
        /* Capped like read_guest_pipe(): bytes past the cap are dropped. */
        size_t half = out_len / 2;
        buf_init(&o.out, OUTPUT_MAX);
        buf_init(&o.err, OUTPUT_MAX);
        CHECK(buf_append(&o.out, payload, half < OUTPUT_MAX ? half : OUTPUT_MAX) == 0);
        size_t elen = out_len - half;
        CHECK(buf_append(&o.err, payload + half, elen < OUTPUT_MAX ? elen : OUTPUT_MAX) == 0);

        static struct runtime rts[2] = {
                { .id = "python", .engine = "CPython 3.11.2" },
                { .id = "javascript", .engine = "Node.js 18.19.0" },
        };
        static const char *const codes[] = { "print(1)", "console.log('h\\u00e9');\n1+1", "x = \"\xe2\x82\xac\"\nx" };
        const struct runtime *rt = &rts[ctl[3] & 1];
        const char *code = codes[(ctl[3] >> 1) % 3];
        struct exec_limits lim = {
                .cpu_ms = 10000, .wall_ms = 30000, .memory_bytes = 256 * MiB, .pids = 64,
                .output_bytes = OUTPUT_MAX, .output_entries = 200, .result_bytes = 64 * KiB,
        };

        json_t *res = exec_result_json(rt, code, &o, &lim);
        CHECK(json_is_object(res));
        CHECK(!strcmp(json_string_value(json_object_get(res, "code")), code));
        CHECK(!strcmp(json_string_value(json_object_get(res, "language")), rt->id));
        json_t *logs = json_object_get(res, "logs");
        CHECK(json_is_object(logs));
        check_lines(json_object_get(logs, "stdout"), &o.out);
        check_lines(json_object_get(logs, "stderr"), &o.err);
        CHECK(json_is_array(json_object_get(res, "results")));
        json_t *error = json_object_get(res, "error");
        if (o.limit != EXEC_LIMIT_NONE && o.limit != EXEC_LIMIT_PIDS)
                CHECK(json_is_object(error));
        if (error)
                CHECK(json_array_size(json_object_get(res, "results")) == 0);
        json_t *usage = json_object_get(res, "usage");
        CHECK(json_is_integer(json_object_get(usage, "fuelConsumed")));
        CHECK(json_is_integer(json_object_get(usage, "memoryBytes")));

        /* Serialised exactly as the HTTP layer does, then parsed back. */
        char *text = json_dumps(res, HTTP_JSON_DUMP_FLAGS);
        CHECK(text);
        CHECK(utf8_valid(text, strlen(text)));
        json_error_t jerr;
        /* NUL in guest output is kept and escaped as \u0000 (valid JSON; jansson
         * only parses it back with JSON_ALLOW_NUL). */
        json_t *back = json_loads(text, JSON_ALLOW_NUL, &jerr);
        if (!back)
                fprintf(stderr, "re-parse failed: %s at %d\n", jerr.text, jerr.position);
        CHECK(back != NULL);
        /* What the guest returned reaches the client unchanged (numbers
         * included: no rounding, no finite value turned into infinity). */
        CHECK(json_equal(json_object_get(back, "results"), json_object_get(res, "results")));
        CHECK(json_equal(json_object_get(back, "error"), json_object_get(res, "error")) ||
              (!json_object_get(back, "error") && !json_object_get(res, "error")));
        CHECK(json_equal(json_object_get(back, "logs"), logs));
        json_t *bl = json_object_get(json_object_get(back, "logs"), "stdout");
        CHECK(json_is_array(bl));
        size_t i;
        json_t *v;
        json_array_foreach(bl, i, v)
                CHECK(json_is_string(v) && !memchr(json_string_value(v), '\n', json_string_length(v)));
        json_decref(back);
        free(text);
        json_decref(res);
        exec_outcome_done(&o);
        return 0;
}
