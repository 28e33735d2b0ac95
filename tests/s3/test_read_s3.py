"""The read path over S3 (a real SeaweedFS server): same answers as on the local filesystem."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat import cli
from airflow_lakeformat.core.paimon.snapshot import CommitKind
from tests.support.seaweedfs import SeaweedFSServer, upload_tree
from tests.support.tables import TableBuilder
from tests.unit.test_cli import run

pytestmark = pytest.mark.s3


def cli_json(*argv: str, env: dict[str, str] | None = None) -> Any:
    """Run the real console entry point in a subprocess, so the environment path is exercised."""
    proc = subprocess.run(
        [sys.executable, "-m", "airflow_lakeformat.cli", *argv, "--json"],
        capture_output=True, text=True, check=False, env={**os.environ, **(env or {})},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def without_table_uri(document: dict[str, Any], root: str | Path | None = None) -> dict[str, Any]:
    """The document without its ``table``, and with the table's root in every full path replaced by ``<root>``
    (paths are full URIs: the same table read locally and through S3 differs in that prefix only)."""

    def strip(value: Any) -> Any:
        if isinstance(value, str) and root is not None and value.startswith(str(root)):
            return "<root>" + value[len(str(root)) :]
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip({k: v for k, v in document.items() if k != "table"})


def storage_options_args(server: SeaweedFSServer) -> list[str]:
    return [
        "--storage-option", f"key={server.access_key}",
        "--storage-option", f"secret={server.secret_key}",
        "--storage-option", f"endpoint_url={server.endpoint_url}",
        "--storage-option", f"client_kwargs.region_name={server.region}",
    ]  # fmt: skip


def escaping_table(root: Path) -> TableBuilder:
    b = TableBuilder(root, [("d", "DATE"), ("s", "STRING"), ("v", "INT")], ["d", "s"])
    first = [b.entry((date(2024, 1, 1), "a/b:c=d")), b.entry((None, ""))]
    b.commit(first, write_data_files=True)
    b.tag("t1", b.snapshots[-1])
    b.commit(
        [b.delete_of(first[0]), b.entry((date(2024, 1, 2), "x#y%z?"))],
        CommitKind.OVERWRITE,
        write_data_files=True,
    )
    return b


def test_files_snapshots_manifests_match_local_through_env_and_options(
    sample_tables: Path, tmp_path: Path, seaweedfs: SeaweedFSServer, s3_bucket: str
) -> None:
    fs = seaweedfs.fs()
    tables = {name: sample_tables / name for name in ("append_tbl", "pk_tbl", "append_ovw_tbl")}
    tables["escaping"] = escaping_table(tmp_path / "escaping").root
    for name, local in tables.items():
        remote = f"{s3_bucket}/wh/{name}"
        upload_tree(fs, local, remote)
        for command in (["snapshots"], ["manifests"], ["files"]):
            local_doc = cli_json(*command, str(local))
            via_env = cli_json(*command, remote, env=seaweedfs.env())
            assert without_table_uri(via_env, remote) == without_table_uri(local_doc, local), (name, command)
            assert via_env["table"] == remote
        code, out, err = run("files", remote, "--json", *storage_options_args(seaweedfs))
        assert code == 0, err
        assert without_table_uri(json.loads(out), remote) == without_table_uri(
            cli_json("files", str(local)), local
        )
    tagged = cli_json("files", f"{s3_bucket}/wh/escaping", "--tag", "t1", env=seaweedfs.env())
    assert sorted(f["partition"]["s"] for f in tagged["files"]) == ["", "a/b:c=d"]
    for f in tagged["files"]:
        assert f["path"].startswith(f"{s3_bucket}/wh/escaping/") and fs.exists(f["path"]), f["path"]


def test_corruption_and_hint_fallbacks_over_s3(
    sample_tables: Path, seaweedfs: SeaweedFSServer, s3_bucket: str
) -> None:
    fs = seaweedfs.fs()
    remote = f"{s3_bucket}/t"
    key = remote.removeprefix("s3://")
    upload_tree(fs, sample_tables / "append_ovw_tbl", remote)
    options = storage_options_args(seaweedfs)
    fs.pipe_file(f"{key}/snapshot/LATEST", b"2")  # behind the real latest
    code, out, _ = run("files", remote, "--json", *options)
    assert code == 0 and json.loads(out)["snapshot"] == 4
    fs.pipe_file(f"{key}/snapshot/LATEST", b"12")  # names a missing snapshot
    assert json.loads(run("files", remote, "--json", *options)[1])["snapshot"] == 4
    manifests = json.loads(run("manifests", remote, "--json", *options)[1])["manifests"]
    fs.rm(f"{key}/manifest/{manifests[0]['fileName']}")
    code, out, err = run("files", remote, "--json", *options)
    assert code == cli.EXIT_CORRUPT and manifests[0]["fileName"] in err
    assert json.loads(out)["error"]["exitCode"] == cli.EXIT_CORRUPT
    code, _, err = run("files", f"{s3_bucket}/no-such-table", "--json", *options)
    assert code == cli.EXIT_NO_TABLE and "no Paimon or Iceberg table here" in err


def test_s3_listing_gives_every_page_as_s3fs_lists_it(seaweedfs: SeaweedFSServer, s3_bucket: str) -> None:
    """``FileIO.list_dir`` on S3: the rows s3fs's ``ls`` gives (files with size and time, sub-prefixes as
    directories, the prefix's own marker skipped), over several pages, never from a cache, and a missing
    prefix or bucket lists as empty."""
    from airflow_lakeformat.core.io import FileIO

    io, root = FileIO.for_uri(f"{s3_bucket}/t", seaweedfs.storage_options())
    names = [f"f-{i:04d}.avro" for i in range(1, 1203)]  # more than one 1,000-key page
    for name in names:
        io.write_bytes(f"{root}/manifest/{name}", name.encode())
    io.write_bytes(f"{root}/manifest/", b"")  # a directory marker, as some tools write them
    io.write_bytes(f"{root}/manifest/sub/x.avro", b"x")
    io.write_bytes(f"{root}/manifest-sibling/y.avro", b"y")

    def through_s3fs(path: str) -> list[tuple[Any, ...]]:
        io.fs.invalidate_cache(path)
        rows = []
        for row in io.fs.ls(path, detail=True):
            full = str(row["name"]).rstrip("/")
            if full != path:
                rows.append(
                    (full.rsplit("/", 1)[1], full, int(row.get("size") or 0), row["type"] == "directory")
                )
        return sorted(rows)

    for path in (f"{root}/manifest", f"{root}/manifest/", root):
        listed = io.list_dir(path)
        assert sorted((s.name, s.path, s.size, s.is_dir) for s in listed) == through_s3fs(path.rstrip("/"))
        assert all((s.mtime is None) == s.is_dir for s in listed)
    files = {s.name: s for s in io.list_dir(f"{root}/manifest") if not s.is_dir}
    assert sorted(files) == names and files[names[0]].size == len(names[0])
    assert {s.name for s in io.list_dir(f"{root}/manifest") if s.is_dir} == {"sub"}
    assert io.list_dir(f"{root}/nothing-here") == []
    io.write_bytes(f"{root}/manifest/late.avro", b"late")  # written after the listings above: seen at once
    assert "late.avro" in {s.name for s in io.list_dir(f"{root}/manifest")}
    missing, missing_root = FileIO.for_uri("s3://no-such-bucket-lakeformat/t", seaweedfs.storage_options())
    assert missing.list_dir(missing_root) == []
