"""Checks that the SeaweedFS test server behaves like the S3 our code relies on."""

from __future__ import annotations

import errno
import hashlib
import os
import threading
import uuid
from pathlib import Path

import pytest

from tests.support.seaweedfs import (
    HOST,
    SeaweedFSServer,
    is_precondition_failure,
    upload_tree,
)

pytestmark = pytest.mark.s3


def _path(bucket_url: str, key: str) -> str:
    return f"{bucket_url.removeprefix('s3://')}/{key}"


def _is_s3fs_create_conflict(exc: BaseException) -> bool:
    return isinstance(exc, FileExistsError) or (isinstance(exc, OSError) and exc.errno == errno.EINVAL)


@pytest.mark.s3
def test_put_get_list_delete_roundtrip(seaweedfs: SeaweedFSServer, s3_bucket: str) -> None:
    fs = seaweedfs.fs()
    first = _path(s3_bucket, "dir/a.bin")
    second = _path(s3_bucket, "dir/sub/b.txt")
    fs.pipe_file(first, b"\x00\x01binary\xff")
    fs.pipe_file(second, b"hello")

    assert fs.cat_file(first) == b"\x00\x01binary\xff"
    assert fs.cat_file(second) == b"hello"
    assert fs.info(first)["size"] == 9
    assert sorted(fs.find(_path(s3_bucket, "dir"))) == sorted([first, second])

    # A fresh client sees the same listing (no client-side cache involved).
    assert sorted(seaweedfs.fs().find(_path(s3_bucket, ""))) == sorted([first, second])

    fs.rm_file(first)
    assert not fs.exists(first)
    assert seaweedfs.fs().find(_path(s3_bucket, "")) == [second]
    with pytest.raises(FileNotFoundError):
        seaweedfs.fs().cat_file(first)


@pytest.mark.s3
def test_create_mode_on_existing_key_fails_and_keeps_content(
    seaweedfs: SeaweedFSServer, s3_bucket: str
) -> None:
    fs = seaweedfs.fs()
    key = _path(s3_bucket, "snapshot/snapshot-1")
    fs.pipe_file(key, b"original", mode="create")

    with pytest.raises(OSError) as caught:
        fs.pipe_file(key, b"replacement", mode="create")
    assert _is_s3fs_create_conflict(caught.value), repr(caught.value)
    assert is_precondition_failure(caught.value)

    assert seaweedfs.fs().cat_file(key) == b"original"


@pytest.mark.s3
def test_create_mode_multipart_upload_on_existing_key_fails(
    seaweedfs: SeaweedFSServer, s3_bucket: str
) -> None:
    fs = seaweedfs.fs()
    key = _path(s3_bucket, "data/big.parquet")
    fs.pipe_file(key, b"small original", mode="create")

    block = 5 * 2**20
    with pytest.raises(OSError) as caught, fs.open(key, "xb", block_size=block) as handle:
        for _ in range(3):  # three parts: the condition is on the complete call
            handle.write(os.urandom(block))
    assert _is_s3fs_create_conflict(caught.value), repr(caught.value)
    assert seaweedfs.fs().cat_file(key) == b"small original"

    # The same multipart write to a new key succeeds.
    payload = os.urandom(2 * block + 1234)
    fresh = _path(s3_bucket, "data/new.parquet")
    with fs.open(fresh, "xb", block_size=block) as handle:
        handle.write(payload[:block])
        handle.write(payload[block:])
    assert seaweedfs.fs().cat_file(fresh) == payload


@pytest.mark.s3
def test_concurrent_create_mode_puts_have_exactly_one_winner(
    seaweedfs: SeaweedFSServer, s3_bucket: str
) -> None:
    writers = 8
    key = _path(s3_bucket, "snapshot/snapshot-7")
    payloads = [f"writer-{i}:".encode() + os.urandom(4096) for i in range(writers)]
    filesystems = [seaweedfs.fs() for _ in range(writers)]
    barrier = threading.Barrier(writers)
    outcomes: list[BaseException | str | None] = ["not run"] * writers

    def attempt(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            filesystems[index].pipe_file(key, payloads[index], mode="create")
        except BaseException as exc:
            outcomes[index] = exc
        else:
            outcomes[index] = None

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)

    winners = [i for i, outcome in enumerate(outcomes) if outcome is None]
    losers = [outcome for outcome in outcomes if outcome is not None]
    assert len(winners) == 1, outcomes
    for loser in losers:
        assert isinstance(loser, OSError) and _is_s3fs_create_conflict(loser), repr(loser)
    assert seaweedfs.fs().cat_file(key) == payloads[winners[0]]


