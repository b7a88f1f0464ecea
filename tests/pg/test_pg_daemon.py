"""The daemon on PostgreSQL, black-box: run with -p pg_plugin (make api-pg),
which starts the cluster; skipped without it. The rest of the PostgreSQL
smoke is the ordinary tests/api and tests/controller files run under the
same plugin (see the Makefile's PG_SMOKE); tests/api/test_sandboxes.py
restarts and kill -9s daemons on one data dir, hence on one database."""
import os
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from api_loader import load_api  # noqa: E402

api = load_api()
V1 = "/api/v1"
SETS = list(api.FAST_LIMITS) + ["pool.size=0"]

pytestmark = pytest.mark.skipif(not os.environ.get("SANDBOXD_TEST_PG_HOST"),
                                reason="needs the PostgreSQL cluster of tests/pg/pg_plugin.py (make api-pg)")


def test_health_names_the_postgres_backend():
    d = api.Daemon(sets=SETS)
    try:
        status, body, _ = d.get(V1 + "/health/detailed")
        assert status == 200, body
        assert body["store"] == {"backend": "postgres", "status": "ok"}
    finally:
        d.cleanup()


def test_unreachable_server_fails_the_start_without_leaking_the_password():
    with tempfile.TemporaryDirectory(prefix="sandboxd-pg-") as data_dir:
        url = "postgresql://sandboxd:hunter2secret@/nope?host=/nonexistent-dir"
        with pytest.raises(RuntimeError) as e:
            api.Daemon(sets=SETS, data_dir=data_dir, extra_args=["--store", url])
        log = str(e.value)
        assert "cannot open the store" in log
        assert "hunter2secret" not in log
