"""Controller artifacts (issue 15, item 4): a sandbox's file kept as an
artifact and read back byte-exact (list, get, download with ETag = SHA-256,
Range), multipart uploads (parts out of order, wrong etag, missing part,
part too small, abort, replays), expiry (404 at once, swept from disk),
download into another sandbox of the same org (read back with execute),
org isolation on every route, the size limit and the org quota, and the
bytes on disk under <data_dir>/artifacts/<org>/ (0600, no temp leftovers)."""
import base64
import hashlib
import http.client
import os
import socket
import subprocess
import sys
import time

import pytest

from controller_common import CTL_SETS, V1, Daemon, account, api, apikey, execute, get_bytes, raw

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from s3rver_common import KEY, S3, free_port, s3fs_missing  # noqa: E402

PART_MIN = 64 * 1024
PART_MAX = 256 * 1024
MAX_BYTES = 600 * 1024   # below the sandbox's own largest file (1 MiB here)
QUOTA = 1000 * 1024

SETS = CTL_SETS + [
    f"controller.artifact_part_min_bytes={PART_MIN}",
    f"controller.artifact_part_max_bytes={PART_MAX}",
    f"controller.artifact_max_bytes={MAX_BYTES}",
    f"controller.artifact_org_quota_bytes={QUOTA}",
    "controller.artifact_max_parts=100",
]


@pytest.fixture(scope="module")
def ctl():
    d = Daemon(sets=SETS)
    yield d
    d.cleanup()


def org(d):
    acc = account(d)
    return apikey(acc["api_key"]["key"]), acc["organization"]["id"]


def new_sandbox(d, creds):
    status, sb, _ = raw(d, "POST", V1 + "/sandbox/create", {}, headers=creds)
    assert status == 201, sb
    return sb["sandbox_id"]


def put_file(d, creds, sid, path, data):
    status, res, _ = raw(d, "POST", V1 + f"/sandbox/{sid}/files",
                         {"files": [{"path": path, "content": base64.b64encode(data).decode()}]}, headers=creds)
    assert status == 200, res


def upload(d, creds, sid, body):
    return raw(d, "POST", V1 + f"/sandbox/{sid}/artifacts/upload", body, headers=creds)[:2]


def call(d, method, path, creds, body=None, data=None, headers=None):
    h = dict(creds)
    h.update(headers or {})
    status, res, hdrs = d.request(method, V1 + path, body=body, raw=data, headers=h)
    return status, res, hdrs


def download(d, creds, aid, headers=None):
    h = dict(creds)
    h.update(headers or {})
    return get_bytes(d, V1 + f"/artifacts/{aid}/download", h)


def sha(data):
    return hashlib.sha256(data).hexdigest()


def multipart(d, creds, name, parts, order=None, **opts):
    """initiate, PUT the parts (in `order` of indexes), → (upload_id, etags)."""
    status, up, _ = call(d, "POST", "/artifacts/uploads/initiate", creds, body=dict({"name": name}, **opts))
    assert status == 201, up
    uid = up["upload_id"]
    etags = {}
    for i in order or range(len(parts)):
        status, res, hdrs = call(d, "PUT", f"/artifacts/uploads/{uid}/parts/{i + 1}", creds, data=parts[i],
                                 headers={"Content-Type": "application/octet-stream"})
        assert status == 200, res
        assert res["etag"] == sha(parts[i]) and hdrs["etag"] == f'"{sha(parts[i])}"'
        assert res["size"] == len(parts[i])
        etags[i + 1] = res["etag"]
    return uid, etags


def complete(d, creds, uid, listing):
    return call(d, "POST", f"/artifacts/uploads/{uid}/complete", creds, body={"parts": listing})[:2]


def blob_dir(d, org_id):
    return os.path.join(d.data_dir, "artifacts", org_id)


