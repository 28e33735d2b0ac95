"""``table.health()`` on SeaweedFS S3 as on local disk (issue 28 acceptance: both formats, local and S3).

Two tables on the shared SeaweedFS server, made by the builders of
``tests/maintenance/test_health_acceptance.py`` that together carry every problem: a Paimon primary-key table
(level-0 runs, DELETE records, snapshots past retention, small manifests, a partition past
``partition.expiration-time``, a planted orphan) and an Iceberg table (small files, position and equality
deletes, snapshots past retention, small manifests, a planted orphan). Health recommends exactly the
operations that fix them; each runs as ``getattr(table.maintenance, r.operation)(**r.arguments)`` on the
``s3://`` table; then ``health(orphans=True)`` recommends nothing.

S3 modification times are the server's, so the planted orphan cannot be aged as on disk: the orphan
planner's clock reads five days ahead instead (every unused object is then old enough; the format's own age
rule, 1 or 3 days, is what health uses).
"""

from __future__ import annotations

import functools
import time
from typing import Any

import pytest

from airflow_lakeformat.core.iceberg.maintenance import orphan_plan
from airflow_lakeformat.core.paimon.maintenance import orphans
from tests.maintenance.test_health_acceptance import (
    ICEBERG_FIXES,
    PAIMON_FIXES,
    assert_clean,
    fix,
    iceberg_with_every_problem,
    paimon_with_every_problem,
    plant_orphan,
)
from tests.support.seaweedfs import SeaweedFSServer

pytestmark = pytest.mark.s3
FIVE_DAYS = 5 * 86400


@pytest.mark.parametrize("fmt", ["paimon", "iceberg"])
def test_every_problem_on_s3_is_fixed_by_what_health_recommends(
    seaweedfs: SeaweedFSServer, s3_bucket: str, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    for module in (orphans, orphan_plan):
        planner = module.plan_orphan_cleanup
        monkeypatch.setattr(
            module, "plan_orphan_cleanup", functools.partial(planner, clock=lambda: time.time() + FIVE_DAYS)
        )
    storage: dict[str, Any] = seaweedfs.storage_options()
    uri = f"{s3_bucket}/wh/{fmt}_health"
    build = paimon_with_every_problem if fmt == "paimon" else iceberg_with_every_problem
    table = build(uri, storage)
    planted = plant_orphan(table, storage)
    fixes = PAIMON_FIXES if fmt == "paimon" else ICEBERG_FIXES
    health = fix(table, orphans=True)
    assert health.operations == [*fixes, "remove_orphan_files"], health.to_json()["recommendations"]
    assert health.orphans == {"files": 1, "bytes": 100}
    assert not seaweedfs.fs().exists(planted.removeprefix("s3://"))
    after = assert_clean(uri, storage)
    assert after.snapshots["count"] == 1 and after.deletes["deleteRecords"] == 0
