"""Throttled S3 bulk deletes are retried, rate-bounded and reported, never lost.

A real HTTP proxy (``tests/support/s3_proxy.py``) sits between the real client stack (s3fs,
aiobotocore, botocore) and the real SeaweedFS server and answers chosen ``DeleteObjects`` requests
itself: ``503 SlowDown`` for the whole request, or a ``200`` whose result refuses keys one by one.
Everything else reaches SeaweedFS, so what is reported deleted is checked against the server.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.core.maintenance.deletion import DeleteRequest, FileDeleter
from tests.support.s3_proxy import S3Proxy, refuse_keys, throttle_deletes
from tests.support.seaweedfs import SeaweedFSServer

pytestmark = pytest.mark.s3

# The S3 client's own retries off, so every throttled answer reaches the deleter.
NO_CLIENT_RETRIES = {"retries": {"total_max_attempts": 1}}


def _through(proxy: S3Proxy, seaweedfs: SeaweedFSServer, config: dict[str, Any] | None = None) -> FileIO:
    options = seaweedfs.storage_options()
    options["client_kwargs"] = {**options["client_kwargs"], "endpoint_url": proxy.endpoint_url}
    options["config_kwargs"] = {**options["config_kwargs"], **(config or {})}
    io, _ = FileIO.for_uri("s3://any", options)
    return io


def _plant(seaweedfs: SeaweedFSServer, bucket: str, count: int, prefix: str = "t") -> list[str]:
    paths = [f"{bucket}/{prefix}/f{i:05d}" for i in range(count)]
    seaweedfs.fs().pipe(dict.fromkeys(paths, b"x"))
    return paths


def _remaining(seaweedfs: SeaweedFSServer, bucket: str) -> set[str]:
    return set(seaweedfs.fs().find(bucket))


def test_a_throttled_bulk_delete_is_retried_bounded_and_reported(
    seaweedfs: SeaweedFSServer, s3_bucket: str
) -> None:
    bucket = s3_bucket.removeprefix("s3://")
    paths = _plant(seaweedfs, bucket, 2500)
    sleeps: list[float] = []
    with S3Proxy(seaweedfs.endpoint_url, rules=[throttle_deletes(3)]) as proxy:
        io = _through(proxy, seaweedfs, NO_CLIENT_RETRIES)
        deleter = FileDeleter(io, dry_run=False, concurrency=1, backoff_base=0.01, sleep=sleeps.append)
        report = deleter.delete([DeleteRequest("data-file", p, 1) for p in paths])
    assert proxy.counts["answered:503"] == 3
    assert proxy.counts["forwarded"] == 3  # one accepted DeleteObjects per batch of 1000, 1000, 500
    assert (report.retries, report.throttled) == (3, 3)
    assert report.total_files == 2500 and not report.failed
    assert _remaining(seaweedfs, bucket) == set()
    assert len(sleeps) >= 3  # a back-off before every re-send
    assert deleter.rate.rate is not None and deleter.rate.throttles == 3  # the rate is bounded now
    assert report.to_json()["retries"] == 3 and report.to_json()["throttled"] == 3


def test_the_clients_own_retries_are_counted_too(seaweedfs: SeaweedFSServer, s3_bucket: str) -> None:
    bucket = s3_bucket.removeprefix("s3://")
    paths = _plant(seaweedfs, bucket, 300)
    with S3Proxy(seaweedfs.endpoint_url, rules=[throttle_deletes(2)]) as proxy:
        io = _through(proxy, seaweedfs)  # botocore's default retry policy re-sends 503s itself
        report = FileDeleter(io, dry_run=False).delete([DeleteRequest("data-file", p, 1) for p in paths])
    assert proxy.counts["answered:503"] == 2 and proxy.counts["forwarded"] == 1
    assert (report.retries, report.throttled) == (2, 2) and report.requests == 300
    assert report.total_files == 300 and not report.failed
    assert _remaining(seaweedfs, bucket) == set()


def test_per_key_slowdown_is_retried_and_per_key_refusals_are_reported(
    seaweedfs: SeaweedFSServer, s3_bucket: str
) -> None:
    bucket = s3_bucket.removeprefix("s3://")
    locked = seaweedfs.create_bucket(f"locked-{uuid.uuid4().hex[:12]}").removeprefix("s3://")
    paths = _plant(seaweedfs, bucket, 1200)
    kept = _plant(seaweedfs, locked, 5)
    rules = [refuse_keys(None, "AccessDenied", bucket=locked), refuse_keys(2, "SlowDown")]
    with S3Proxy(seaweedfs.endpoint_url, rules=rules) as proxy:
        io = _through(proxy, seaweedfs, NO_CLIENT_RETRIES)
        deleter = FileDeleter(io, dry_run=False, concurrency=1, backoff_base=0.001, sleep=lambda _: None)
        report = deleter.delete([DeleteRequest("data-file", p, 1) for p in paths + kept])
    # The AccessDenied request is answered once (never retried); two requests got per-key SlowDown.
    assert proxy.counts["answered"] == 3
    assert report.total_files == 1200 and (report.retries, report.throttled) == (2, 2)
    assert sorted(f.path for f in report.failed) == sorted(f"s3://{p}" for p in kept)
    assert all("AccessDenied" in f.error for f in report.failed)
    assert _remaining(seaweedfs, bucket) == set() and _remaining(seaweedfs, locked) == set(kept)


def test_a_permanent_throttle_is_reported_as_failed_not_dropped(
    seaweedfs: SeaweedFSServer, s3_bucket: str
) -> None:
    bucket = s3_bucket.removeprefix("s3://")
    paths = _plant(seaweedfs, bucket, 1500)
    with S3Proxy(seaweedfs.endpoint_url, rules=[throttle_deletes(None)]) as proxy:
        io = _through(proxy, seaweedfs, NO_CLIENT_RETRIES)
        deleter = FileDeleter(io, dry_run=False, max_attempts=3, concurrency=2, sleep=lambda _: None)
        report = deleter.delete([DeleteRequest("data-file", p, 1) for p in paths])
    assert proxy.counts["answered:503"] == 6 and proxy.counts["forwarded"] == 0  # 2 batches x 3 attempts
    assert report.total_files == 0 and (report.retries, report.throttled) == (4, 6)
    assert sorted(f.path for f in report.failed) == sorted(f"s3://{p}" for p in paths)
    assert all("SlowDown" in f.error for f in report.failed)
    assert _remaining(seaweedfs, bucket) == set(paths)