def test_upload_from_sandbox_then_list_get_download(ctl):
    creds, org_id = org(ctl)
    sid = new_sandbox(ctl, creds)
    data = os.urandom(200_000) + bytes(range(256))
    put_file(ctl, creds, sid, "out/report.bin", data)
    status, art = upload(ctl, creds, sid, {"path": "/workspace/out/report.bin", "content_type": "application/x-report",
                                           "metadata": {"run": 7, "tag": "nightly"}})
    assert status == 201, art
    assert art["id"].startswith("art_") and art["name"] == "report.bin"
    assert art["path"] == "/workspace/out/report.bin" and art["sandbox_id"] == sid
    assert art["size"] == len(data) and art["checksum"] == sha(data) and art["checksum_algorithm"] == "sha256"
    assert art["content_type"] == "application/x-report" and art["metadata"] == {"run": 7, "tag": "nightly"}
    assert art["expires_at"] is None and art["created_at"].endswith("Z")

    status, got, _ = call(ctl, "GET", f"/artifacts/{art['id']}", creds)
    assert status == 200 and got == art
    status, page, _ = call(ctl, "GET", "/artifacts", creds)
    assert status == 200 and page["total"] == 1 and page["data"] == [art] and page["has_more"] is False

    status, hdrs, body = download(ctl, creds, art["id"])
    assert status == 200 and body == data
    assert hdrs["content-type"] == "application/x-report" and int(hdrs["content-length"]) == len(data)
    assert hdrs["etag"] == f'"{sha(data)}"' and hdrs["x-checksum-sha256"] == sha(data)
    assert hdrs["content-disposition"] == 'attachment; filename="report.bin"'

    # The bytes on disk: 0600 under the org's directory, no temp file left.
    path = os.path.join(blob_dir(ctl, org_id), art["id"])
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert sorted(os.listdir(blob_dir(ctl, org_id))) == [art["id"]]


def test_default_name_type_and_ranges(ctl):
    creds, _ = org(ctl)
    sid = new_sandbox(ctl, creds)
    data = b"0123456789" * 100
    put_file(ctl, creds, sid, "notes.txt", data)
    status, art = upload(ctl, creds, sid, {"path": "notes.txt"})
    assert status == 201, art
    assert art["name"] == "notes.txt" and art["content_type"].startswith("text/plain")
    status, hdrs, body = download(ctl, creds, art["id"], {"Range": "bytes=10-19"})
    assert status == 206 and body == data[10:20] and hdrs["content-range"] == f"bytes 10-19/{len(data)}"
    status, hdrs, body = download(ctl, creds, art["id"], {"Range": "bytes=-5"})
    assert status == 206 and body == data[-5:]
    status, hdrs, body = download(ctl, creds, art["id"], {"Range": "bytes=990-"})
    assert status == 206 and body == data[990:]
    status, hdrs, _ = download(ctl, creds, art["id"], {"Range": f"bytes={len(data)}-"})
    assert status == 416 and hdrs["content-range"] == f"bytes */{len(data)}"
    conn = http.client.HTTPConnection("127.0.0.1", ctl.port, timeout=30)
    conn.request("HEAD", V1 + f"/artifacts/{art['id']}/download", headers=creds)
    resp = conn.getresponse()
    assert resp.status == 200 and resp.read() == b""
    assert int(resp.getheader("content-length")) == len(data) and resp.getheader("etag") == f'"{sha(data)}"'
    conn.close()
    # Conditional: the ETag the client holds → 304, no body; another → the bytes.
    status, hdrs, body = download(ctl, creds, art["id"], {"If-None-Match": f'"x", "{sha(data)}"'})
    assert status == 304 and body == b"" and hdrs["etag"] == f'"{sha(data)}"'
    status, hdrs, body = download(ctl, creds, art["id"], {"If-None-Match": f'"{sha(b"other")}"'})
    assert status == 200 and body == data


