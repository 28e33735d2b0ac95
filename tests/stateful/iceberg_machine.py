"""A model-based stateful test of Iceberg tables: Java Iceberg 1.10.2 writes interleaved with our maintenance.

One Iceberg v2 table per example (its own warehouse), created by Java through Spark SQL, in the Hadoop catalog
``hc`` (``hc.db.t``, which we open by its root) or the JDBC catalog ``jc`` (``jc.jdb.t``, which we open through
pyiceberg's SqlCatalog on the same SQLite file). Steps are sequential, so the Hadoop layout's unsafe mixed-writer
commit (tests/interop/test_iceberg_concurrency_interop.py) cannot happen; both catalogs are drawn.

Steps: Java writes through the oracle's ``sql`` command (insert, merge-on-read or copy-on-write delete, update,
MERGE INTO, INSERT OVERWRITE static and dynamic, on ``main`` and on branches; tags and branches created and
dropped; ``rollback_to_snapshot``); our operations through the public facade (``open_table(...)``,
``table.writes().write_rows``, ``table.maintenance.compact_data`` / ``compact_deletes`` / ``compact_manifests`` /
``expire_snapshots`` / ``remove_orphan_files``, each also as a dry run); orphans planted and files aged; and
crashes: an operation of ours killed at its k-th storage mutation (any of our FileIO's, or pyiceberg's file
creations and deletions; once dead, every later mutation dies too, so no clean-up runs), then run again.

After EVERY step one oracle request (the step's SQL write first, when Java writes) reads Java's refs, snapshots
and the rows of every ref (one ``UNION ALL`` query); after expiry, orphan cleanup, crashes and every
``FULL_READ_EVERY`` steps it reads every retained snapshot's rows too. They are compared with the model
(``iceberg_model.py``): rows per ref and per snapshot; the snapshots an expiry removes; a dry run changes no file
(sizes and mtimes) and no catalog row; maintenance keeps every snapshot's rows; orphan cleanup deletes no file
Java's metadata tables reach, every planted old orphan and every old file they don't reach (a crashed run's
leftovers), and no fresh file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from airflow_lakeformat.core.tables import open_table
from tests.stateful.iceberg_model import (
    IcebergModel,
    Ref,
    Rows,
    canonical_rows,
    condition,
    decode,
    delete,
    describe_rows_difference,
    literal,
    merge,
    overwrite,
    update,
    values,
)
from tests.stateful.iceberg_support import (
    KNOWN_DEFECTS,
    NAMES,
    OLD_SECONDS,
    STATS,
    Expect,
    SimulatedCrash,
    _count,
    check_orphan_cleanup,
    count_example,
    crash_at,
    indexes,
    listing,
    local_path,
    predicates,
    reconcile,
    row_strategy,
    rows_strategy,
    skipped_defect,
    targets,
)
from tests.support.java_iceberg import JavaIcebergOracleError, run_oracle

FULL_READ_EVERY = 8
__all__ = ["KNOWN_DEFECTS", "STATS", "IcebergTableMachine"]


class IcebergTableMachine(RuleBasedStateMachine):
    """Drives one Iceberg table and checks it against the model and Java after every step."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="lakeformat-stateful-iceberg-"))
        self.warehouse = self.tmp / "warehouse"
        self.catalog_db = self.tmp / "catalog.db"
        self.model: IcebergModel | None = None
        self.planted: dict[str, str] = {}  # path relative to the table root -> "old" | "fresh"
        self.identifier = 0
        self.steps = 0
        count_example()

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- setup -------------------------------------------------------------------------------------------------

    @initialize(
        catalog=st.sampled_from(["hadoop", "hadoop", "sql"]),
        partitioned=st.booleans(),
        mode=st.sampled_from(["merge-on-read", "merge-on-read", "copy-on-write"]),
        rows=rows_strategy,
    )
    def create_the_table(
        self, catalog: str, partitioned: bool, mode: str, rows: list[dict[str, Any]]
    ) -> None:
        _count("create_the_table")
        self.catalog = catalog
        namespace = "jdb" if catalog == "sql" else "db"
        self.table_name = f"{'jc' if catalog == 'sql' else 'hc'}.{namespace}.t"
        self.identifier_in_catalog = f"{namespace}.t"
        self.root = self.warehouse / namespace / "t"
        self.model = IcebergModel(partitioned=partitioned)
        properties = {
            "format-version": "2",
            "write.delete.mode": mode,
            "write.update.mode": mode,
            "write.merge.mode": mode,
            "commit.manifest.min-count-to-merge": "3",
        }
        props = ", ".join(f"'{k}'='{v}'" for k, v in properties.items())
        statements = ["CREATE NAMESPACE IF NOT EXISTS jc.jdb"] if catalog == "sql" else []
        statements += [
            f"CREATE TABLE {self.table_name} (k INT, p STRING, v STRING) USING iceberg"
            f"{' PARTITIONED BY (p)' if partitioned else ''} TBLPROPERTIES ({props})",
            f"INSERT INTO {self.table_name} VALUES {values(rows)}",
        ]
        self._step(
            statements, Expect(created={"main": Ref("BRANCH", 0)}, moves={"main": canonical_rows(rows)})
        )

    # -- helpers -----------------------------------------------------------------------------------------------

    @property
    def m(self) -> IcebergModel:
        assert self.model is not None
        return self.model

    def _branch(self, target: str) -> str | None:
        """The table name a write to ``target`` uses, or None when that branch does not exist."""
        if target == "main":
            return self.table_name
        ref = self.m.refs.get(target)
        return f"{self.table_name}.branch_{target}" if ref is not None and ref.kind == "BRANCH" else None

    def _known(self, index: int) -> int:
        """A snapshot whose rows the model knows, by index."""
        ids = sorted(i for i, s in self.m.snapshots.items() if s.rows is not None)
        return ids[index % len(ids)]

    def _oracle(self, statements: list[str], catalog_db: bool = True) -> list[Any]:
        argv = [x for statement in statements for x in ("--statement", statement)]
        result: list[Any] = run_oracle(
            "sql", *argv, warehouse=self.warehouse, catalog_db=self.catalog_db if catalog_db else None
        )
        return result

    @contextlib.contextmanager
    def _ours(self) -> Iterator[Any]:
        """Our table, opened through the facade. Before it, on a JDBC table, one request that does not load
        ``jc`` makes the oracle close its catalogs: its pooled SQLite connection holds a lock between requests
        (our SqlCatalog commit then fails with "database is locked"), a property of the shared SQLite file."""
        if self.catalog == "sql":
            self._oracle(["SELECT 1"], catalog_db=False)
            table = open_table(
                self.identifier_in_catalog,
                catalog="jc",
                catalog_properties={
                    "type": "sql",
                    "uri": f"sqlite:///{self.catalog_db}",
                    "warehouse": self.warehouse.as_uri(),
                },
            )
        else:
            table = open_table(str(self.root))
        try:
            yield table
        finally:
            engine = getattr(table.native.table.catalog, "engine", None)
            if engine is not None:
                engine.dispose()

    def _state_files(self) -> dict[str, Any]:
        files: dict[str, Any] = dict(listing(self.root))
        if self.catalog_db.exists():
            files["<catalog.db>"] = hashlib.sha256(self.catalog_db.read_bytes()).hexdigest()
        return files

    # -- the step: one oracle request, then the comparison ---------------------------------------------------

    def _step(self, statements: list[str], expect: Expect) -> list[Any]:
        """Run ``statements`` (Java's write, if any) and Java's reads in one request; compare with the model."""
        self.steps += 1
        STATS["checked"] += 1
        m, t = self.m, self.table_name
        refs_after = (set(m.refs) - expect.dropped) | set(expect.created)
        full = expect.full or self.steps % FULL_READ_EVERY == 0
        retained = set(m.snapshots) - set().union(*expect.gone) if full else set()
        checked = sorted(i for i in retained if m.snapshots[i].rows is not None)
        selects = [f"SELECT '{n}' AS ref, k, p, v FROM {t} VERSION AS OF '{n}'" for n in sorted(refs_after)]
        selects += [f"SELECT '{i}' AS ref, k, p, v FROM {t} VERSION AS OF {i}" for i in checked]
        reads = [
            f"SELECT name, type, snapshot_id, min_snapshots_to_keep FROM {t}.refs",
            f"SELECT snapshot_id, parent_id, operation, unix_millis(committed_at) AS ts FROM {t}.snapshots",
            " UNION ALL ".join(selects),
        ]
        try:
            results = self._oracle(statements + reads + expect.extra)
        except JavaIcebergOracleError as exc:
            if not statements:  # our step left a table Java cannot read (a missing file, a bad ref...)
                raise AssertionError(
                    f"Java cannot read the table after this step: {str(exc)[-1500:]}"
                ) from exc
            raise
        base = len(statements)
        java_refs = {
            r["name"]: Ref(r["type"], r["snapshot_id"], r["min_snapshots_to_keep"]) for r in results[base]
        }
        java_snaps = {s["snapshot_id"]: s for s in results[base + 1]}
        reconcile(m, expect, java_refs, java_snaps)
        by_ref: dict[str, list[dict[str, Any]]] = {}
        for row in results[base + 2]:
            by_ref.setdefault(row.pop("ref"), []).append(row)
        for name in sorted(refs_after):
            want = m.snapshots[m.refs[name].snapshot_id].rows
            got = canonical_rows(by_ref.get(name, []))
            assert want is None or got == want, describe_rows_difference(f"ref {name}", got, want)
        for snapshot_id in checked:
            want = m.snapshots[snapshot_id].rows
            got = canonical_rows(by_ref.get(str(snapshot_id), []))
            assert got == want, describe_rows_difference(f"snapshot {snapshot_id}", got, want or ())
        return results[base + 3 :]

    # -- Java writes -------------------------------------------------------------------------------------------

    def _java_write(self, target: str, statements: list[str], rows: Rows) -> None:
        expect = Expect(moves={target: rows}, may_stay=True, stay_means_no_change=True)
        self._step(statements, expect)

    @rule(branch=targets, rows=rows_strategy)
    def java_insert(self, branch: str, rows: list[dict[str, Any]]) -> None:
        _count("java_insert")
        table = self._branch(branch)
        if table is None:
            return
        new = canonical_rows(decode(self.m.rows(branch)) + rows)
        self._java_write(branch, [f"INSERT INTO {table} VALUES {values(rows)}"], new)

    @rule(branch=targets, predicate=predicates)
    def java_delete(self, branch: str, predicate: tuple[str, Any]) -> None:
        _count("java_delete")
        table = self._branch(branch)
        if table is None:
            return
        new = delete(self.m.rows(branch), predicate)
        self._java_write(branch, [f"DELETE FROM {table} WHERE {condition(predicate)}"], new)

    @rule(
        branch=targets,
        predicate=predicates,
        column=st.sampled_from(["v", "p"]),
        value=st.sampled_from([None, "a", "z"]),
    )
    def java_update(self, branch: str, predicate: tuple[str, Any], column: str, value: Any) -> None:
        _count("java_update")
        table = self._branch(branch)
        if table is None:
            return
        new = update(self.m.rows(branch), predicate, column, value)
        sql = f"UPDATE {table} SET {column} = {literal(value)} WHERE {condition(predicate)}"
        self._java_write(branch, [sql], new)

    @rule(
        branch=targets,
        source=st.lists(row_strategy, min_size=1, max_size=3, unique_by=lambda r: r["k"]),
        matched=st.sampled_from(["update", "delete"]),
    )
    def java_merge(self, branch: str, source: list[dict[str, Any]], matched: str) -> None:
        _count("java_merge")
        table = self._branch(branch)
        if table is None:
            return
        new = merge(self.m.rows(branch), source, matched)
        action = "UPDATE SET t.v = s.v" if matched == "update" else "DELETE"
        sql = (
            f"MERGE INTO {table} t USING (SELECT * FROM VALUES {values(source)} AS s(k, p, v)) s ON t.k = s.k "
            f"WHEN MATCHED THEN {action} WHEN NOT MATCHED THEN INSERT *"
        )
        self._java_write(branch, [sql], new)

    @rule(
        branch=targets,
        rows=rows_strategy,
        mode=st.sampled_from(["dynamic", "static", "static-all"]),
        partition=st.sampled_from(["a", "b"]),
    )
    def java_overwrite(self, branch: str, rows: list[dict[str, Any]], mode: str, partition: str) -> None:
        _count("java_overwrite")
        table = self._branch(branch)
        if table is None:
            return
        if mode == "static" and not self.m.partitioned:
            mode = "static-all"
        if mode == "static":
            rows = [{**r, "p": partition} for r in rows]
            sql = [
                f"INSERT OVERWRITE {table} PARTITION (p = {literal(partition)}) VALUES {values(rows, ('k', 'v'))}"
            ]
        else:
            sql = [f"INSERT OVERWRITE {table} VALUES {values(rows)}"]
            if mode == "dynamic":
                sql.insert(0, "SET spark.sql.sources.partitionOverwriteMode=dynamic")
        new = overwrite(self.m.rows(branch), rows, mode, self.m.partitioned, partition)
        self._java_write(branch, sql, new)

    @rule(name=st.sampled_from(NAMES), index=indexes, retention=st.sampled_from([None, 2, 3]))
    def java_create_ref(self, name: str, index: int, retention: int | None) -> None:
        _count("java_create_ref")
        if name in self.m.refs:
            return
        snapshot_id = self._known(index)
        kind = "TAG" if name.startswith("t") else "BRANCH"
        sql = f"ALTER TABLE {self.table_name} CREATE {kind} {name} AS OF VERSION {snapshot_id}"
        keep = retention if kind == "BRANCH" else None
        if keep is not None:
            sql += f" WITH SNAPSHOT RETENTION {keep} SNAPSHOTS"
        self._step([sql], Expect(created={name: Ref(kind, snapshot_id, keep)}))

    @rule(name=st.sampled_from(NAMES))
    def java_drop_ref(self, name: str) -> None:
        _count("java_drop_ref")
        ref = self.m.refs.get(name)
        if ref is None:
            return
        self._step([f"ALTER TABLE {self.table_name} DROP {ref.kind} {name}"], Expect(dropped={name}))

    @rule(index=indexes)
    def java_rollback_main(self, index: int) -> None:
        _count("java_rollback_main")
        ancestors = [
            i
            for i in self.m.ancestors(self.m.refs["main"].snapshot_id)[1:]
            if self.m.snapshots[i].rows is not None
        ]
        if not ancestors:
            return
        target = ancestors[index % len(ancestors)]
        catalog = self.table_name.split(".")[0]
        sql = f"CALL {catalog}.system.rollback_to_snapshot('{self.identifier_in_catalog}', {target})"
        self._step([sql], Expect(set_to={"main": target}))

    # -- our operations ----------------------------------------------------------------------------------------

    def _append(self, table: Any, rows: list[dict[str, Any]], identifier: int) -> dict[str, Any]:
        data = pa.Table.from_pylist(
            rows, schema=pa.schema([("k", pa.int32()), ("p", pa.string()), ("v", pa.string())])
        )
        result: dict[str, Any] = table.writes().write_rows(
            data, commit_user="stateful-machine", commit_identifier=identifier
        )
        return result

    @rule(rows=rows_strategy)
    def our_append(self, rows: list[dict[str, Any]]) -> None:
        _count("our_append")
        self.identifier += 1
        with self._ours() as table:
            result = self._append(table, rows, self.identifier)
        assert not result["alreadyCommitted"], result
        new = canonical_rows(decode(self.m.rows("main")) + rows)
        self._step([], Expect(moves={"main": new}, operations=frozenset({"append"})))

    def _maintain(self, name: str, run: Callable[[Any], Any], dry_run: bool, branch: str = "main") -> Any:
        """Run ``run(table)``: a dry run must leave every file and the catalog row as they were; a real run may
        add ``replace`` snapshots holding the same rows on ``branch``."""
        before = self._state_files()
        with self._ours() as table:
            try:
                result = run(table)
            except Exception as exc:
                if skipped_defect(exc) is None:
                    raise
                self._step([], Expect())  # the skipped defect committed nothing
                return None
        if dry_run:
            after = self._state_files()
            changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
            assert not changed, f"{name} dry run changed {changed}"
            self._step([], Expect())
        else:
            rows = self.m.rows(branch)
            expect = Expect(
                moves={branch: rows}, may_stay=True, same_rows_chain=True, operations=frozenset({"replace"})
            )
            self._step([], expect)
        return result

    @rule(
        options=st.sampled_from(
            [
                {"min-input-files": "2"},
                {"rewrite-all": "true"},
                {"delete-file-threshold": "1"},
                {"rewrite-all": "true", "remove-dangling-deletes": "true"},
                {
                    "min-input-files": "2",
                    "partial-progress.enabled": "true",
                    "partial-progress.max-commits": "2",
                },
            ]
        ),
        where=st.sampled_from([None, "p = 'a'", "p IS NULL", "k > 3"]),
        dry_run=st.booleans(),
    )
    def our_compact_data(self, options: dict[str, str], where: str | None, dry_run: bool) -> None:
        _count("our_compact_data")
        if where is not None and where.startswith("k") and self.m.partitioned:
            where = None  # a filter on a non-partition column selects whole files only when unpartitioned
        result = self._maintain(
            "compact_data",
            lambda t: t.maintenance.compact_data(dry_run=dry_run, options=options, where=where),
            dry_run,
        )
        assert result is None or (not result.conflicts and not result.failed_commits), result

    @rule(rewrite_all=st.booleans(), dry_run=st.booleans())
    def our_compact_deletes(self, rewrite_all: bool, dry_run: bool) -> None:
        _count("our_compact_deletes")
        options = {"rewrite-all": "true"} if rewrite_all else None
        self._maintain(
            "compact_deletes",
            lambda t: t.maintenance.compact_deletes(dry_run=dry_run, options=options),
            dry_run,
        )

    @rule(mode=st.sampled_from(["full", "minor"]), branch=targets, dry_run=st.booleans())
    def our_compact_manifests(self, mode: Literal["full", "minor"], branch: str, dry_run: bool) -> None:
        _count("our_compact_manifests")
        if self._branch(branch) is None:
            branch = "main"
        self._maintain(
            "compact_manifests",
            lambda t: t.maintenance.compact_manifests(mode, dry_run=dry_run, branch=branch),
            dry_run,
            branch,
        )

    def _expiry_arguments(self, index: int, everything: bool) -> tuple[int, datetime]:
        stamps = sorted({s.timestamp_ms for s in self.m.snapshots.values()})
        older_than_ms = stamps[-1] + 1 if everything else stamps[index % len(stamps)]
        return older_than_ms, datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=older_than_ms)

    @rule(
        index=indexes,
        everything=st.booleans(),
        retain_last=st.sampled_from([None, 1, 2, 3]),
        dry_run=st.booleans(),
    )
    def our_expire_snapshots(
        self, index: int, everything: bool, retain_last: int | None, dry_run: bool
    ) -> None:
        _count("our_expire_snapshots")
        older_than_ms, older_than = self._expiry_arguments(index, everything)
        expected = frozenset(self.m.expected_expiry(older_than_ms, retain_last))
        before = self._state_files()
        with self._ours() as table:
            result = table.maintenance.expire_snapshots(
                dry_run=dry_run, older_than=older_than, retain_last=retain_last
            )
        assert set(result.plan.expired) == expected, (
            f"expiry (older_than {older_than_ms}, retain_last {retain_last}) plans {sorted(result.plan.expired)}, "
            f"Java's rules {sorted(expected)}"
        )
        if dry_run:
            after = self._state_files()
            assert before == after, "expiry dry run changed files"
            expected = frozenset()
        self._step([], Expect(gone=(expected,), full=True))

    @rule(where=st.sampled_from(["data", "metadata", "data/p=a"]), old=st.booleans())
    def plant_orphan_file(self, where: str, old: bool) -> None:
        _count("plant_orphan_file")
        self.identifier += 1
        suffix = ".avro" if where == "metadata" else ".parquet"
        rel = os.path.join(where, f"planted-{self.identifier}{suffix}")
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"not a table file")
        if old:
            stamp = time.time() - OLD_SECONDS
            os.utime(path, (stamp, stamp))
        self.planted[rel] = "old" if old else "fresh"
        self._step([], Expect())  # Java reads on: a stray file changes no ref

    @rule()
    def make_every_file_old(self) -> None:
        _count("make_every_file_old")
        stamp = time.time() - OLD_SECONDS
        for rel in listing(self.root):
            os.utime(self.root / rel, (stamp, stamp))
        self.planted = dict.fromkeys(self.planted, "old")
        self._step([], Expect())

    @rule(dry_run=st.booleans())
    def our_remove_orphan_files(self, dry_run: bool) -> None:
        _count("our_remove_orphan_files")
        before = listing(self.root)
        cutoff_ns = (time.time() - 86400) * 1e9
        with self._ours() as table:
            table.maintenance.remove_orphan_files(dry_run=dry_run, older_than=timedelta(days=1))
        self._check_orphans(before, cutoff_ns, dry_run)

    def _check_orphans(self, before: dict[str, tuple[int, int]], cutoff_ns: float, dry_run: bool) -> None:
        t = self.table_name
        extra = [
            f"SELECT file_path FROM {t}.all_data_files",
            f"SELECT file_path FROM {t}.all_delete_files",
            f"SELECT path FROM {t}.all_manifests",
            f"SELECT manifest_list FROM {t}.snapshots",
            f"SELECT file FROM {t}.metadata_log_entries",
        ]
        results = self._step([], Expect(full=True, extra=extra))
        valid = {local_path(next(iter(row.values()))) for rows in results for row in rows}
        check_orphan_cleanup(self.root, self.planted, before, listing(self.root), valid, cutoff_ns, dry_run)

    # -- crashes ----------------------------------------------------------------------------------------------

    @rule(
        operation=st.sampled_from(
            ["append", "compact_data", "compact_deletes", "compact_manifests", "expire", "orphans"]
        ),
        k=st.integers(1, 12),
        after=st.booleans(),
        rows=rows_strategy,
    )
    def crash_then_rerun(self, operation: str, k: int, after: bool, rows: list[dict[str, Any]]) -> None:
        """Kill our operation at its k-th storage mutation; Java must then read either the state before it or
        the state after it, and a re-run must converge to what a clean run gives (an append lands once)."""
        _count(f"crash_then_rerun[{operation}]")
        self.identifier += 1
        identifier = self.identifier
        older_than_ms, older_than = self._expiry_arguments(0, True)
        runs: dict[str, Callable[[Any], Any]] = {
            "append": lambda t: self._append(t, rows, identifier),
            "compact_data": lambda t: t.maintenance.compact_data(options={"rewrite-all": "true"}),
            "compact_deletes": lambda t: t.maintenance.compact_deletes(options={"rewrite-all": "true"}),
            "compact_manifests": lambda t: t.maintenance.compact_manifests("full"),
            "expire": lambda t: t.maintenance.expire_snapshots(
                dry_run=False, older_than=older_than, retain_last=1
            ),
            "orphans": lambda t: t.maintenance.remove_orphan_files(
                dry_run=False, older_than=timedelta(days=1)
            ),
        }
        run = runs[operation]
        appended = canonical_rows(decode(self.m.rows("main")) + rows)
        expired = frozenset(self.m.expected_expiry(older_than_ms, 1))
        orphans_before, cutoff_ns = listing(self.root), (time.time() - 86400) * 1e9
        with self._ours() as table, contextlib.suppress(SimulatedCrash), crash_at(k, after):
            try:
                run(table)
            except Exception as exc:
                if skipped_defect(exc) is None:
                    raise
        head = self.m.refs["main"].snapshot_id
        if operation == "append":
            self._step(
                [],
                Expect(moves={"main": appended}, may_stay=True, operations=frozenset({"append"}), full=True),
            )
            landed = self.m.refs["main"].snapshot_id != head
            with self._ours() as table:
                result = run(table)
            assert result["alreadyCommitted"] == landed, (landed, result)
            moves = {} if landed else {"main": appended}
            self._step([], Expect(moves=moves, operations=frozenset({"append"})))
        elif operation == "expire":
            self._step([], Expect(gone=(frozenset(), expired), full=True))
            expected = frozenset(self.m.expected_expiry(older_than_ms, 1))
            with self._ours() as table:
                run(table)
            self._step([], Expect(gone=(expected,), full=True))
        elif operation == "orphans":
            self._step([], Expect(full=True))
            with self._ours() as table:
                run(table)
            self._check_orphans(orphans_before, cutoff_ns, dry_run=False)
        else:
            same = Expect(
                moves={"main": self.m.rows()},
                may_stay=True,
                same_rows_chain=True,
                operations=frozenset({"replace"}),
            )
            self._step([], same)
            self._maintain(operation, run, dry_run=False)
