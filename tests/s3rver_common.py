"""s3rver (npm, pinned in tests/node) on loopback: the S3-compatible server
the bucket tests run against (bridge mounts, controller artifacts)."""
import http.client
import os
import shutil
import socket
import subprocess
import tempfile
import time

NODE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node")
S3RVER = os.path.join(NODE_DIR, "node_modules", "s3rver", "bin", "s3rver.js")
KEY = "S3RVER"  # s3rver's built-in account (it checks the key id, not SigV4 signatures)


def s3fs_missing(what="a bucket mount"):
    """Why a host s3fs mount against s3rver cannot run here, or None."""
    if not os.path.exists("/dev/fuse"):
        return f"no /dev/fuse on this host: {what} is mounted with s3fs (FUSE)"
    if not shutil.which("s3fs"):
        return "s3fs is not installed (scripts/install-deps.sh installs it)"
    if not os.path.exists(S3RVER):
        return "s3rver is missing: run `make node-deps`"
    if os.geteuid() != 0:
        return f"{what} needs the daemon to run as root"
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3:
    """s3rver on loopback with buckets "bkt" and "other"; objects live in
    its directory as <bucket>/<key>._S3rver_object."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="s3rver-")
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        args = ["node", S3RVER, "--directory", self.dir, "--address", "127.0.0.1", "--port", str(self.port),
                "--silent", "--configure-bucket", "bkt", "--configure-bucket", "other"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                if os.path.isdir(os.path.join(self.dir, "other")):
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("s3rver did not start")

    def object(self, bucket, key):
        """The stored bytes of an object, or None."""
        try:
            with open(os.path.join(self.dir, bucket, key + "._S3rver_object"), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def put(self, bucket, key, data):
        """An S3 PUT (s3rver verifies the key id of a SigV4 header, not its signature)."""
        date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        auth = (f"AWS4-HMAC-SHA256 Credential={KEY}/{date[:8]}/us-east-1/s3/aws4_request, "
                f"SignedHeaders=host;x-amz-date, Signature={'0' * 64}")
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.request("PUT", f"/{bucket}/{key}", body=data,
                     headers={"Authorization": auth, "x-amz-date": date, "x-amz-content-sha256": "UNSIGNED-PAYLOAD"})
        resp = conn.getresponse()
        resp.read()
        conn.close()
        assert resp.status == 200, resp.status

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