def test_upload_validation(ctl):
    creds, _ = org(ctl)
    sid = new_sandbox(ctl, creds)
    put_file(ctl, creds, sid, "a.txt", b"a")
    for body in ({}, {"path": "../etc/passwd"}, {"path": "/etc/passwd"}, {"path": "a.txt", "ttl_seconds": 0},
                 {"path": "a.txt", "ttl_seconds": "1"}, {"path": "a.txt", "metadata": [1]},
                 {"path": "a.txt", "content_type": "nonsense"}, {"path": "a.txt", "name": "x\ny"}):
        status, res = upload(ctl, creds, sid, body)
        assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR", (body, res)
    status, res = upload(ctl, creds, sid, {"path": "missing.txt"})
    assert status == 404, res
    status, res = upload(ctl, creds, "sbx-does-not-exist", {"path": "a.txt"})
    assert status == 404, res


def test_list_filters_and_pages(ctl):
    creds, _ = org(ctl)
    s1, s2 = new_sandbox(ctl, creds), new_sandbox(ctl, creds)
    put_file(ctl, creds, s1, "f", b"1")
    put_file(ctl, creds, s2, "f", b"2")
    ids = {}
    for sid, name in ((s1, "logs/a.txt"), (s1, "logs/b.txt"), (s2, "build/out.tar")):
        status, art = upload(ctl, creds, sid, {"path": "f", "name": name})
        assert status == 201, art
        ids[name] = art["id"]
    status, page, _ = call(ctl, "GET", "/artifacts?prefix=logs/", creds)
    assert status == 200 and page["total"] == 2
    assert {a["name"] for a in page["data"]} == {"logs/a.txt", "logs/b.txt"}
    status, page, _ = call(ctl, "GET", f"/artifacts?sandbox_id={s2}", creds)
    assert [a["id"] for a in page["data"]] == [ids["build/out.tar"]]
    status, page, _ = call(ctl, "GET", "/artifacts?limit=2&offset=0", creds)
    assert page["total"] == 3 and len(page["data"]) == 2 and page["has_more"] is True
    status, page2, _ = call(ctl, "GET", "/artifacts?limit=2&offset=2", creds)
    assert len(page2["data"]) == 1 and page2["has_more"] is False
    assert {a["id"] for a in page["data"] + page2["data"]} == set(ids.values())


def test_multipart_out_of_order(ctl):
    creds, org_id = org(ctl)
    parts = [os.urandom(PART_MIN), os.urandom(PART_MIN + 17), os.urandom(1000)]
    uid, etags = multipart(ctl, creds, "data/blob.bin", parts, order=[2, 0, 1],
                           content_type="application/x-blob", ttl_seconds=3600, metadata={"k": "v"})
    # The listing may come in any order; quoted, upper-case etags are fine.
    listing = [{"part_number": 3, "etag": etags[3]}, {"part_number": 1, "etag": f'"{etags[1].upper()}"'},
               {"part_number": 2, "etag": etags[2]}]
    status, art = complete(ctl, creds, uid, listing)
    assert status == 201, art
    whole = b"".join(parts)
    assert art["size"] == len(whole) and art["checksum"] == sha(whole)
    assert art["name"] == "data/blob.bin" and art["content_type"] == "application/x-blob"
    assert art["metadata"] == {"k": "v"} and art["expires_at"] is not None and art["path"] is None
    status, hdrs, body = download(ctl, creds, art["id"])
    assert status == 200 and body == whole and hdrs["etag"] == f'"{sha(whole)}"'
    # The upload is gone once completed; its parts too.
    status, res, _ = call(ctl, "PUT", f"/artifacts/uploads/{uid}/parts/1", creds, data=b"x")
    assert status == 404, res
    assert not os.path.exists(os.path.join(blob_dir(ctl, org_id), "uploads", uid))


