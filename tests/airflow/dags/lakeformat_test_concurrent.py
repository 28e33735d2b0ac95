"""Test DAGs: two maintenance runs of one table at the same time, from two Airflow installations.

``tests/airflow/test_concurrent_maintenance.py`` runs DAG ``..._<variant>_a`` in one Airflow home and
``..._<variant>_b`` in another (two deployments, or two DAGs, maintaining one table: the lock lives on
the table's storage, nothing is shared through Airflow). Each run: ``arrive`` (a barrier, so both
reach maintenance together) >> ``expire`` >> ``remove_orphans``. Variant ``waits`` sets ``lock_wait``;
variant ``fails`` does not, and has no retries.

Both runs and the test talk through marker files in the ``barrier`` directory (a param):
``<run>.arrived``, ``<run>.acquiring`` (written just before the expire step asks for the lock),
``<run>.held`` (its expire step got the lock) and ``<run>.failed`` (the exception text of a failed task).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Context, task

from airflow_lakeformat.core.maintenance.lock import MaintenanceLock
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.operators.expire_snapshots import LakeformatExpireSnapshotsOperator
from airflow_lakeformat.operators.remove_orphan_files import LakeformatRemoveOrphanFilesOperator

RUNS = ("a", "b")
VARIANTS = ("waits", "fails")
BARRIER_TIMEOUT = 120.0
# Once the other run has asked for the lock, the holder keeps it this much longer, so that the other
# run's first attempts (lock_poll_interval apart) find it held and the lock_wait path is what runs.
GRACE = 1.0
PARAMS: dict[str, Any] = {
    "table": "db.events",
    "barrier": "",
    "run": "",
    "older_than": "1 h",
}


def _marker(barrier: str, name: str, text: str = "") -> None:
    path = Path(barrier) / name
    temporary = path.with_name(f"{name}.tmp")
    temporary.write_text(json.dumps({"at": int(time.time() * 1000), "text": text}))
    temporary.rename(path)  # readers never see a half-written marker


def _names(barrier: str) -> list[str]:
    return sorted(p.name for p in Path(barrier).iterdir())


def _wait_for(barrier: str, done: Callable[[list[str]], bool], what: str) -> None:
    deadline = time.monotonic() + BARRIER_TIMEOUT
    while not done(_names(barrier)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {BARRIER_TIMEOUT} s")
        time.sleep(0.02)


def remember_failure(context: Context) -> None:
    params = context["params"]
    _marker(params["barrier"], f"{params['run']}.failed", str(context["exception"]))


class HoldingExpireSnapshotsOperator(LakeformatExpireSnapshotsOperator):
    """Snapshot expiry that keeps the maintenance lock until the other run has asked for it.

    Without this, which run meets a held lock depends on timing: the expiry of a small table takes
    milliseconds, so the second run could find the lock already released and never wait (or fail).
    The base class holds the lock around ``run_local``, so holding here is holding the lock. The first
    holder keeps it until the other run wrote ``<other>.<hold_until>``: ``acquiring`` (variant
    ``waits``, then GRACE more) or ``failed`` (variant ``fails``: the other run failed on the held lock).
    """

    def __init__(self, *, hold_until: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hold_until = hold_until

    @contextlib.contextmanager
    def locked(self, context: Context, table: Table) -> Iterator[MaintenanceLock | None]:
        params = context["params"]
        _marker(params["barrier"], f"{params['run']}.acquiring")
        with super().locked(context, table) as lock:
            yield lock

    def run_local(self, context: Context, table: Table) -> dict[str, Any]:
        params = context["params"]
        barrier, own = params["barrier"], params["run"]
        # Only the first holder waits for the other run; the second gets the lock after it anyway.
        first = not any(n.endswith(".held") for n in _names(barrier))
        _marker(barrier, f"{own}.held")
        result = super().run_local(context, table)
        if first:
            suffix = f".{self.hold_until}"
            _wait_for(
                barrier,
                lambda names: any(n.endswith(suffix) and not n.startswith(f"{own}.") for n in names),
                f"run {own} holding the lock: the other run never wrote a {suffix} marker",
            )
            if self.hold_until == "acquiring":
                time.sleep(GRACE)
        return result


@task
def arrive(params: dict[str, Any] | None = None) -> None:
    """Wait until both runs are here, so both ask for the maintenance lock at about the same time."""
    assert params is not None
    _marker(params["barrier"], f"{params['run']}.arrived")
    _wait_for(
        params["barrier"],
        lambda names: sum(n.endswith(".arrived") for n in names) >= len(RUNS),
        f"run {params['run']} at the barrier",
    )


def _build(variant: str, run: str) -> DAG:
    common: dict[str, Any] = {"retries": 0, "on_failure_callback": remember_failure, "dry_run": False}
    if variant == "waits":
        common |= {"lock_wait": timedelta(minutes=2), "lock_poll_interval": 0.2}
    hold_until = "acquiring" if variant == "waits" else "failed"
    with DAG(f"lakeformat_test_concurrent_{variant}_{run}", schedule=None, params=PARAMS) as dag:
        expire = HoldingExpireSnapshotsOperator(
            task_id="expire",
            table="{{ params.table }}",
            execution="local",
            retain_min=1,
            older_than="1 ms",
            hold_until=hold_until,
            **common,
        )
        orphans = LakeformatRemoveOrphanFilesOperator(
            task_id="remove_orphans",
            table="{{ params.table }}",
            execution="local",
            older_than="{{ params.older_than }}",
            **common,
        )
        arrive() >> expire >> orphans
    return dag


DAGS = {f"{variant}_{run}": _build(variant, run) for variant in VARIANTS for run in RUNS}
