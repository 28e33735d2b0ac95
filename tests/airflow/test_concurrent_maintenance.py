"""Two real Airflow maintenance runs of one table at the same time: one waits or fails cleanly; nothing is
deleted twice.

Two Airflow installations (two AIRFLOW_HOMEs, each with its own SQLite metadata database, as two
deployments would have) each run a DAG of ``dags/lakeformat_test_concurrent.py`` in a subprocess:
``arrive`` (a barrier) >> expire snapshots >> remove orphan files, on the same table. Nothing is shared
but the table's storage, where the maintenance lock lives. Variant ``waits`` sets ``lock_wait``, variant
``fails`` does not (and has no retries); each variant has a table of its own, and each installation runs
both variants one after the other (starting Airflow in a process costs far more than a run).

Which run gets the lock first is up to the race; the tests find out from the lease files and check
that run against the other.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_lakeformat.core.maintenance.lock import LOCK_DIR, LOCK_PREFIX, RELEASED_SUFFIX
from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.maintenance.references import snapshot_references
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.data_files import write_data_files
from tests.airflow.helpers import TEST_DAGS, append, make_table

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

DRIVER = Path(__file__).parent / "run_dag_process.py"
RESULT_PREFIX = "LAKEFORMAT_TEST_RUN "
DAG_FILE = "lakeformat_test_concurrent"
RUNS = ("a", "b")
VARIANTS = ("waits", "fails")
TASKS = ("expire", "remove_orphans")
# Generous: a stuck run is reported by its own barrier or hold timeout (120 s) well before this.
PROCESS_TIMEOUT = 600


@dataclass
class Contention:
    """One variant: its table, the files before and after, and what each run reported."""

    root: Path
    orphan: Path
    before: set[str]
    after: set[str]
    runs: dict[str, dict[str, Any]]  # "a" / "b" -> the driver's report
    barrier: Path

    @property
    def disappeared(self) -> set[str]:
        return self.before - self.after

    def owner(self, run: str, task_id: str) -> str:
        report = self.runs[run]
        return f"airflow {report['dagId']}/{report['runId']}/{task_id} try 1"

    def marker(self, name: str) -> dict[str, Any]:
        return dict(json.loads((self.barrier / name).read_text()))


def table_files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def leases(root: Path) -> list[dict[str, Any]]:
    """Every lock generation with its owner, acquiredAt and releasedAt (None while held), in order."""
    directory = root / LOCK_DIR
    found = []
    for path in directory.iterdir():
        generation = path.name[len(LOCK_PREFIX) :]
        if path.name.startswith(LOCK_PREFIX) and generation.isdigit():
            lease = json.loads(path.read_text())
            released = path.with_name(path.name + RELEASED_SUFFIX)
            lease["generation"] = int(generation)
            lease["releasedAt"] = (
                json.loads(released.read_text())["releasedAt"] if released.exists() else None
            )
            found.append(lease)
    return sorted(found, key=lambda lease: lease["generation"])


def build_table(root: Path) -> Path:
    """Snapshots 1-3 appended (partition 2024-01-02, then twice 2024-01-01), 4 overwrites 2024-01-01;
    plus an old orphan file. Expiring 1-3 deletes the two data files the overwrite replaced."""
    table = make_table(str(root))
    append(table, 2, dt="2024-01-02")
    append(table, 3)
    append(table, 4)
    committer = Committer(table, "test-overwrite")
    replacement = write_data_files(table, pa.table({"dt": ["2024-01-01"] * 5, "v": list(range(5))}))
    committer.commit([*committer.overwrite_entries({"dt": "2024-01-01"}), *replacement])
    orphan = root / "dt=2024-01-01" / "bucket-0" / "data-orphan-0.parquet"
    orphan.write_bytes(b"not referenced by any snapshot")
    two_hours_ago = time.time() - 7200
    os.utime(orphan, (two_hours_ago, two_hours_ago))
    return orphan


def airflow_env(home: Path, warehouse: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_"))}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(TEST_DAGS),
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
            "AIRFLOW_CONN_LAKEFORMAT_DEFAULT": json.dumps(
                {"conn_type": "lakeformat", "host": str(warehouse)}
            ),
        }
    )
    return env


@pytest.fixture(scope="module")
def contentions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Contention]:
    base = tmp_path_factory.mktemp("concurrent")
    warehouse = base / "warehouse"
    migrated = base / "migrated"
    migrated.mkdir()
    # One metadata database, migrated once and copied: each installation gets its own file.
    done = subprocess.run(
        [sys.executable, "-c", "from airflow.utils import db; db.resetdb()"],
        env=airflow_env(migrated, warehouse),
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-3000:]

    tables: dict[str, tuple[Path, Path, Path]] = {}
    for variant in VARIANTS:
        root = warehouse / "db.db" / variant
        barrier = base / f"barrier-{variant}"
        barrier.mkdir()
        tables[variant] = (root, build_table(root), barrier)
    before = {variant: table_files(root) for variant, (root, _, _) in tables.items()}

    processes: dict[str, tuple[subprocess.Popen[str], Path]] = {}
    for run in RUNS:
        home = base / f"home-{run}"
        home.mkdir()
        shutil.copyfile(migrated / "airflow.db", home / "airflow.db")
        args = [sys.executable, str(DRIVER), DAG_FILE]
        for variant, (_, _, barrier) in tables.items():
            conf = {"table": f"db.{variant}", "barrier": str(barrier), "run": run}
            args += [f"{variant}_{run}", json.dumps(conf)]
        log = home / "driver.log"  # a file, not a pipe: a full pipe would stall a run at the barrier
        with log.open("w") as out:
            process = subprocess.Popen(
                args, env=airflow_env(home, warehouse), stdout=out, stderr=subprocess.STDOUT, text=True
            )
        processes[run] = (process, log)

    reports: dict[str, dict[str, dict[str, Any]]] = {variant: {} for variant in VARIANTS}
    try:
        for run, (process, log) in processes.items():
            code = process.wait(timeout=PROCESS_TIMEOUT)
            text = log.read_text()
            lines = [
                json.loads(line[len(RESULT_PREFIX) :])
                for line in text.splitlines()
                if line.startswith(RESULT_PREFIX)
            ]
            assert code == 0 and len(lines) == len(VARIANTS), f"run {run} exited {code}:\n{text[-5000:]}"
            for variant, report in zip(VARIANTS, lines, strict=True):
                assert report["dagId"] == f"lakeformat_test_concurrent_{variant}_{run}"
                reports[variant][run] = report
    finally:
        for process, _ in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()

    return {
        variant: Contention(root, orphan, before[variant], table_files(root), reports[variant], barrier)
        for variant, (root, orphan, barrier) in tables.items()
    }


def deleted_by(result: dict[str, Any]) -> int:
    assert result["failed"] == [] and result["alreadyMissing"] == 0, result
    return sum(result["files"].values())


def check_table_after_expiry(contention: Contention) -> None:
    """Snapshots 1-3 expired, the orphan gone, and everything snapshot 4 uses still there."""
    root = contention.root
    table = Table.open(str(root))
    manager = table.snapshot_manager
    assert (manager.earliest_snapshot_id(), manager.latest_snapshot_id()) == (4, 4)
    latest = manager.latest_snapshot()
    assert latest is not None and latest.total_record_count == 2 + 5
    assert not contention.orphan.exists()
    assert {"snapshot/snapshot-1", "snapshot/snapshot-2", "snapshot/snapshot-3"} <= contention.disappeared
    paths = DataFilePaths(table.schema)
    live = [paths.relative_path(entry) for entry in live_entries(table, latest)]
    metadata = [f"manifest/{name}" for name in snapshot_references(table, latest).all_file_names()]
    assert len(live) == 2 and len(metadata) >= 3
    for path in [*live, *metadata, "snapshot/snapshot-4"]:
        assert (root / path).is_file(), f"{path} is used by snapshot 4 but was deleted"
    # Expiry deleted the two data files the overwrite replaced; the orphan is the third data file gone.
    gone_data = {p for p in contention.disappeared if p.startswith("dt=")}
    assert len(gone_data) == 3 and str(contention.orphan.relative_to(root)) in gone_data
    # Maintenance added nothing to the table but the lock's own files and expiry's EARLIEST hint.
    added = {p for p in contention.after - contention.before if not p.startswith(f"{LOCK_DIR}/")}
    assert added <= {"snapshot/EARLIEST"}


def test_waiting_runs_take_turns_and_delete_each_file_once(contentions: dict[str, Contention]) -> None:
    contention = contentions["waits"]
    for run, report in contention.runs.items():
        assert report["state"] == "success", (run, report["tasks"])
        assert report["tasks"] == {
            "arrive": ["success", 1],
            "expire": ["success", 1],
            "remove_orphans": ["success", 1],
        }

    # Four generations, one per maintenance task of each run, each released before the next began.
    found = leases(contention.root)
    assert [lease["generation"] for lease in found] == [1, 2, 3, 4]
    owners = {contention.owner(run, task_id): (run, task_id) for run in RUNS for task_id in TASKS}
    assert sorted(lease["owner"] for lease in found) == sorted(owners)
    for lease in found:
        assert lease["releasedAt"] is not None and lease["acquiredAt"] <= lease["releasedAt"], lease
    for earlier, later in itertools.pairwise(found):
        assert earlier["releasedAt"] <= later["acquiredAt"], (earlier, later)

    # The run that expired first expired snapshots 1-3; the other, after it, found nothing to expire.
    order = [owners[lease["owner"]] for lease in found]
    (first, _), (second, _) = [entry for entry in order if entry[1] == "expire"]
    first_expiry = contention.runs[first]["xcoms"]["expire"]
    second_expiry = contention.runs[second]["xcoms"]["expire"]
    assert (first_expiry["snapshotsExpired"], first_expiry["earliestAfter"]) == ([1, 2, 3], 4)
    assert (second_expiry["snapshotsExpired"], second_expiry["earliestBefore"]) == ([], 4)
    assert deleted_by(second_expiry) == 0
    # The second run asked for the lock while the first held it, and got it only after the release.
    first_lease, second_lease = (found[order.index((run, "expire"))] for run in (first, second))
    asked = contention.marker(f"{second}.acquiring")["at"]
    assert asked < first_lease["releasedAt"] <= second_lease["acquiredAt"]

    # Likewise orphan cleanup: whichever run cleaned first deleted the orphan, the other nothing.
    (first_clean, _), (second_clean, _) = [entry for entry in order if entry[1] == "remove_orphans"]
    first_orphans = contention.runs[first_clean]["xcoms"]["remove_orphans"]
    second_orphans = contention.runs[second_clean]["xcoms"]["remove_orphans"]
    assert (first_orphans["orphans"], deleted_by(first_orphans)) == (1, 1)
    assert (second_orphans["orphans"], deleted_by(second_orphans)) == (0, 0)

    # Nothing deleted twice: the deletions both runs report add up to exactly the files that are gone.
    reported = sum(deleted_by(contention.runs[run]["xcoms"][task_id]) for run in RUNS for task_id in TASKS)
    assert reported == deleted_by(first_expiry) + 1 == len(contention.disappeared)
    check_table_after_expiry(contention)


def test_a_run_that_finds_the_lock_held_fails_cleanly_and_deletes_nothing(
    contentions: dict[str, Contention],
) -> None:
    contention = contentions["fails"]
    found = leases(contention.root)
    # Only the winner ever held the lock: generation 1 for its expiry, 2 for its orphan cleanup.
    assert len(found) == 2
    winner = next(run for run in RUNS if found[0]["owner"] == contention.owner(run, "expire"))
    (loser,) = set(RUNS) - {winner}
    assert [lease["owner"] for lease in found] == [contention.owner(winner, t) for t in TASKS]
    assert (
        found[0]["acquiredAt"] <= found[0]["releasedAt"] <= found[1]["acquiredAt"] <= found[1]["releasedAt"]
    )

    won, lost = contention.runs[winner], contention.runs[loser]
    assert won["state"] == "success"
    assert won["tasks"] == {
        "arrive": ["success", 1],
        "expire": ["success", 1],
        "remove_orphans": ["success", 1],
    }
    assert lost["state"] == "failed"
    assert lost["tasks"]["arrive"] == ["success", 1]
    assert lost["tasks"]["expire"] == ["failed", 1], "retries=0: one try, no retry"
    assert lost["tasks"]["remove_orphans"][0] == "upstream_failed", "the orphan cleanup never ran"
    assert set(lost["xcoms"]) == set(), "neither maintenance task of the loser returned a result"

    # The loser failed with the holder named, while the holder held generation 1.
    failure = contention.marker(f"{loser}.failed")
    lease_file = contention.root / LOCK_DIR / f"{LOCK_PREFIX}1"
    assert failure["text"].startswith(
        f"{contention.root}: maintenance lock is held by {contention.owner(winner, 'expire')!r} until "
    )
    assert failure["text"].endswith(f"; lease file {lease_file}")
    assert found[0]["acquiredAt"] <= failure["at"] <= found[0]["releasedAt"]

    # Everything that is gone was deleted once, by the winner: expiry 1-3 and the orphan.
    expiry, orphans = won["xcoms"]["expire"], won["xcoms"]["remove_orphans"]
    assert (expiry["snapshotsExpired"], expiry["earliestAfter"]) == ([1, 2, 3], 4)
    assert (orphans["orphans"], deleted_by(orphans)) == (1, 1)
    assert deleted_by(expiry) + deleted_by(orphans) == len(contention.disappeared)
    check_table_after_expiry(contention)
