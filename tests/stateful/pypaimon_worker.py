"""Persistent pypaimon worker for the stateful test: JSON lines in on stdin, JSON lines out on stdout.

Run ONLY with the interpreter of the pypaimon virtualenv (``.venv-pypaimon/bin/python``); the main
test process talks to one long-lived instance through :mod:`tests.stateful.worker_client` (pypaimon's
import alone costs about a second, so one process serves a whole test session).

Protocol: one JSON object per line, ``{"op": NAME, ...arguments}``; one answer per line,
``{"ok": true, "result": ...}`` or ``{"ok": false, "error": "...", "type": "ExceptionClass"}``.
Anything pypaimon prints goes to stderr: file descriptor 1 is re-pointed at stderr and the protocol
uses a private duplicate of the original stdout.

Operations (``path`` is a table directory):

    ping                                              -> pypaimon version
    create   path, fields [[name, type]], partition_keys, primary_keys, options
    write    path, rows [{col: json value}], overwrite (null | {key: value}) -> new snapshot id
    tag_create path, name, snapshot_id
    tag_delete path, name
    consumer_set path, consumer_id, next_snapshot     (pypaimon's ConsumerManager.reset_consumer)
    read     path, snapshot | tag | neither (latest)  -> rows, normalised and sorted
    plan     path, snapshot | tag | neither           -> {"snapshotId", "files": [...]} (pypaimon's plan)
    verify   path, snapshots [ids], tags [names]      -> reads and plans of each, errors per item
             [, merge_lone_level0: true]              (primary-key tables: see op_read_merging_level0)

Values are normalised as in ``tests/interop/pypaimon_oracle.py`` (its helpers are imported).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "interop"))

# The protocol channel: a private copy of stdout; fd 1 then points at stderr, so that whatever
# pypaimon, pyarrow or a C library prints cannot corrupt an answer.
_PROTOCOL = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr

import pypaimon_oracle as oracle  # noqa: E402  (after the stdout redirection on purpose)
from pypaimon import CatalogFactory, Schema  # noqa: E402
from pypaimon.consumer.consumer import Consumer  # noqa: E402


def _open(path: str) -> Any:
    return oracle.open_table(path)


def op_ping(_request: dict[str, Any]) -> Any:
    from pypaimon._version import VERSION

    return {"pypaimonVersion": VERSION, "pid": os.getpid()}


def op_create(request: dict[str, Any]) -> Any:
    """Create ``<warehouse>/<db>.db/<name>`` through pypaimon's filesystem catalog."""
    path = os.path.abspath(request["path"])
    db_dir, name = os.path.split(path)
    warehouse, db_name = os.path.split(db_dir)
    if not db_name.endswith(".db"):
        raise ValueError(f"table path must be <warehouse>/<db>.db/<name>, not {path}")
    database = db_name[: -len(".db")]
    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database(database, True)
    fields = [oracle._field(i, n, t) for i, (n, t) in enumerate(request["fields"])]
    schema = Schema(
        fields,
        partition_keys=list(request.get("partition_keys") or []),
        primary_keys=list(request.get("primary_keys") or []),
        options=dict(request.get("options") or {}),
    )
    catalog.create_table(f"{database}.{name}", schema, False)
    return {"path": path}


def op_write(request: dict[str, Any]) -> Any:
    table = _open(request["path"])
    types = oracle._column_types(table)
    rows = [{n: oracle.denormalize_typed(row.get(n), t) for n, t in types.items()} for row in request["rows"]]
    before = oracle._snapshot_ids(request["path"])
    oracle._write(table, rows, overwrite=request.get("overwrite"))
    after = oracle._snapshot_ids(request["path"])
    return {"snapshotId": after[-1] if after else None, "previous": before[-1] if before else None}


def op_tag_create(request: dict[str, Any]) -> Any:
    table = _open(request["path"])
    table.create_tag(request["name"], snapshot_id=int(request["snapshot_id"]))
    return None


def op_tag_delete(request: dict[str, Any]) -> Any:
    return bool(_open(request["path"]).delete_tag(request["name"]))


def op_consumer_set(request: dict[str, Any]) -> Any:
    table = _open(request["path"])
    table.consumer_manager().reset_consumer(
        request["consumer_id"], Consumer(next_snapshot=int(request["next_snapshot"]))
    )
    return None


def _args(request: dict[str, Any]) -> argparse.Namespace:
    return argparse.Namespace(
        table_path=request["path"], snapshot=request.get("snapshot"), tag=request.get("tag"), all=False
    )


def op_read(request: dict[str, Any]) -> Any:
    return oracle.cmd_read(_args(request))


def op_plan(request: dict[str, Any]) -> Any:
    return oracle.cmd_plan(_args(request))


def op_read_merging_level0(request: dict[str, Any]) -> Any:
    """``read``, but a split of one level-0 file goes through the merge reader instead of the raw path.

    pypaimon 2.1's writer records ``_DELETE_ROW_COUNT = 0`` for a level-0 file holding -U/-D rows, and its
    split generator (as Java's ``MergeTreeSplitGenerator``) reads a lone file without delete rows raw, so it
    returns those retractions as rows; Java's writer counts them, so Java merges such a file and drops them.
    Only lone level-0 splits are re-routed: a file at a higher level (a compaction's output or upgrade) keeps
    the raw path, so a wrong count there still shows."""
    table = oracle.open_table(request["path"])
    pinned, _expected = oracle._travel(table, request.get("snapshot"), request.get("tag"))
    builder = pinned.new_read_builder()
    splits = builder.new_scan().plan().splits()
    for split in splits:
        if len(split.files) == 1 and split.files[0].level == 0:
            split.raw_convertible = False
    types = oracle._column_types(pinned)
    arrow_table = builder.new_read().to_arrow(splits)
    rows = [] if arrow_table is None else arrow_table.to_pylist()
    normalized = [
        {name: oracle.normalize_typed(value, types.get(name, "")) for name, value in row.items()}
        for row in rows
    ]
    return sorted(normalized, key=oracle._sort_key)


def op_verify(request: dict[str, Any]) -> Any:
    """Rows and plan of every given snapshot and tag; a failure is reported per item, not raised."""
    out: dict[str, Any] = {"snapshots": {}, "tags": {}}
    path = request["path"]
    read = op_read_merging_level0 if request.get("merge_lone_level0") else op_read
    items = [("snapshots", str(s), {"snapshot": int(s)}) for s in request.get("snapshots", [])]
    items += [("tags", t, {"tag": t}) for t in request.get("tags", [])]
    for section, key, selector in items:
        sub = {"path": path, **selector}
        try:
            out[section][key] = {"rows": read(sub), "plan": op_plan(sub)}
        except Exception as exc:  # reported to the caller as a violation
            out[section][key] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


OPS = {name[len("op_") :]: fn for name, fn in globals().items() if name.startswith("op_")}


def main() -> int:
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            result = OPS[request["op"]](request)
            answer = {"ok": True, "result": result}
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            answer = {"ok": False, "error": f"{exc}", "type": type(exc).__name__}
        _PROTOCOL.write(json.dumps(answer, ensure_ascii=False, sort_keys=True, allow_nan=False) + "\n")
        _PROTOCOL.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
