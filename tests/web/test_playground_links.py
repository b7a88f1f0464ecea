"""The playground names the three APIs this server speaks and links each
one's OpenAPI viewer, served by the same daemon (issue 14: "with links to
the OpenAPI pages"); every link answers, and so does its document."""
import re


def test_the_page_links_the_three_openapi_viewers(server):
    status, body, _ = server.request("GET", "/")
    assert status == 200
    html = body.decode() if isinstance(body, bytes) else body
    for name in ("sandbox-workers", "Cloudflare", "StateSet"):
        assert name in html, name
    links = set(re.findall(r'href="(/[^"]*openapi[^"]*)"', html))
    assert links == {"/openapi.html", "/v1/openapi.html", "/api/v1/openapi.html"}, links
    for link in links:
        s, page, h = server.request("GET", link)
        assert s == 200 and h["content-type"].startswith("text/html"), link
        s, doc, _ = server.request("GET", link.replace(".html", ".json"))
        assert s == 200 and doc["openapi"] == "3.1.0", link