@pytest.mark.s3
def test_boto3_if_none_match_on_existing_key_is_412(seaweedfs: SeaweedFSServer, s3_bucket: str) -> None:
    import boto3  # a dev dependency (s3fs's aiobotocore stack pins it): never skipped
    from botocore.exceptions import ClientError

    client = boto3.client(
        "s3",
        endpoint_url=seaweedfs.endpoint_url,
        aws_access_key_id=seaweedfs.access_key,
        aws_secret_access_key=seaweedfs.secret_key,
        region_name=seaweedfs.region,
    )
    bucket = s3_bucket.removeprefix("s3://")
    created = client.put_object(Bucket=bucket, Key="k", Body=b"v1", IfNoneMatch="*")

    with pytest.raises(ClientError) as caught:
        client.put_object(Bucket=bucket, Key="k", Body=b"v2", IfNoneMatch="*")
    error = caught.value.response
    assert error["Error"]["Code"] == "PreconditionFailed"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert is_precondition_failure(caught.value)

    # If-Match compare-and-swap: a stale ETag loses, the current one wins.
    with pytest.raises(ClientError) as stale:
        client.put_object(Bucket=bucket, Key="k", Body=b"v2", IfMatch='"' + "0" * 32 + '"')
    assert stale.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    client.put_object(Bucket=bucket, Key="k", Body=b"v2", IfMatch=created["ETag"])
    assert client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v2"


@pytest.mark.s3
def test_upload_tree_copies_nested_tree_byte_identically(
    seaweedfs: SeaweedFSServer, s3_bucket: str, tmp_path: Path
) -> None:
    source = tmp_path / "warehouse" / "db.db" / "orders"
    files = {
        "schema/schema-0": b'{"fields": []}',
        "snapshot/LATEST": b"1",
        "snapshot/snapshot-1": b'{"id": 1}',
        "bucket-0/data-abc-0.parquet": os.urandom(300_000),
        "manifest/manifest-list-x-0": os.urandom(1024),
        "empty-file": b"",
    }
    for relative, content in files.items():
        target = source / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    (source / "empty-dir").mkdir()

    destination = f"{s3_bucket}/warehouse/db.db/orders"
    fs = seaweedfs.fs()
    uploaded = upload_tree(fs, source, destination)

    prefix = destination.removeprefix("s3://")
    expected = sorted(f"{prefix}/{relative}" for relative in files)
    assert uploaded == expected
    reader = seaweedfs.fs()
    assert sorted(reader.find(prefix)) == expected
    for relative, content in files.items():
        stored = reader.cat_file(f"{prefix}/{relative}")
        assert hashlib.sha256(stored).digest() == hashlib.sha256(content).digest(), relative