def test_multipart_wrong_etag_missing_part_then_fixed(ctl):
    creds, _ = org(ctl)
    parts = [os.urandom(PART_MIN), os.urandom(10)]
    uid, etags = multipart(ctl, creds, "x.bin", parts)
    bad = [{"part_number": 1, "etag": "0" * 64}, {"part_number": 2, "etag": etags[2]}]
    status, res = complete(ctl, creds, uid, bad)
    assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR" and "etag" in res["error"]["message"]
    missing = [{"part_number": 1, "etag": etags[1]}, {"part_number": 3, "etag": etags[2]}]
    status, res = complete(ctl, creds, uid, missing)
    assert status == 400 and "Part 3" in res["error"]["message"], res
    for listing in ([], [{"part_number": 1}], [{"part_number": 0, "etag": etags[1]}],
                    [{"part_number": 1, "etag": etags[1]}, {"part_number": 1, "etag": etags[1]}]):
        status, res = complete(ctl, creds, uid, listing)
        assert status == 400, (listing, res)
    # A part too small that is not the last one.
    small = [{"part_number": 2, "etag": etags[2]}, {"part_number": 1, "etag": etags[1]}]
    status, res = complete(ctl, creds, uid, [small[0]] + [{"part_number": 3, "etag": etags[2]}])
    assert status == 400
    # The upload stayed open: the right listing completes it.
    status, art = complete(ctl, creds, uid, [{"part_number": 1, "etag": etags[1]},
                                             {"part_number": 2, "etag": etags[2]}])
    assert status == 201 and art["checksum"] == sha(b"".join(parts)), art


def test_multipart_part_number_and_size_limits(ctl):
    creds, _ = org(ctl)
    status, up, _ = call(ctl, "POST", "/artifacts/uploads/initiate", creds, body={"name": "n"})
    assert status == 201 and up["part_size_max"] == PART_MAX and up["max_parts"] == 100
    uid = up["upload_id"]
    for n in ("0", "101", "abc", "-1"):
        status, res, _ = call(ctl, "PUT", f"/artifacts/uploads/{uid}/parts/{n}", creds, data=b"x")
        assert status == 400, (n, res)
    # Over the part cap: refused from its Content-Length, before the body.
    with socket.create_connection(("127.0.0.1", ctl.port), timeout=10) as s:
        auth = creds["Authorization"]
        s.sendall(f"PUT {V1}/artifacts/uploads/{uid}/parts/1 HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n"
                  f"Content-Length: {PART_MAX + 1}\r\n\r\n".encode())
        head = s.recv(4096).decode(errors="replace")
    assert head.startswith("HTTP/1.1 413"), head
    status, res, _ = call(ctl, "POST", "/artifacts/uploads/initiate", creds, body={})
    assert status == 400, res


def test_multipart_replace_part_and_abort(ctl):
    creds, org_id = org(ctl)
    uid, etags = multipart(ctl, creds, "y.bin", [b"first"])
    status, res, _ = call(ctl, "PUT", f"/artifacts/uploads/{uid}/parts/1", creds, data=b"second")
    assert status == 200 and res["etag"] == sha(b"second")
    status, res = complete(ctl, creds, uid, [{"part_number": 1, "etag": etags[1]}])
    assert status == 400  # the old etag no longer matches
    assert os.path.isdir(os.path.join(blob_dir(ctl, org_id), "uploads", uid))
    status, res, _ = call(ctl, "POST", f"/artifacts/uploads/{uid}/abort", creds)
    assert status == 200 and res == {"upload_id": uid, "status": "aborted"}
    assert not os.path.exists(os.path.join(blob_dir(ctl, org_id), "uploads", uid))
    status, res = complete(ctl, creds, uid, [{"part_number": 1, "etag": sha(b"second")}])
    assert status == 404, res
    status, res, _ = call(ctl, "POST", f"/artifacts/uploads/{uid}/abort", creds)
    assert status == 404, res


