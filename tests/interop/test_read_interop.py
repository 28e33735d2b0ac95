"""We read what pypaimon writes exactly as pypaimon plans it, at every snapshot and tag, locally and on S3.

The tables are written by real pypaimon 2.1.0 in its own virtualenv (see tests/support/pypaimon.py);
the comparison is against pypaimon's own scan plan of the same snapshot or tag.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat import cli
from airflow_lakeformat.core.paimon import binary_row
from airflow_lakeformat.core.paimon.table import Table
from tests.support.pypaimon import SCENARIOS, run_oracle_batch
from tests.support.seaweedfs import SeaweedFSServer, upload_tree

pytestmark = pytest.mark.interop

COMPARED = (
    "fileName",
    "recordCount",
    "fileSize",
    "partition",
    "bucket",
    "level",
    "minSequenceNumber",
    "maxSequenceNumber",
)


@pytest.fixture(scope="session")
def oracle_plans(pypaimon_warehouse: dict[str, Any]) -> dict[str, Any]:
    tables = pypaimon_warehouse["tables"]
    plans = run_oracle_batch([["plan", tables[name]["path"], "--all"] for name in SCENARIOS])
    return dict(zip(SCENARIOS, plans, strict=True))


def lakeformat_files(table: str, *args: str) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    old, sys.stderr = sys.stderr, err
    try:
        code = cli.main(["files", table, "--json", *args], out=out)
    finally:
        sys.stderr = old
    assert code == 0, err.getvalue()
    document: dict[str, Any] = json.loads(out.getvalue())
    return document


# The oracle prints pypaimon's names, the CLI Iceberg's (pypaimon's rowCount is the CLI's recordCount).
ORACLE_NAMES = {"recordCount": "rowCount"}


def normalized(files: list[dict[str, Any]]) -> list[str]:
    return sorted(
        json.dumps(
            {k: f[k] if k in f else f[ORACLE_NAMES[k]] for k in COMPARED}, sort_keys=True, ensure_ascii=False
        )
        for f in files
    )


def versions(plans: dict[str, Any]) -> list[tuple[list[str], dict[str, Any]]]:
    """(CLI selector arguments, pypaimon plan) for every snapshot and every tag."""
    out = [(["--snapshot", sid], plan) for sid, plan in plans["snapshots"].items()]
    out += [(["--tag", name], plan) for name, plan in plans["tags"].items()]
    return out


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_files_equal_pypaimon_plan_at_every_snapshot_and_tag(
    scenario: str, pypaimon_warehouse: dict[str, Any], oracle_plans: dict[str, Any]
) -> None:
    root = Path(pypaimon_warehouse["tables"][scenario]["path"])
    plans = oracle_plans[scenario]
    assert plans["snapshots"], "the oracle built no snapshot"
    for selector, plan in versions(plans):
        ours = lakeformat_files(str(root), *selector)
        assert ours["snapshot"] == plan["snapshotId"], selector
        assert normalized(ours["files"]) == normalized(plan["files"]), (scenario, selector)
        for f in ours["files"]:
            # The computed path (escaping, DATE day numbers, default partition) names a real file.
            assert (root / f["path"]).is_file(), (scenario, selector, f["path"])


def test_every_scenario_shape_is_covered(
    oracle_plans: dict[str, Any], pypaimon_warehouse: dict[str, Any]
) -> None:
    assert len(oracle_plans["many_commits"]["snapshots"]) >= 40
    assert oracle_plans["overwrite_tag_consumer"]["tags"]
    pk_buckets = {
        f["bucket"] for plan in oracle_plans["pk_buckets"]["snapshots"].values() for f in plan["files"]
    }
    assert len(pk_buckets) >= 3
    partitions = [
        f["partition"] for p in oracle_plans["append_partitioned"]["snapshots"].values() for f in p["files"]
    ]
    strings = {p["s"] for p in partitions}
    assert None in strings and "" in strings and any("/" in s for s in strings if s)
    root = Path(pypaimon_warehouse["tables"]["append_partitioned"]["path"])
    directories = {p.name for p in root.iterdir()}
    assert any(d.startswith("d=") and d[2:].isdigit() for d in directories), "DATE partitions use day numbers"
    assert "d=__DEFAULT_PARTITION__" in directories or any(
        (root / d / "s=__DEFAULT_PARTITION__").is_dir() for d in directories
    )


def test_partition_bytes_written_by_pypaimon_reencode_identically(pypaimon_warehouse: dict[str, Any]) -> None:
    """Golden BinaryRows: every partition row pypaimon wrote, for every partition type it accepts."""
    checked = 0
    for scenario in ("typed_partitions", "append_partitioned", "pk_buckets"):
        table = Table.open(pypaimon_warehouse["tables"][scenario]["path"])
        types = table.schema.partition_types
        latest = table.snapshot_manager.latest_snapshot()
        assert latest is not None
        base, delta = table.data_manifests(latest)
        for entries in table.read_manifests(base + delta, "test"):
            for entry in entries:
                values = binary_row.decode(entry.partition, types)
                if any(v is None for v, t in zip(values, types, strict=True) if _var_reserved(t)):
                    continue  # pypaimon diverges from Java here (documented); Java's form is tested elsewhere
                assert binary_row.encode(values, types) == entry.partition, (scenario, values)
                checked += 1
    assert checked >= 10


def _var_reserved(dtype: Any) -> bool:
    return (dtype.root == "DECIMAL" and not dtype.is_compact_decimal) or (
        dtype.root in ("TIMESTAMP", "TIMESTAMP_LTZ") and not dtype.is_compact_timestamp
    )


@pytest.mark.s3
def test_same_plans_over_s3(
    pypaimon_warehouse: dict[str, Any],
    oracle_plans: dict[str, Any],
    seaweedfs: SeaweedFSServer,
    s3_bucket: str,
) -> None:
    fs = seaweedfs.fs()
    options = [
        "--storage-option", f"key={seaweedfs.access_key}",
        "--storage-option", f"secret={seaweedfs.secret_key}",
        "--storage-option", f"endpoint_url={seaweedfs.endpoint_url}",
    ]  # fmt: skip
    for scenario in SCENARIOS:
        remote = f"{s3_bucket}/wh/{scenario}"
        upload_tree(fs, pypaimon_warehouse["tables"][scenario]["path"], remote)
        for selector, plan in versions(oracle_plans[scenario]):
            ours = lakeformat_files(remote, *selector, *options)
            assert normalized(ours["files"]) == normalized(plan["files"]), (scenario, selector)
