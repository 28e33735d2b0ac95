"""The ``compact_data`` Spark job on Paimon primary-key tables equals the in-process merge-tree compaction.

On two identical copies of a prepared pypaimon table (``tests/fixtures/paimon_pk``), one compacted in process
(``table.maintenance.compact_data``, as the operator's local execution calls it) and one by the job (driver plans
and commits, executors merge the buckets): the same result document, the same COMPACT snapshot (the same inputs
deleted, added files equal in every manifest field but name and creation time), the same live files per bucket and
level with the same key-value content, the structural checker clean on both, and pypaimon reading the job's table
as it read the table before. Full compaction on ``pk_dedup`` (row-kind deletes dropped), minor on ``pk_upgrade``
(a file upgraded beside the rewrites). A bucket that fails on an executor fails the job typed, commits nothing
and leaves no file. The operator with ``execution="spark"`` submits the job with ``--full`` (its submit hook
replaced by one running the job in this process) and ``auto`` picks Spark for a primary-key table above the
thresholds.

The job runs in this process (``main``) on the process's ``local[2]`` session (``tests/spark/conftest.py``),
which it leaves running; ``spark-submit`` is exercised by the append job's test.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pyarrow.parquet as pq
import pytest

from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.manifest import FileKind, ManifestEntry
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.tables import open_table
from airflow_lakeformat.spark.jobs import compact_data as compact_job
from tests.support.paimon_pk import (
    check_pk_table,
    listing,
    paimon_pk_pristine_fixture,  # noqa: F401
    paimon_pk_tables_fixture,  # noqa: F401
)
from tests.support.pypaimon import run_oracle_batch

pytestmark = [pytest.mark.spark, pytest.mark.interop, pytest.mark.slow, pytest.mark.usefixtures("spark")]

VARYING = ("durationSeconds", "table", "job", "sessionSeconds")  # not the compaction's outcome


def run_job(argv: list[str], result: Path) -> dict[str, Any]:
    code = compact_job.main([*argv, "--result", str(result)])
    assert code == 0
    document: dict[str, Any] = json.loads(result.read_text())
    assert document["job"] == "compact_data"
    return document


def comparable(document: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k not in VARYING}


def _file_fields(entry: ManifestEntry) -> tuple[Any, ...]:
    """An entry's manifest fields but the file's name and creation time (random per run)."""
    fields = {k: v for k, v in entry.file.record.items() if k not in ("_FILE_NAME", "_CREATION_TIME")}
    head = {k: v for k, v in entry.record.items() if k != "_FILE"}
    return (json.dumps(head, sort_keys=True, default=repr), json.dumps(fields, sort_keys=True, default=repr))


def table_state(root: str) -> dict[str, Any]:
    """The latest snapshot's kind, user and delta, and each bucket's live files (fields and key-value rows)."""
    table = Table.open(root)
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    _, delta = table.data_manifests(snapshot)
    entries = [e for manifest in table.read_manifests(delta, "test") for e in manifest]
    paths = DataFilePaths(table.schema)
    buckets: dict[str, list[tuple[Any, ...]]] = {}
    for entry in live_entries(table, snapshot):
        rows = pq.read_table(table.io.join(table.root, paths.relative_path(entry))).to_pylist()
        where = f"{paths.partitions.to_json(entry.partition)}/{entry.bucket}"
        buckets.setdefault(where, []).append((entry.file.level, _file_fields(entry), rows))
    deleted = sorted(e.file.file_name for e in entries if e.kind is FileKind.DELETE)
    return {
        "snapshot": (snapshot.id, snapshot.commit_kind.value, snapshot.commit_user),
        "deleted": deleted,
        "added": sorted(_file_fields(e) for e in entries if e.kind is FileKind.ADD),
        "buckets": {where: sorted(files, key=repr) for where, files in sorted(buckets.items())},
        # the files this compaction wrote (an upgraded file is deleted and added under its own name)
        "written": sorted({e.file.file_name for e in entries if e.kind is FileKind.ADD} - set(deleted)),
    }


def twins(paimon_pk_tables: Any, name: str, tmp_path: Path) -> tuple[str, str]:
    """Two identical copies of a fixture table: (in process, Spark)."""
    local, _ = paimon_pk_tables(name)
    other = tmp_path / "spark" / name
    shutil.copytree(local, other)
    return local, str(other)


@pytest.mark.parametrize(("name", "mode"), [("pk_dedup", "full"), ("pk_upgrade", "minor")])
def test_the_job_compacts_a_primary_key_table_as_the_in_process_run(
    name: str, mode: str, paimon_pk_tables: Any, tmp_path: Path
) -> None:
    local, remote = twins(paimon_pk_tables, name, tmp_path)
    argv = ["--table", remote, f"--{mode}", "--commit-user", "tester"]
    files = listing(remote)

    # A dry run plans on the driver only: the in-process plan, nothing written.
    dry = run_job([*argv, "--dry-run"], tmp_path / "dry.json")
    facade_dry = open_table(local).maintenance.compact_data(mode=mode, dry_run=True).to_json()
    assert comparable(dry) == comparable(facade_dry) and dry["mode"] == mode
    assert listing(remote) == files

    in_process = open_table(local).maintenance.compact_data(mode=mode, commit_user="tester").to_json()
    job = run_job(argv, tmp_path / "result.json")
    assert comparable(job) == comparable(in_process)
    assert job["snapshotId"] == job["snapshotBefore"] + 1 and job["skippedBuckets"] == []
    local_state, job_state = table_state(local), table_state(remote)
    assert job_state == {**local_state, "written": job_state["written"]}
    assert job_state["snapshot"][1:] == ("COMPACT", "tester")
    assert len(job_state["written"]) == job["filesWritten"] > 0
    assert len(job_state["added"]) == job["filesWritten"] + job["filesUpgraded"]
    if name == "pk_upgrade":
        assert job["filesUpgraded"] == 2 and job["filesWritten"] > 0
    for root, state in ((local, local_state), (remote, job_state)):
        assert check_pk_table(root, compact_files=state["written"]) == []

    before, after = run_oracle_batch(
        [["read", local, "--snapshot", str(job["snapshotBefore"])], ["read", remote]]
    )
    assert after == before and len(after) > 0


def test_a_bucket_failing_on_an_executor_fails_the_job_typed_and_leaves_no_file(
    paimon_pk_tables: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, _ = paimon_pk_tables("pk_dedup")
    table = Table.open(root)
    plan = open_table(root).maintenance.plan_compact_data(mode="full")
    assert len(plan.units) == 6
    entry = plan.units[-1].rewritten[-1]
    corrupt = table.io.join(table.root, DataFilePaths(table.schema).relative_path(entry))
    Path(corrupt).write_bytes(b"not a parquet file")
    before = listing(root)
    capsys.readouterr()

    code = compact_job.main(["--table", root, "--full", "--parallelism", "2"])

    assert code == 4  # a corrupt data file
    message = next(line for line in capsys.readouterr().err.splitlines() if "lakeformat-job: error: " in line)
    assert entry.file.file_name in message and "not a readable Parquet file" in message
    # Nothing committed; the five other buckets' files (written on the executors) are gone again.
    assert Table.open(root).snapshot_manager.latest_snapshot_id() == plan.snapshot_id
    assert listing(root) == before


class InProcessSubmitHook:
    """Stands in for ``SparkSubmitHook``: runs the job's ``main`` here with the operator's arguments."""

    def __init__(self, application_args: list[str], env_vars: dict[str, str], py_files: str | None) -> None:
        self.args = application_args
        self.env_vars = env_vars

    def submit(self, application: str) -> None:
        assert application.endswith("compact_data.py")
        with pytest.MonkeyPatch.context() as env:
            for key, value in self.env_vars.items():
                env.setenv(key, value)
            assert compact_job.main(self.args) == 0


def test_the_operator_runs_a_primary_key_table_on_spark(
    paimon_pk_tables: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_lakeformat.operators.compact_data import LakeformatCompactDataOperator

    root, _ = paimon_pk_tables("pk_upgrade")
    monkeypatch.setenv("AIRFLOW_CONN_LAKEFORMAT_DEFAULT", json.dumps({"conn_type": "lakeformat"}))
    lake = open_table(root)
    auto = LakeformatCompactDataOperator(task_id="auto", table=root, mode="full", spark_min_files=1)
    assert auto.choose_execution(lake) == "spark", "above the thresholds a primary-key table goes to Spark"
    operator = LakeformatCompactDataOperator(
        task_id="compact", table=root, mode="full", execution="spark", maintenance_lock=False
    )
    submitted: list[list[str]] = []

    def make_hook(*, application_args: list[str], env_vars: dict[str, str], py_files: str | None) -> Any:
        submitted.append(application_args)
        return InProcessSubmitHook(application_args, env_vars, py_files)

    monkeypatch.setattr(operator, "_make_submit_hook", make_hook)
    ti = SimpleNamespace(dag_id="dag", task_id="compact", map_index=-1, try_number=1)
    result = operator.run(cast(Any, {"ti": ti, "run_id": "r1"}), root)

    [args] = submitted
    assert "--full" in args and args[args.index("--commit-user") + 1].endswith("-dag-compact")
    assert (result["execution"], result["mode"], result["primaryKey"]) == ("spark", "full", True)
    table = Table.open(root)
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None and snapshot.id == result["snapshotId"]
    assert snapshot.commit_kind.value == "COMPACT" and snapshot.commit_user.endswith("-dag-compact")
    assert {e.file.level for e in live_entries(table, snapshot)} == {5}