def test_upload_listing_checksums_and_delete_alias(ctl):
    creds, _ = org(ctl)
    parts = [os.urandom(PART_MIN), b"tail"]
    uid, etags = multipart(ctl, creds, "listed.bin", parts, order=[1, 0], metadata={"a": 1})
    status, page, _ = call(ctl, "GET", "/artifacts/uploads", creds)
    assert status == 200 and [u["upload_id"] for u in page["data"]] == [uid], page
    status, up, _ = call(ctl, "GET", f"/artifacts/uploads/{uid}", creds)
    assert status == 200, up
    assert up["name"] == "listed.bin" and up["metadata"] == {"a": 1} and up["size"] == PART_MIN + 4
    assert up["parts"] == [{"part_number": 1, "size": PART_MIN, "etag": etags[1]},
                           {"part_number": 2, "size": 4, "etag": etags[2]}]
    # X-Checksum-Sha256 on a part: a mismatch keeps nothing.
    status, res, _ = call(ctl, "PUT", f"/artifacts/uploads/{uid}/parts/3", creds, data=b"xyz",
                          headers={"X-Checksum-Sha256": sha(b"other")})
    assert status == 400 and res["error"]["code"] == "CHECKSUM_MISMATCH", res
    status, res, _ = call(ctl, "PUT", f"/artifacts/uploads/{uid}/parts/3", creds, data=b"xyz",
                          headers={"X-Checksum-Sha256": sha(b"xyz").upper()})
    assert status == 200, res
    # complete's checksum of the whole: a wrong one refuses and keeps the upload open.
    listing = [{"part_number": n, "etag": etags[n]} for n in (1, 2)]
    status, res, _ = call(ctl, "POST", f"/artifacts/uploads/{uid}/complete", creds,
                          body={"parts": listing, "checksum": sha(b"nope")})
    assert status == 400 and res["error"]["code"] == "CHECKSUM_MISMATCH", res
    status, page, _ = call(ctl, "GET", "/artifacts", creds)
    assert page["total"] == 0
    status, art, _ = call(ctl, "POST", f"/artifacts/uploads/{uid}/complete", creds,
                          body={"parts": listing, "checksum": f'"{sha(b"".join(parts))}"'})
    assert status == 201 and art["size"] == PART_MIN + 4, art  # part 3, not listed, is dropped
    status, page, _ = call(ctl, "GET", "/artifacts/uploads", creds)
    assert page["total"] == 0
    # DELETE is abort.
    uid2, _ = multipart(ctl, creds, "gone.bin", [b"x"])
    status, res, _ = call(ctl, "DELETE", f"/artifacts/uploads/{uid2}", creds)
    assert status == 200 and res["status"] == "aborted"
    status, res, _ = call(ctl, "GET", f"/artifacts/uploads/{uid2}", creds)
    assert status == 404


def test_expiry(ctl):
    creds, org_id = org(ctl)
    sid = new_sandbox(ctl, creds)
    put_file(ctl, creds, sid, "t.txt", b"short-lived")
    status, art = upload(ctl, creds, sid, {"path": "t.txt", "ttl_seconds": 1})
    assert status == 201 and art["expires_at"] is not None, art
    status, keep = upload(ctl, creds, sid, {"path": "t.txt", "name": "kept"})
    assert status == 201
    assert os.path.exists(os.path.join(blob_dir(ctl, org_id), art["id"]))
    time.sleep(2.2)
    for method, path in (("GET", f"/artifacts/{art['id']}"), ("GET", f"/artifacts/{art['id']}/download"),
                         ("DELETE", f"/artifacts/{art['id']}")):
        status, res, _ = call(ctl, method, path, creds)
        assert status == 404 and res["error"]["code"] == "NOT_FOUND", (method, path, res)
    status, page, _ = call(ctl, "GET", "/artifacts", creds)
    assert [a["id"] for a in page["data"]] == [keep["id"]]
    # Swept: the bytes are gone from disk.
    assert not os.path.exists(os.path.join(blob_dir(ctl, org_id), art["id"]))
    assert os.path.exists(os.path.join(blob_dir(ctl, org_id), keep["id"]))


def test_delete(ctl):
    creds, org_id = org(ctl)
    sid = new_sandbox(ctl, creds)
    put_file(ctl, creds, sid, "d.txt", b"bye")
    status, art = upload(ctl, creds, sid, {"path": "d.txt"})
    status, res, _ = call(ctl, "DELETE", f"/artifacts/{art['id']}", creds)
    assert status == 200 and res == {"id": art["id"], "deleted": True}
    assert not os.path.exists(os.path.join(blob_dir(ctl, org_id), art["id"]))
    status, res, _ = call(ctl, "GET", f"/artifacts/{art['id']}", creds)
    assert status == 404


