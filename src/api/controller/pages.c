/* Offset pagination of every controller list (seed 003, "Pagination"). */
#include <stdlib.h>
#include <string.h>

#include "api/controller/controller.h"

/* A decimal number without sign, blanks or trailing bytes. */
static bool parse_u64(const char *s, uint64_t *ret)
{
        if (!s[0] || strspn(s, "0123456789") != strlen(s) || strlen(s) > 18)
                return false;
        *ret = strtoull(s, NULL, 10);
        return true;
}

bool ctl_page_parse(struct http_request *req, struct http_response *res, struct ctl_page *ret)
{
        const char *l = http_query(req, "limit"), *o = http_query(req, "offset");
        struct ctl_page p = { .limit = CTL_PAGE_DEFAULT, .offset = 0 };
        if (l && (!parse_u64(l, &p.limit) || p.limit == 0)) {
                ctl_error(res, 400, "VALIDATION_ERROR", "limit must be an integer from 1 to 1000");
                return false;
        }
        if (o && !parse_u64(o, &p.offset)) {
                ctl_error(res, 400, "VALIDATION_ERROR", "offset must be a non-negative integer");
                return false;
        }
        if (p.limit > CTL_PAGE_MAX)
                p.limit = CTL_PAGE_MAX;
        *ret = p;
        return true;
}

json_t *ctl_page_body(json_t *data, uint64_t total, const struct ctl_page *p)
{
        bool more = p->offset < total && total - p->offset > (uint64_t)json_array_size(data);
        return json_pack("{s:o, s:I, s:I, s:I, s:b}", "data", data, "total", (json_int_t)total, "limit",
                         (json_int_t)p->limit, "offset", (json_int_t)p->offset, "has_more", more);
}

void ctl_page_reply(struct http_request *req, struct http_response *res, ctl_page_fill fill)
{
        struct ctl_page p;
        struct err err = {};
        uint64_t total = 0;
        if (!ctl_page_parse(req, res, &p))
                return;
        json_t *data = json_array();
        if (fill(req, &p, data, &total, &err) < 0) {
                json_decref(data);
                ctl_error_done(res, &err, ERR_OK, 0, NULL);
                return;
        }
        http_json(res, 200, ctl_page_body(data, total, &p));
}