def _listening_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def _listening_tcp_sockets(inodes: set[str]) -> list[tuple[str, int]]:
    """(address, port) of LISTEN sockets in /proc/net/tcp{,6} with these inodes."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A" or inode not in inodes:  # 0A == TCP_LISTEN
                continue
            address_hex, port_hex = local.split(":")
            if len(address_hex) == 8:
                address = ".".join(str(b) for b in reversed(bytes.fromhex(address_hex)))
            else:
                address = f"ipv6:{address_hex}"
            found.append((address, int(port_hex, 16)))
    return found


@pytest.mark.s3
def test_server_listens_only_on_loopback_at_chosen_ports(seaweedfs: SeaweedFSServer) -> None:
    if not Path("/proc/net/tcp").exists():
        pytest.skip("needs Linux /proc")
    assert seaweedfs.pid is not None and seaweedfs.is_running()
    listeners = _listening_tcp_sockets(_listening_inodes(seaweedfs.pid))
    assert listeners, "found no listening sockets for the weed process"
    assert {address for address, _ in listeners} == {HOST}, listeners
    # Every listener is one of the ports chosen at start (nothing on defaults
    # such as 8333/9333/8888/23646), and the S3 endpoint is among them.
    assert {port for _, port in listeners} <= set(seaweedfs.ports.values())
    assert seaweedfs.ports["s3"] in {port for _, port in listeners}
    assert seaweedfs.endpoint_url == f"http://{HOST}:{seaweedfs.ports['s3']}"


@pytest.mark.s3
def test_second_server_runs_alongside_and_stops_cleanly(seaweedfs: SeaweedFSServer, tmp_path: Path) -> None:
    with SeaweedFSServer(tmp_path / "second") as other:
        assert set(other.ports.values()).isdisjoint(seaweedfs.ports.values())
        url = other.create_bucket("other-bucket")
        other.fs().pipe_file(f"{url}/x", b"only here")
        assert not seaweedfs.fs().exists("other-bucket/x")
        pid = other.pid
        assert pid is not None
    assert not other.is_running()
    assert not Path(f"/proc/{pid}").exists()
    # The session server is unaffected.
    assert seaweedfs.is_running()


@pytest.mark.s3
def test_env_and_storage_options_point_at_server(seaweedfs: SeaweedFSServer) -> None:
    env = seaweedfs.env()
    assert env["AWS_ENDPOINT_URL"] == seaweedfs.endpoint_url
    assert env["AWS_ACCESS_KEY_ID"] == seaweedfs.access_key
    assert env["AWS_SECRET_ACCESS_KEY"] == seaweedfs.secret_key
    assert env["AWS_REGION"] == env["AWS_DEFAULT_REGION"] == "us-east-1"

    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **seaweedfs.storage_options())
    bucket = seaweedfs.create_bucket(f"options-check-{uuid.uuid4().hex[:8]}")
    fs.pipe_file(f"{bucket}/k", b"v")
    assert seaweedfs.fs().cat_file(f"{bucket}/k") == b"v"


@pytest.mark.s3
def test_writing_to_missing_bucket_fails(seaweedfs: SeaweedFSServer) -> None:
    # The server runs with -s3.autoCreateBucket=false, like AWS.
    with pytest.raises(FileNotFoundError):
        seaweedfs.fs().pipe_file("no-such-bucket-lakeformat/x", b"v")
    assert not seaweedfs.fs().exists("no-such-bucket-lakeformat")


@pytest.mark.s3
def test_recursive_delete_leaves_no_objects(seaweedfs: SeaweedFSServer, s3_bucket: str) -> None:
    fs = seaweedfs.fs()
    for index in range(5):
        fs.pipe_file(_path(s3_bucket, f"table/bucket-0/data-{index}.parquet"), b"x")
    fs.pipe_file(_path(s3_bucket, "keep/me"), b"y")
    fs.rm(_path(s3_bucket, "table"), recursive=True)
    # Note: SeaweedFS may keep listing the emptied "table/" prefix as a
    # directory (so exists() can stay true); what must hold is no objects.
    assert seaweedfs.fs().find(_path(s3_bucket, "")) == [_path(s3_bucket, "keep/me")]


def test_a_session_can_write_to_more_buckets_than_weed_mini_sizes_itself_for(
    seaweedfs: SeaweedFSServer,
) -> None:
    """Each bucket takes a volume of its own; `weed mini` alone allows as many volumes as the free disk
    suggests (47 on the CI disk), after which every write fails with InternalError. The whole suite makes
    more buckets than that in one session, so the server is started with a volume limit above it."""
    fs = seaweedfs.fs()
    for index in range(60):
        bucket = seaweedfs.create_bucket(f"t-many-buckets-{uuid.uuid4().hex[:12]}")
        fs.pipe_file(f"{bucket.removeprefix('s3://')}/probe/{index}", b"x")
    assert fs.cat_file(f"{bucket.removeprefix('s3://')}/probe/59") == b"x"