def test_download_into_another_sandbox(ctl):
    creds, _ = org(ctl)
    src, dst = new_sandbox(ctl, creds), new_sandbox(ctl, creds)
    data = os.urandom(150_000)
    put_file(ctl, creds, src, "model.bin", data)
    status, art = upload(ctl, creds, src, {"path": "model.bin"})
    assert status == 201, art
    status, res, _ = call(ctl, "POST", f"/artifacts/{art['id']}/download-to-sandbox", creds,
                          body={"sandbox_id": dst, "path": "/workspace/in/model.bin"})
    assert status == 200, res
    assert res == {"artifact_id": art["id"], "sandbox_id": dst, "path": "/workspace/in/model.bin",
                   "size": len(data), "checksum": sha(data)}
    out = execute(ctl, creds, dst, ["sha256sum", "/workspace/in/model.bin"])
    assert out["stdout"].split()[0] == sha(data), out
    # The default path is the artifact's name in /workspace.
    status, res, _ = call(ctl, "POST", f"/artifacts/{art['id']}/download-to-sandbox", creds,
                          body={"sandbox_id": dst})
    assert status == 200 and res["path"] == "/workspace/model.bin"
    for body in ({}, {"sandbox_id": dst, "path": "../../etc/x"}):
        status, res, _ = call(ctl, "POST", f"/artifacts/{art['id']}/download-to-sandbox", creds, body=body)
        assert status == 400, (body, res)
    status, res, _ = call(ctl, "POST", f"/artifacts/{art['id']}/download-to-sandbox", creds,
                          body={"sandbox_id": "sbx-nope"})
    assert status == 404, res
    # A symlink planted by guest code is not followed.
    execute(ctl, creds, dst, ["ln", "-s", "/etc", "/workspace/link"])
    status, res, _ = call(ctl, "POST", f"/artifacts/{art['id']}/download-to-sandbox", creds,
                          body={"sandbox_id": dst, "path": "link/evil"})
    assert status == 403, res


def test_org_isolation(ctl):
    a, a_org = org(ctl)
    b, _ = org(ctl)
    sa, sb = new_sandbox(ctl, a), new_sandbox(ctl, b)
    put_file(ctl, a, sa, "secret.txt", b"org A only")
    status, art = upload(ctl, a, sa, {"path": "secret.txt"})
    assert status == 201
    uid, etags = multipart(ctl, a, "up.bin", [b"part"])
    aid = art["id"]
    for method, path, body in (("GET", f"/artifacts/{aid}", None), ("GET", f"/artifacts/{aid}/download", None),
                               ("DELETE", f"/artifacts/{aid}", None),
                               ("POST", f"/artifacts/{aid}/download-to-sandbox", {"sandbox_id": sb}),
                               ("POST", f"/artifacts/uploads/{uid}/complete",
                                {"parts": [{"part_number": 1, "etag": etags[1]}]}),
                               ("POST", f"/artifacts/uploads/{uid}/abort", None),
                               ("GET", f"/artifacts/uploads/{uid}", None),
                               ("DELETE", f"/artifacts/uploads/{uid}", None)):
        status, res, _ = call(ctl, method, path, b, body=body)
        assert status == 404 and res["error"]["code"] == "NOT_FOUND", (method, path, res)
    status, res, _ = call(ctl, "PUT", f"/artifacts/uploads/{uid}/parts/2", b, data=b"x")
    assert status == 404, res
    status, page, _ = call(ctl, "GET", "/artifacts", b)
    assert page["total"] == 0 and page["data"] == []
    status, page, _ = call(ctl, "GET", f"/artifacts?sandbox_id={sa}", b)
    assert page["total"] == 0
    status, page, _ = call(ctl, "GET", "/artifacts/uploads", b)
    assert page["total"] == 0
    # B cannot upload from A's sandbox, nor write A's artifact into A's sandbox.
    status, res = upload(ctl, b, sa, {"path": "secret.txt"})
    assert status == 404, res
    status, res, _ = call(ctl, "POST", f"/artifacts/{aid}/download-to-sandbox", b, body={"sandbox_id": sa})
    assert status == 404, res
    # A cannot write into B's sandbox either.
    status, res, _ = call(ctl, "POST", f"/artifacts/{aid}/download-to-sandbox", a, body={"sandbox_id": sb})
    assert status == 404, res
    # Still A's, untouched.
    status, hdrs, body = download(ctl, a, aid)
    assert status == 200 and body == b"org A only"
    status, res = complete(ctl, a, uid, [{"part_number": 1, "etag": etags[1]}])
    assert status == 201, res
    assert os.path.exists(os.path.join(blob_dir(ctl, a_org), aid))


def test_size_limit_and_quota(ctl):
    creds, org_id = org(ctl)
    sid = new_sandbox(ctl, creds)
    put_file(ctl, creds, sid, "big.bin", os.urandom(MAX_BYTES + 1))
    status, res = upload(ctl, creds, sid, {"path": "big.bin"})
    assert status == 413 and res["error"]["code"] == "PAYLOAD_TOO_LARGE", res
    put_file(ctl, creds, sid, "big.bin", os.urandom(MAX_BYTES))
    status, first = upload(ctl, creds, sid, {"path": "big.bin"})
    assert status == 201, first
    # QUOTA - MAX_BYTES = 400 KiB left: a second 600 KiB artifact does not fit.
    status, res = upload(ctl, creds, sid, {"path": "big.bin"})
    assert status == 429 and res["error"]["code"] == "QUOTA_EXCEEDED", res
    # Parts count against the quota as they arrive.
    status, up, _ = call(ctl, "POST", "/artifacts/uploads/initiate", creds, body={"name": "m"})
    uid = up["upload_id"]
    status, res, _ = call(ctl, "PUT", f"/artifacts/uploads/{uid}/parts/1", creds, data=os.urandom(PART_MAX - 10))
    assert status == 200, res
    status, res, _ = call(ctl, "PUT", f"/artifacts/uploads/{uid}/parts/2", creds, data=os.urandom(PART_MAX - 10))
    assert status == 429 and res["error"]["code"] == "QUOTA_EXCEEDED", res
    # Deleting frees the quota; another org has its own.
    status, _, _ = call(ctl, "DELETE", f"/artifacts/{first['id']}", creds)
    assert status == 200
    status, res, _ = call(ctl, "PUT", f"/artifacts/uploads/{uid}/parts/2", creds, data=os.urandom(PART_MAX - 10))
    assert status == 200, res
    other, _ = org(ctl)
    osid = new_sandbox(ctl, other)
    put_file(ctl, other, osid, "big.bin", os.urandom(MAX_BYTES))
    status, res = upload(ctl, other, osid, {"path": "big.bin"})
    assert status == 201, res


def test_idempotent_complete(ctl):
    creds, _ = org(ctl)
    uid, etags = multipart(ctl, creds, "i.bin", [b"abc"])
    h = dict(creds)
    h["Idempotency-Key"] = "complete-1"
    body = {"parts": [{"part_number": 1, "etag": etags[1]}]}
    s1, r1, h1 = ctl.request("POST", V1 + f"/artifacts/uploads/{uid}/complete", body=body, headers=h)
    s2, r2, h2 = ctl.request("POST", V1 + f"/artifacts/uploads/{uid}/complete", body=body, headers=h)
    assert s1 == s2 == 201 and r1 == r2 and h2["idempotency-status"] == "replayed"
    status, page, _ = call(ctl, "GET", "/artifacts", creds)
    assert page["total"] == 1


def test_artifacts_and_uploads_survive_a_restart(tmp_path):
    d = Daemon(sets=SETS, data_dir=str(tmp_path))
    try:
        creds, _ = org(d)
        sid = new_sandbox(d, creds)
        data = os.urandom(50_000)
        put_file(d, creds, sid, "keep.bin", data)
        status, art = upload(d, creds, sid, {"path": "keep.bin"})
        assert status == 201, art
        uid, etags = multipart(d, creds, "later.bin", [b"part one"])
    finally:
        d.stop()
    d = Daemon(sets=SETS, data_dir=str(tmp_path))
    try:
        status, hdrs, body = download(d, creds, art["id"])
        assert status == 200 and body == data and hdrs["etag"] == f'"{sha(data)}"'
        status, res = complete(d, creds, uid, [{"part_number": 1, "etag": etags[1]}])
        assert status == 201 and res["checksum"] == sha(b"part one"), res
    finally:
        d.cleanup()


# ---- artifacts in an S3-compatible bucket (s3rver on loopback) ----

def s3_missing():
    return s3fs_missing("the artifacts bucket")


@pytest.fixture(scope="module")
def s3ctl():
    why = s3_missing()
    if why:
        pytest.skip(why)
    s3 = S3()
    d = Daemon(sets=SETS + ["controller.artifact_s3_bucket=bkt", f"controller.artifact_s3_endpoint={s3.endpoint}",
                            "controller.artifact_s3_prefix=/arts"],
               env={"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": KEY})
    yield d, s3
    d.stop()
    with open("/proc/self/mountinfo") as f:
        left = [line for line in f if os.path.realpath(d.data_dir) in line]
    d.cleanup()
    s3.stop()
    assert not left, "the daemon left its bucket mounted"


def test_s3_mode_round_trip(s3ctl):
    d, s3 = s3ctl
    creds, org_id = org(d)
    src, dst = new_sandbox(d, creds), new_sandbox(d, creds)
    data = os.urandom(120_000)
    put_file(d, creds, src, "res.bin", data)
    status, art = upload(d, creds, src, {"path": "res.bin"})
    assert status == 201 and art["checksum"] == sha(data), art
    # The bytes are an object of the bucket, under the prefix; none on local disk.
    assert s3.object("bkt", f"arts/{org_id}/{art['id']}") == data
    assert not os.path.exists(os.path.join(blob_dir(d, org_id), art["id"]))
    status, hdrs, body = download(d, creds, art["id"], {"Range": "bytes=100-199"})
    assert status == 206 and body == data[100:200]
    status, hdrs, body = download(d, creds, art["id"])
    assert status == 200 and body == data and hdrs["etag"] == f'"{sha(data)}"'
    # Multipart: parts on local scratch, the joined artifact in the bucket.
    parts = [os.urandom(PART_MIN), os.urandom(500)]
    uid, etags = multipart(d, creds, "joined.bin", parts, order=[1, 0])
    status, joined = complete(d, creds, uid, [{"part_number": n, "etag": e} for n, e in etags.items()])
    assert status == 201, joined
    assert s3.object("bkt", f"arts/{org_id}/{joined['id']}") == b"".join(parts)
    status, res, _ = call(d, "POST", f"/artifacts/{joined['id']}/download-to-sandbox", creds,
                          body={"sandbox_id": dst, "path": "joined.bin"})
    assert status == 200, res
    out = execute(d, creds, dst, ["sha256sum", "/workspace/joined.bin"])
    assert out["stdout"].split()[0] == sha(b"".join(parts))
    status, _, _ = call(d, "DELETE", f"/artifacts/{art['id']}", creds)
    assert status == 200
    assert s3.object("bkt", f"arts/{org_id}/{art['id']}") is None


def test_s3_mode_unreachable_bucket_fails_the_start(tmp_path):
    why = s3_missing()
    if why:
        pytest.skip(why)
    port = free_port()  # nothing listens there
    args = [api.BIN, "--listen", f"127.0.0.1:{free_port()}", "--data-dir", str(tmp_path), "--log-level", "warn"]
    for s in SETS + ["controller.artifact_s3_bucket=bkt", f"controller.artifact_s3_endpoint=http://127.0.0.1:{port}"]:
        args += ["--set", s]
    env = {"PATH": "/usr/bin:/bin", "AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": KEY}
    r = subprocess.run(args, env=env, capture_output=True, timeout=120)
    assert r.returncode != 0
    assert b"cannot mount the artifacts bucket" in r.stdout + r.stderr
