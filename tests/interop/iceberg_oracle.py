"""Java Iceberg oracle: real Java Iceberg 1.10.2 (Spark 3.5.7 + its procedures) as the peer of the interop tests.

Run ONLY with the interpreter of the separate virtualenv ``.venv-iceberg`` (made by
``scripts/setup_iceberg_oracle.sh`` from ``requirements/iceberg.lock``). It imports pyspark 3.5.7, which cannot
live next to the main venv's pyspark 4.3; the main test process talks to it through a subprocess
(``tests/support/java_iceberg.py``). The Iceberg runtime jar comes from the ``snowpark-connect-deps-iceberg`` wheel,
its missing relocated Jackson from ``.venv-iceberg/oracle-jars/`` (rebuilt by ``scripts/relocate_jackson.py``), and
the SQLite JDBC driver from Debian's ``libxerial-sqlite-jdbc-*`` (unpacked there too).

Every command prints exactly ONE JSON document on stdout (the JVM's own stdout is redirected to stderr).
Exit status: 0 ok, 2 a precondition failed (message on stderr), 1 anything else (traceback on stderr).

``serve`` instead keeps ONE Spark session for the life of the process and answers JSON-lines requests from stdin,
``{"argv": [command, session options..., args...], "stdin": text (for batch)}``, with one line each on stdout:
``{"ok": true, "result": ...}`` or ``{"ok": false, "code": 2|1, "error": message or traceback}`` (the codes of
the exit status above). Before each request the catalogs are pointed at its ``--warehouse``/``--catalog-db`` and
the session is cleaned (``Oracle.target``: catalogs closed and re-made, session settings, current catalog and
namespace, cached data, temporary views and cached manifests back to the start), so no request sees another's
state. Requests with ``--conf`` are refused (code 2): those settings need a session of their own. It stops
(Spark session too) at the end of stdin, or exits 1 if the JVM died. ``tests/support/java_iceberg.py`` runs one
per pytest process.

Session options, accepted by every command (``batch`` passes its own to the commands it runs):
    --warehouse DIR        Hadoop catalog ``hc``: tables at DIR/<namespace>/<table> (required)
    --catalog-db PATH      JDBC catalog ``jc`` on this SQLite file, same warehouse DIR (pyiceberg's SqlCatalog
                           with ``uri=sqlite:///PATH`` and ``warehouse=file://DIR`` shares it)
    --conf KEY=VALUE       extra Spark setting (repeatable), e.g. ``spark.testing=true``, which lets
                           ``remove_orphan_files`` accept ``older_than`` less than 24 h ago;
                           ``spark.driver.extraJavaOptions`` is appended to the oracle's own JVM options

Environment: ``JAVA_HOME`` (default /usr/lib/jvm/java-17-openjdk-amd64), ``LAKEFORMAT_ICEBERG_JARS`` (directory
with the relocated Jackson and SQLite JDBC jars, default ``<venv>/oracle-jars``).

Tables (``--table``) are ``hc.<ns>.<name>`` or ``jc.<ns>.<name>`` (no catalog means ``hc``). Scenario tables are
``hc.db.<scenario>``; JDBC scenarios are ``jc.jdb.<scenario>``.

Commands:
    build --scenario NAME [NAME ...]
        Build scenario tables (one Spark session). Prints {"warehouse", "catalog_db", "tables": {scenario:
        summary}, "seconds": {scenario: s}}; a summary has identifier, location, path, metadata_location,
        format_version, current_snapshot_id, snapshot_count, spec_ids, refs. Scenarios (see the scenario_*
        docstrings): v1, v2_cow, v2_mor, v1_to_v2, partition_evolution, tags_branches, many_commits, v3_dv
        (Hadoop catalog) and jdbc_basic (JDBC catalog, needs --catalog-db).
    files --table T [--snapshot ID | --ref NAME | --all] [--source sql|java]
        Live files (data and delete) of the ``files`` metadata table, sorted by (content, file_path,
        content_offset): content, file_path, file_format, spec_id, partition ({field: value} over the fields of
        the file's OWN spec, in spec order; the metadata table's union struct is cut down to those),
        record_count, file_size_in_bytes, referenced_data_file, content_offset, content_size_in_bytes.
        Default: the current snapshot.
        ``--all``: {"current_snapshot_id", "snapshots": {"<id>": [...]}, "refs": {name: {"snapshot_id", "files"}}}.
        ``--source java`` reads the manifests through the Java API instead of Spark SQL (much faster for --all;
        the tests check both agree).
    entries --table T [--snapshot ID | --ref NAME]
        The ``entries`` metadata table: status, snapshot_id, sequence_number, file_sequence_number, content,
        file_path, spec_id, record_count.
    snapshots --table T
        {"format_version", "metadata_location", "current_snapshot_id", "snapshots": [{snapshot_id, parent_id,
        sequence_number, timestamp_ms, operation, manifest_list, schema_id, summary}], "refs": {name: {type,
        snapshot_id, max_reference_age_in_ms, min_snapshots_to_keep, max_snapshot_age_in_ms}},
        "snapshot_log": [[ts, id]], "metadata_log": [[ts, file]], "spec_ids", "properties"}.
        Snapshots come from the ``snapshots`` metadata table plus the Java API (sequence numbers), refs from the
        ``refs`` metadata table.
    rows --table T [--snapshot ID | --ref NAME | --all]
        The rows, normalised (below) and sorted. ``--all`` as for files.
    sql --statement SQL [--statement SQL ...]
        Runs each statement; prints a list with the normalised rows of each.
    call --procedure NAME --table T [--args JSON]
        ``CALL <catalog>.system.NAME(table => '<ns>.<name>', k => v, ...)``. JSON values: string, number, bool,
        list (-> array(...)), {"timestamp": "2024-01-01 00:00:00"} (UTC), {"timestamp_ms": N} (both become TIMESTAMP
        literals: CALL accepts literals only), {"map": {k: v}}, {"sql": "raw literal"}. Prints the output rows.
    append --table T --rows FILE [--ref BRANCH] [--merge]
        Appends through the Java Table API (GenericAppenderFactory writes Parquet; newFastAppend, or newAppend
        with --merge, commits), without Spark's write path. FILE holds a JSON list of commits, each a list of
        row objects (column -> JSON value; dates/timestamps as ISO strings). One data file per partition per
        commit. Prints {"snapshot_ids": [...]}. Top-level primitive columns only.
    expire-files --table T [--older-than-ms MS] [--retain-last N] [--snapshot-id ID ...]
        ``ExpireSnapshotsSparkAction.expireFiles()``: COMMITS the expiry to the metadata but deletes no file, and
        prints [{"path", "type"}] of the files Java would delete (Java's "would delete" set); types are "DATA",
        "POSITION_DELETES", "EQUALITY_DELETES", "Manifest", "Manifest List", "Statistics Files".
    load-metadata --metadata FILE
        Java's view of one metadata file (StaticTableOperations): {"metadata", "format_version",
        "current_snapshot_id", "snapshots": [{snapshot_id, parent_id, sequence_number, operation}], "refs",
        "files"} (files: live files at its current snapshot, as ``files --source java``).
    manifest-list --table T [--snapshot ID]
        The manifest list of a snapshot (default current) through the Java API: [{path, content, spec_id,
        length, added_snapshot_id, added/existing/deleted_files_count}] in list order.
    merge-append --table T [--branch B]
        Commits an EMPTY newAppend() (MergeAppend) to main or to branch B, so Java's commit-time manifest merge
        runs on the existing manifests alone (what our "minor" manifest compaction models): {"parent_id",
        "snapshot_id", "manifests_before", "manifests_after"}.
    append-loop --table T --writer ID [--writer ID ...] --count N [--rows-per-commit K] [--interval-ms MS]
                [--ready-file P --go-file P] [--pause-every M --pause-dir D]
        One JVM thread per writer, each committing N Java-API fast appends of rows (writer, seq, k) with
        snapshot summary lakeformat.writer / lakeformat.seq; Java's commit retry, then a re-commit of the
        same files when Java gives up with CommitFailedException. Writes P(ready) when prepared and waits
        for P(go). With --pause-every M: after every M commits (not after the last), writer W writes
        D/paused-W-R (R = 1, 2, ... the round just finished) and waits for D/resume-R.
        Prints {"writers": {ID: {"commits", "exhausted", "error", "seconds"}}}.
    row-loop --table T --writer ID [--writer ID ...] --count N [--rows-per-commit K] [--ready-file P --go-file P]
             [--pause-every M --pause-dir D] [--trigger-dir D]
        One JVM thread per writer inserting, deleting and updating rows (writer, seq, k, v) on a schedule, each
        delete/update committed as Spark's merge-on-read DELETE/UPDATE commits it (a row delta with a
        file-scoped position delete, validated from the snapshot the row was located at), every commit tagged
        lakeformat.writer / lakeformat.seq / lakeformat.op / lakeformat.target; ready/go and the barrier as for
        append-loop; with --trigger-dir, deletes on demand of a row in given files (``iceberg_oracle_row_loop.py``
        has the schedule, the commit and the protocol). Prints {"writers": {ID: {"commits", "revalidated",
        "exhausted", "error", "seconds", "ops"}}, "triggered": [...]}.
    time-call --procedure NAME --table T [--args JSON]
        ``call`` timed inside the session: {"rows", "seconds", "session_seconds"}.
    wait-file --path P [--timeout S] [--signal Q]
        Writes Q (if given), then waits until P exists (default at most 600 s; exit 2 after that): in a
        ``batch``, lets the caller act between two commands of one Spark session. Prints {"waited_seconds"}.
    batch [FILE]
        Several commands in ONE Spark session; FILE (default stdin) holds a JSON list of argument lists (without
        session options); prints the list of their results.
    serve
        Requests on stdin, answers on stdout, one Spark session (above). Takes no session options.

Value normalisation (rows and partitions): NULL -> null, booleans, integers -> int, float/double -> float
(NaN/inf -> "NaN"/"Infinity"/"-Infinity"), decimal -> str at the column scale, string -> str, date ->
"YYYY-MM-DD", timestamp / timestamp_ntz -> naive ISO string (session time zone UTC), binary -> lowercase hex,
struct -> object, array -> list, map -> list of [key, value] pairs sorted by key.

Quirks found while building this (Iceberg 1.10.2, Spark 3.5.7):
* ``SELECT ... FROM t.files VERSION AS OF '<branch>'`` fails ("Cannot find source column for partition field");
  snapshot ids and tags work. ``--ref`` therefore resolves the ref to its snapshot id first.
* Over py4j a Python int becomes ``java.lang.Integer`` and a float ``Double``; Iceberg's generic writers then
  fail with ClassCastException on long/float columns, so ``append`` builds rows as Spark ``Row`` objects on the
  JVM and converts them with ``SparkValueConverter`` (dates/timestamps are then fixed to java.time objects).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import decimal
import io
import json
import math
import os
import sys
import sysconfig
import time
import traceback
import urllib.parse
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

DEFAULT_JAVA_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"
RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
HADOOP_CATALOG = "hc"
JDBC_CATALOG = "jc"
SCENARIO_NAMESPACE = "db"
JDBC_NAMESPACE = "jdb"
EPOCH = dt.date(1970, 1, 1)


class OracleError(Exception):
    """A precondition failed; reported on stderr with exit status 2."""


# ----------------------------------------------------------------------------------------------
# stdout discipline and environment
# ----------------------------------------------------------------------------------------------


def _protect_stdout() -> Any:
    """Point fd 1 at stderr (the JVM inherits it and prints there) and return a writer for the real stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(saved, "w", encoding="utf-8")


def _jars_dir() -> Path:
    """Where scripts/setup_iceberg_oracle.sh put the relocated Jackson and the SQLite JDBC driver."""
    return Path(os.environ.get("LAKEFORMAT_ICEBERG_JARS", Path(sys.prefix) / "oracle-jars"))


def _runtime_jar() -> Path:
    jar = Path(sysconfig.get_paths()["purelib"]) / "snowpark_connect_deps_iceberg" / "jars" / RUNTIME_JAR
    if not jar.is_file():
        raise OracleError(f"{jar} not found: run scripts/setup_iceberg_oracle.sh")
    return jar


def _session_jars() -> tuple[list[str], Path]:
    jars_dir = _jars_dir()
    shaded = sorted(jars_dir.glob("iceberg-shaded-jackson-*.jar"))
    sqlite = jars_dir / "sqlite-jdbc.jar"
    native = jars_dir / "native"
    if not shaded or not sqlite.is_file() or not (native / "libsqlitejdbc.so").is_file():
        raise OracleError(f"oracle jars missing in {jars_dir}: run scripts/setup_iceberg_oracle.sh")
    return [str(_runtime_jar()), str(shaded[-1]), str(sqlite)], native


# ----------------------------------------------------------------------------------------------
# Value normalisation
# ----------------------------------------------------------------------------------------------


def normalise(value: Any) -> Any:
    """Turn a value collected from Spark into its JSON form (see the module docstring)."""
    from pyspark.sql import Row

    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None).isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, Row):
        return {key: normalise(item) for key, item in value.asDict(recursive=False).items()}
    if isinstance(value, dict):
        pairs = [[normalise(k), normalise(v)] for k, v in value.items()]
        return sorted(pairs, key=lambda pair: json.dumps(pair[0], sort_keys=True))
    if isinstance(value, (list, tuple)):
        return [normalise(item) for item in value]
    raise OracleError(f"cannot normalise {type(value).__name__}: {value!r}")


def _sort_key(row: Any) -> list[Any]:
    """Order rows by their values in column order: nulls first, numbers numerically, then strings, then others."""
    values = row.values() if isinstance(row, dict) else [row]
    key: list[Any] = []
    for value in values:
        if value is None:
            key.append((0, 0, ""))
        elif isinstance(value, (bool, int, float)):
            key.append((1, value, ""))
        elif isinstance(value, str):
            key.append((2, 0, value))
        else:
            key.append((3, 0, json.dumps(value, sort_keys=True)))
    return key


def sql_literal(value: Any) -> str:
    """A Spark SQL literal for a JSON-ish Python value (strings are quoted; CAST them for other types)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return f"{value}L" if not -(2**31) <= value < 2**31 else str(value)
    if isinstance(value, float):
        return f"CAST('{value!r}' AS DOUBLE)"
    if isinstance(value, decimal.Decimal):
        return f"{value}BD"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, list):
        return "array(" + ", ".join(sql_literal(item) for item in value) + ")"
    if isinstance(value, dict):
        if set(value) == {"timestamp"}:
            return f"TIMESTAMP '{value['timestamp']}'"
        if set(value) == {
            "timestamp_ms"
        }:  # CALL takes literals only, no TIMESTAMP_MILLIS(...); session TZ is UTC
            moment = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=int(value["timestamp_ms"]))
            return f"TIMESTAMP '{moment.isoformat(sep=' ', timespec='milliseconds')}'"
        if set(value) == {"sql"}:
            return str(value["sql"])
        if set(value) == {"map"}:
            items = [f"{sql_literal(k)}, {sql_literal(v)}" for k, v in value["map"].items()]
            return "map(" + ", ".join(items) + ")"
    raise OracleError(f"no SQL literal for {value!r}")


# ----------------------------------------------------------------------------------------------
# The session
# ----------------------------------------------------------------------------------------------


def _quote(part: str) -> str:
    return "`" + part.replace("`", "``") + "`"


class Oracle:
    """One Spark session with the Hadoop catalog ``hc`` (and the JDBC catalog ``jc``) over one warehouse.

    Construction starts the session; :meth:`target` points the catalogs at a warehouse (and catalog db) and
    drops whatever an earlier command left in the session, so one session can serve many warehouses."""

    def __init__(self, confs: dict[str, str]) -> None:
        jars, native = _session_jars()
        os.environ.setdefault("JAVA_HOME", DEFAULT_JAVA_HOME)
        if (native / "libsqlite3.so.0").exists():  # only when setup had to bring libsqlite3 along
            os.environ["LD_LIBRARY_PATH"] = f"{native}:{os.environ.get('LD_LIBRARY_PATH', '')}".rstrip(":")
        settings = {
            "spark.master": "local[2]",
            "spark.app.name": "lakeformat-iceberg-oracle",
            "spark.jars": ",".join(jars),
            # The driver JVM does little work: C1-only JIT and the serial GC halve the wall time of a build on 2
            # busy cores (measured: 57 s -> 27 s). The sqlite-jdbc native library comes from Debian's package,
            # unpacked outside the usual JNI directory.
            "spark.driver.extraJavaOptions": " ".join(
                [
                    "-XX:TieredStopAtLevel=1",
                    "-XX:+UseSerialGC",
                    "-Duser.timezone=UTC",
                    f"-Dorg.sqlite.lib.path={native}",
                    "-Dorg.sqlite.lib.name=libsqlitejdbc.so",
                ]
            ),
            "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
        }
        # --conf: extra JVM options are added to ours, any other setting replaces ours (catalog settings
        # too: target() applies the --conf value of those).
        self.confs = dict(confs)
        for key, value in confs.items():
            if key == "spark.driver.extraJavaOptions":
                value = f"{settings[key]} {value}"
            settings[key] = value
        from pyspark.sql import SparkSession

        builder = SparkSession.builder
        for key, value in settings.items():
            builder = builder.config(key, value)
        started = time.monotonic()
        self.spark = builder.getOrCreate()
        self.spark.sparkContext.setLogLevel("ERROR")
        self.session_seconds = round(time.monotonic() - started, 2)
        self.jvm = self.spark._jvm
        self._baseline_conf = self._sql_conf()
        self._manifest_cache: dict[str, list[dict[str, Any]]] = {}
        self.warehouse = Path()
        self.catalog_db: Path | None = None

    # ---- targeting a warehouse ------------------------------------------------------------------

    def target(self, warehouse: Path, catalog_db: Path | None) -> None:
        """Point ``hc`` (and ``jc`` when ``catalog_db`` is given) at ``warehouse``, in a session as clean as
        a new one: catalogs re-instantiated, session settings as at the start, no cached data, temporary
        views or cached manifests, current catalog and namespace the defaults."""
        self.warehouse = warehouse.resolve()
        self.catalog_db = catalog_db.resolve() if catalog_db else None
        self.warehouse.mkdir(parents=True, exist_ok=True)
        if self.catalog_db is not None:
            self.catalog_db.parent.mkdir(parents=True, exist_ok=True)
        self._close_catalogs()
        self._restore_sql_conf()
        for key, value in self._catalog_settings().items():
            self._conf().setConfString(key, value)
        # Drops the catalog instances (re-made from the settings above on first use) and resets the current
        # catalog and namespace.
        self.spark._jsparkSession.sessionState().catalogManager().reset()
        self.spark.catalog.clearCache()
        self._drop_temp_views()
        self._manifest_cache.clear()

    def _catalog_settings(self) -> dict[str, str]:
        settings = {
            "spark.sql.catalog.hc": "org.apache.iceberg.spark.SparkCatalog",
            "spark.sql.catalog.hc.type": "hadoop",
            "spark.sql.catalog.hc.warehouse": self.warehouse.as_uri(),
            # Other processes (pyiceberg, our code) commit between commands: never serve a cached table.
            "spark.sql.catalog.hc.cache-enabled": "false",
        }
        if self.catalog_db is not None:
            settings |= {
                "spark.sql.catalog.jc": "org.apache.iceberg.spark.SparkCatalog",
                "spark.sql.catalog.jc.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
                "spark.sql.catalog.jc.uri": f"jdbc:sqlite:{self.catalog_db}",
                "spark.sql.catalog.jc.warehouse": self.warehouse.as_uri(),
                "spark.sql.catalog.jc.cache-enabled": "false",
            }
        return settings | {key: value for key, value in self.confs.items() if key in settings}

    def _conf(self) -> Any:
        """The session's SQLConf (JVM); set directly, it takes any key, as the builder does."""
        return self.spark._jsparkSession.sessionState().conf()

    def _sql_conf(self) -> dict[str, str]:
        settings = self._conf().getAllConfs()
        return dict(self.jvm.scala.collection.JavaConverters.mapAsJavaMapConverter(settings).asJava())

    def _restore_sql_conf(self) -> None:
        """Undo every session setting made since the start (``SET`` statements, the previous target)."""
        conf, current = self._conf(), self._sql_conf()
        for key in current.keys() - self._baseline_conf.keys():
            conf.unsetConf(key)
        for key, value in self._baseline_conf.items():
            if current.get(key) != value:
                conf.setConfString(key, value)

    def _close_catalogs(self) -> None:
        """Close the Iceberg catalogs the session instantiated (the JDBC catalog holds a SQLite connection,
        to a file a test may since have replaced). CatalogManager keeps them in a private map."""
        from py4j.java_gateway import is_instance_of
        from py4j.protocol import Py4JError

        manager = self.spark._jsparkSession.sessionState().catalogManager()
        fields = [f for f in manager.getClass().getDeclaredFields() if str(f.getName()).endswith("catalogs")]
        if len(fields) != 1:
            raise OracleError("cannot find the catalogs of Spark's CatalogManager to close them")
        fields[0].setAccessible(True)
        plugins = self.jvm.scala.collection.JavaConverters.mapAsJavaMapConverter(fields[0].get(manager))
        gateway = self.spark.sparkContext._gateway
        for plugin in list(plugins.asJava().values()):
            if str(plugin.getClass().getName()).startswith("org.apache.iceberg.spark."):
                try:
                    plugin = plugin.icebergCatalog()
                except Py4JError:  # an Iceberg plugin that wraps no catalog of its own (after a CALL)
                    continue
            if is_instance_of(gateway, plugin, "java.io.Closeable"):
                plugin.close()

    def _drop_temp_views(self) -> None:
        for table in self.spark.catalog.listTables("global_temp"):
            if not table.isTemporary:
                continue
            if table.namespace == ["global_temp"]:
                self.spark.catalog.dropGlobalTempView(table.name)
            else:
                self.spark.catalog.dropTempView(table.name)

    # ---- helpers ------------------------------------------------------------------------------

    def identifier(self, table: str) -> str:
        """``hc.ns.name`` form of a table argument (no catalog means ``hc``)."""
        parts = table.split(".")
        if parts[0] not in (HADOOP_CATALOG, JDBC_CATALOG):
            parts = [HADOOP_CATALOG, *parts]
        if len(parts) != 3:
            raise OracleError(f"table must be [catalog.]namespace.name, got {table!r}")
        if parts[0] == JDBC_CATALOG and self.catalog_db is None:
            raise OracleError(f"{table}: the JDBC catalog needs --catalog-db")
        return ".".join(parts)

    def quoted(self, identifier: str, suffix: str = "") -> str:
        """The identifier quoted for SQL, optionally with a metadata-table suffix (``files``...)."""
        parts = identifier.split(".") + ([suffix] if suffix else [])
        return ".".join(_quote(part) for part in parts)

    def sql(self, statement: str) -> list[Any]:
        """Run a statement and return its rows, normalised."""
        return [normalise(row) for row in self.spark.sql(statement).collect()]

    def load(self, identifier: str) -> Any:
        """The Java ``org.apache.iceberg.Table`` (fresh: the catalogs don't cache)."""
        return self.jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
            self.spark._jsparkSession, identifier
        )

    def snapshot_ids(self, table: Any) -> list[int]:
        """All snapshot ids of a Java table, in commit order."""
        return [int(snapshot.snapshotId()) for snapshot in table.snapshots()]

    def refs(self, table: Any) -> dict[str, int]:
        """Ref name -> snapshot id."""
        refs = table.refs()
        return {str(name): int(refs.get(name).snapshotId()) for name in refs.keySet()}

    def resolve_version(self, table: Any, snapshot: int | None, ref: str | None) -> int | None:
        """The snapshot id selected by --snapshot/--ref (None: the current snapshot, or none)."""
        if snapshot is not None:
            if table.snapshot(snapshot) is None:
                raise OracleError(f"snapshot {snapshot} not in {table.name()}")
            return snapshot
        if ref is not None:
            refs = self.refs(table)
            if ref not in refs:
                raise OracleError(f"ref {ref!r} not in {table.name()} (refs: {sorted(refs)})")
            return refs[ref]
        current = table.currentSnapshot()
        return None if current is None else int(current.snapshotId())

    def summary(self, identifier: str) -> dict[str, Any]:
        """What build reports about a table."""
        table = self.load(identifier)
        metadata = table.operations().current()
        location = str(table.location())
        current = table.currentSnapshot()
        return {
            "identifier": identifier,
            "location": location,
            "path": urllib.parse.urlparse(location).path if location.startswith("file:") else location,
            "metadata_location": str(metadata.metadataFileLocation()),
            "format_version": int(metadata.formatVersion()),
            "current_snapshot_id": None if current is None else int(current.snapshotId()),
            "snapshot_count": len(self.snapshot_ids(table)),
            "spec_ids": sorted(int(spec_id) for spec_id in table.specs().keySet()),
            "refs": self.refs(table),
        }

    # ---- files / entries / rows --------------------------------------------------------------

    FILE_COLUMNS = (
        "content",
        "file_path",
        "file_format",
        "spec_id",
        "partition",
        "record_count",
        "file_size_in_bytes",
        "referenced_data_file",
        "content_offset",
        "content_size_in_bytes",
    )

    def files_sql(self, identifier: str, snapshot_id: int | None) -> list[dict[str, Any]]:
        """Live data and delete files at a snapshot, from Spark's ``files`` metadata table."""
        if snapshot_id is None:
            return []
        columns = ", ".join(self.FILE_COLUMNS)
        rows = self.sql(
            f"SELECT {columns} FROM {self.quoted(identifier, 'files')} VERSION AS OF {snapshot_id}"
        )
        # The metadata table's partition struct is the union of all specs' fields; keep the file's own spec's.
        spec_fields = self._spec_fields(identifier)
        for row in rows:
            row["partition"] = {name: row["partition"][name] for name in spec_fields[row["spec_id"]]}
        return sorted(rows, key=_file_sort_key)

    def _spec_fields(self, identifier: str) -> dict[int, list[str]]:
        specs = self.load(identifier).specs()
        return {int(i): [str(f.name()) for f in specs.get(i).fields()] for i in specs.keySet()}

    def files_java(self, table: Any, snapshot_id: int | None) -> list[dict[str, Any]]:
        """Live data and delete files at a snapshot, read through the Java API (ManifestFiles readers).

        Manifests are immutable and shared between snapshots, so each is read once per process."""
        if snapshot_id is None:
            return []
        io, specs = table.io(), table.specs()
        manifest_files = self.jvm.org.apache.iceberg.ManifestFiles
        result = []
        for manifest in table.snapshot(snapshot_id).allManifests(io):
            path = str(manifest.path())
            if path not in self._manifest_cache:
                is_delete = str(manifest.content().name()) == "DELETES"
                reader = (
                    manifest_files.readDeleteManifest(manifest, io, specs)
                    if is_delete
                    else manifest_files.read(manifest, io, specs)
                )
                entries = []
                try:
                    files = reader.iterator()  # live (not DELETED) entries' files; a CloseableIterable
                    while files.hasNext():
                        entries.append(self._content_file(files.next(), specs))
                finally:
                    reader.close()
                self._manifest_cache[path] = entries
            result.extend(self._manifest_cache[path])
        return sorted(result, key=_file_sort_key)

    def _content_file(self, content_file: Any, specs: Any) -> dict[str, Any]:
        spec = specs.get(content_file.specId())
        partition_type = spec.partitionType()
        partition_data = content_file.partition()
        partition = {}
        for index, field in enumerate(partition_type.fields()):
            value = partition_data.get(index, self.jvm.java.lang.Object._java_lang_class)
            partition[str(field.name())] = _java_partition_value(str(field.type().typeId().name()), value)
        content = int(content_file.content().id())
        # Only DeleteFile has these (py4j cannot tell: any attribute looks callable until it is called).
        offset = content_file.contentOffset() if content else None
        size = content_file.contentSizeInBytes() if content else None
        referenced = content_file.referencedDataFile() if content else None
        return {
            "content": content,
            "file_path": str(content_file.location()),
            "file_format": str(content_file.format().name()),
            "spec_id": int(content_file.specId()),
            "partition": partition,
            "record_count": int(content_file.recordCount()),
            "file_size_in_bytes": int(content_file.fileSizeInBytes()),
            "referenced_data_file": None if referenced is None else str(referenced),
            "content_offset": None if offset is None else int(offset),
            "content_size_in_bytes": None if size is None else int(size),
        }

    def entries(self, identifier: str, snapshot_id: int | None) -> list[dict[str, Any]]:
        """The ``entries`` metadata table at a snapshot (live and DELETED entries of its manifests)."""
        if snapshot_id is None:
            return []
        rows = self.sql(
            "SELECT status, snapshot_id, sequence_number, file_sequence_number, data_file.content AS content,"
            " data_file.file_path AS file_path, data_file.spec_id AS spec_id,"
            " data_file.record_count AS record_count"
            f" FROM {self.quoted(identifier, 'entries')} VERSION AS OF {snapshot_id}"
        )
        return sorted(rows, key=lambda row: (row["content"], row["file_path"], row["status"]))

    def rows(self, identifier: str, snapshot_id: int | None) -> list[Any]:
        """All rows of the table at a snapshot, normalised and sorted."""
        if snapshot_id is None:
            return []
        rows = self.sql(f"SELECT * FROM {self.quoted(identifier)} VERSION AS OF {snapshot_id}")
        return sorted(rows, key=_sort_key)

    def per_version(
        self, identifier: str, table: Any, read: Callable[[int], Any], all_versions: bool, version: int | None
    ) -> Any:
        """``read`` at one snapshot, or (--all) at every snapshot and every ref (each snapshot read once)."""
        if not all_versions:
            return read(version) if version is not None else []
        cache: dict[int, Any] = {}
        for snapshot_id in self.snapshot_ids(table):
            cache[snapshot_id] = read(snapshot_id)
        refs = {name: {"snapshot_id": sid, "result": cache[sid]} for name, sid in self.refs(table).items()}
        current = table.currentSnapshot()
        return {
            "current_snapshot_id": None if current is None else int(current.snapshotId()),
            "snapshots": {str(sid): result for sid, result in cache.items()},
            "refs": refs,
        }

    # ---- snapshots ----------------------------------------------------------------------------

    def snapshots(self, identifier: str) -> dict[str, Any]:
        """Snapshots, refs, logs and a few metadata fields of a table."""
        table = self.load(identifier)
        metadata = table.operations().current()
        java_snapshots = {int(s.snapshotId()): s for s in table.snapshots()}
        listed = self.spark.sql(
            "SELECT snapshot_id, parent_id, operation, manifest_list, summary"
            f" FROM {self.quoted(identifier, 'snapshots')}"
        ).collect()
        snapshots = []
        for row in listed:
            java = java_snapshots[int(row["snapshot_id"])]
            snapshots.append(
                {
                    "snapshot_id": int(row["snapshot_id"]),
                    "parent_id": None if row["parent_id"] is None else int(row["parent_id"]),
                    "sequence_number": int(java.sequenceNumber()),
                    "timestamp_ms": int(java.timestampMillis()),
                    "operation": row["operation"],
                    "manifest_list": row["manifest_list"],
                    "schema_id": None if java.schemaId() is None else int(java.schemaId()),
                    "summary": dict(sorted((row["summary"] or {}).items())),
                }
            )
        snapshots.sort(key=lambda s: (s["sequence_number"], s["timestamp_ms"]))
        refs = {}
        for row in self.spark.sql(f"SELECT * FROM {self.quoted(identifier, 'refs')}").collect():
            refs[row["name"]] = {
                "type": row["type"],
                "snapshot_id": int(row["snapshot_id"]),
                "max_reference_age_in_ms": row["max_reference_age_in_ms"],
                "min_snapshots_to_keep": row["min_snapshots_to_keep"],
                "max_snapshot_age_in_ms": row["max_snapshot_age_in_ms"],
            }
        current = table.currentSnapshot()
        return {
            "identifier": identifier,
            "format_version": int(metadata.formatVersion()),
            "metadata_location": str(metadata.metadataFileLocation()),
            "current_snapshot_id": None if current is None else int(current.snapshotId()),
            "snapshots": snapshots,
            "refs": dict(sorted(refs.items())),
            "snapshot_log": [[int(e.timestampMillis()), int(e.snapshotId())] for e in metadata.snapshotLog()],
            "metadata_log": [[int(e.timestampMillis()), str(e.file())] for e in metadata.previousFiles()],
            "spec_ids": sorted(int(spec_id) for spec_id in table.specs().keySet()),
            "properties": dict(sorted((str(k), str(v)) for k, v in table.properties().items())),
        }

    # ---- Java API appends -------------------------------------------------------------------

    def append(
        self,
        identifier: str,
        commits: list[list[dict[str, Any]]],
        ref: str | None = None,
        merge: bool = False,
    ) -> list[int]:
        """Commit each list of rows as one Java-API append (one Parquet file per partition); new snapshot ids."""
        table = self.load(identifier)
        schema, spec = table.schema(), table.spec()
        iceberg = self.jvm.org.apache.iceberg
        columns = [(str(f.name()), str(f.type().typeId().name())) for f in schema.columns()]
        for name, type_id in columns:
            if type_id in ("STRUCT", "LIST", "MAP"):
                raise OracleError(f"append supports primitive columns only ({name} is {type_id})")
        all_rows = [row for commit in commits for row in commit]
        if not all_rows:
            return []
        java_rows = self._spark_rows(identifier, [name for name, _ in columns], all_rows)
        factory = self.jvm.org.apache.iceberg.data.GenericAppenderFactory(schema, spec)
        wrapper = self.jvm.org.apache.iceberg.data.InternalRecordWrapper(schema.asStruct())
        parquet = iceberg.FileFormat.PARQUET
        converter = self.jvm.org.apache.iceberg.spark.SparkValueConverter
        snapshot_ids = []
        position = 0
        for commit_index, commit in enumerate(commits):
            groups: dict[str, tuple[Any, list[Any]]] = {}
            for row in commit:
                record = converter.convert(schema, java_rows.get(position))
                position += 1
                for name, type_id in columns:
                    fixed = _java_value(self.jvm, type_id, row.get(name))
                    if fixed is not _KEEP:
                        record.setField(name, fixed)
                key = iceberg.PartitionKey(spec, schema)
                key.partition(wrapper.wrap(record))
                path = str(spec.partitionToPath(key)) if spec.isPartitioned() else ""
                groups.setdefault(path, (key, []))[1].append(record)
            operation = table.newAppend() if merge else table.newFastAppend()
            if ref is not None:
                operation = operation.toBranch(ref)
            for file_index, (key, records) in enumerate(groups.values()):
                name = f"java-append-{time.time_ns()}-{commit_index:05d}-{file_index:03d}.parquet"
                location = table.locationProvider().newDataLocation(spec, key, name)
                output = iceberg.encryption.EncryptedFiles.plainAsEncryptedOutput(
                    table.io().newOutputFile(location)
                )
                writer = factory.newDataWriter(output, parquet, key if spec.isPartitioned() else None)
                try:
                    for record in records:
                        writer.write(record)
                finally:
                    writer.close()
                operation = operation.appendFile(writer.toDataFile())
            operation.commit()
            table.refresh()
            head = table.snapshot(ref) if ref is not None else table.currentSnapshot()
            snapshot_ids.append(int(head.snapshotId()))
        return snapshot_ids

    def _spark_rows(self, identifier: str, names: list[str], rows: list[dict[str, Any]]) -> Any:
        """The rows as a java.util.List of Spark Rows typed like the table (built from a SQL VALUES relation:
        no Python worker, and bigint stays Long on the JVM side)."""
        fields = {f.name: f.dataType.simpleString() for f in self.spark.table(identifier).schema.fields}
        values = ", ".join(
            "(" + ", ".join(sql_literal(row.get(name)) for name in names) + ")" for row in rows
        )
        aliases = ", ".join(f"c{i}" for i in range(len(names)))
        select = ", ".join(f"CAST(c{i} AS {fields[name]}) AS {_quote(name)}" for i, name in enumerate(names))
        return self.spark.sql(f"SELECT {select} FROM VALUES {values} AS v({aliases})")._jdf.collectAsList()

    # ---- expiry ------------------------------------------------------------------------------

    def expire_files(
        self, identifier: str, older_than_ms: int | None, retain_last: int | None, snapshot_ids: list[int]
    ) -> list[dict[str, str]]:
        """Java's expiry "would delete" set; commits the metadata change, deletes nothing."""
        table = self.load(identifier)
        action = self.jvm.org.apache.iceberg.spark.actions.SparkActions.get(self.spark._jsparkSession)
        expire = action.expireSnapshots(table)
        if older_than_ms is not None:
            expire = expire.expireOlderThan(older_than_ms)
        if retain_last is not None:
            expire = expire.retainLast(retain_last)
        for snapshot_id in snapshot_ids:
            expire = expire.expireSnapshotId(snapshot_id)
        rows = expire.expireFiles().collectAsList()
        result = [{"path": str(row.getPath()), "type": str(row.getType())} for row in rows]
        return sorted(result, key=lambda item: (item["type"], item["path"]))


_KEEP = object()


def _java_value(jvm: Any, type_id: str, value: Any) -> Any:
    """The java.time/ByteBuffer object Iceberg's generic writer wants, or _KEEP for the converted value."""
    if value is None:
        return _KEEP  # SparkValueConverter already made it null
    if type_id == "DATE":
        return jvm.java.time.LocalDate.parse(str(value))
    if type_id == "TIME":
        return jvm.java.time.LocalTime.parse(str(value))
    if type_id in ("TIMESTAMP", "TIMESTAMP_NANO"):
        text = str(value).replace(" ", "T")
        if text.endswith("Z") or "+" in text[10:] or "-" in text[10:]:
            return jvm.java.time.OffsetDateTime.parse(text.replace("Z", "+00:00"))
        return jvm.java.time.LocalDateTime.parse(text)
    if type_id == "BINARY":
        return jvm.java.nio.ByteBuffer.wrap(bytes.fromhex(value))
    if type_id == "FIXED":
        return bytearray(bytes.fromhex(value))
    if type_id == "UUID":
        return jvm.java.util.UUID.fromString(str(value))
    return _KEEP


def _java_partition_value(type_id: str, value: Any) -> Any:
    """Partition values from the Java API (internal representation) in the normalised JSON form."""
    if value is None:
        return None
    if type_id == "DATE":
        return (EPOCH + dt.timedelta(days=int(value))).isoformat()
    if type_id in ("TIMESTAMP", "TIMESTAMP_NANO"):
        return (dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=int(value))).isoformat()
    if type_id == "DECIMAL":
        return str(value.toPlainString()) if hasattr(value, "toPlainString") else str(value)
    if isinstance(value, (bool, int, float, str)):
        return normalise(value)
    if type_id in ("BINARY", "FIXED"):
        return bytes(value.array() if hasattr(value, "array") else value).hex()
    return str(value)


def _file_sort_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["content"], row["file_path"], row.get("content_offset") or 0)


# ----------------------------------------------------------------------------------------------
# Scenarios
# ----------------------------------------------------------------------------------------------

CATEGORIES = ("alpha", "beta", "gamma")
COLUMNS = "id BIGINT, category STRING, amount DECIMAL(10,2), event_date DATE"


def _values(first_id: int, count: int, categories: Iterable[str] = CATEGORIES) -> str:
    """``VALUES`` tuples for ``count`` deterministic rows starting at id ``first_id``."""
    cats = list(categories)
    rows = []
    for offset in range(count):
        row_id = first_id + offset
        category = cats[row_id % len(cats)]
        amount = decimal.Decimal(row_id * 37 % 10000) / 100
        day = dt.date(2024, 1, 1) + dt.timedelta(days=row_id % 90)
        rows.append(f"({row_id}, '{category}', {amount}BD, DATE '{day.isoformat()}')")
    return ", ".join(rows)


def _create(o: Oracle, name: str, props: dict[str, str], partitioned_by: str = "category") -> str:
    identifier = f"{HADOOP_CATALOG}.{SCENARIO_NAMESPACE}.{name}"
    if o.spark.catalog.tableExists(identifier):
        raise OracleError(f"{identifier} already exists in {o.warehouse}: build into a fresh warehouse")
    properties = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
    o.spark.sql(
        f"CREATE TABLE {identifier} ({COLUMNS}) USING iceberg PARTITIONED BY ({partitioned_by})"
        f" TBLPROPERTIES ({properties})"
    )
    return identifier


MOR = {
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}
COW = {
    "write.delete.mode": "copy-on-write",
    "write.update.mode": "copy-on-write",
    "write.merge.mode": "copy-on-write",
}


def scenario_v1(o: Oracle) -> str:
    """Format v1, partitioned by category: 3 appends, a partition drop, a row-level (copy-on-write) delete,
    one more append: 6 snapshots."""
    t = _create(o, "v1", {"format-version": "1"})
    for batch in range(3):
        o.spark.sql(f"INSERT INTO {t} VALUES {_values(batch * 12, 12)}")
    o.spark.sql(f"DELETE FROM {t} WHERE category = 'gamma'")  # whole partition: metadata-only delete
    o.spark.sql(f"DELETE FROM {t} WHERE id % 5 = 0")  # rewrites files: overwrite
    o.spark.sql(f"INSERT INTO {t} VALUES {_values(100, 9)}")
    return t


def scenario_v2_cow(o: Oracle) -> str:
    """Format v2 copy-on-write: 2 appends, an UPDATE, a DELETE, a MERGE; no delete files."""
    t = _create(o, "v2_cow", {"format-version": "2", **COW})
    o.spark.sql(f"INSERT INTO {t} VALUES {_values(0, 15)}")
    o.spark.sql(f"INSERT INTO {t} VALUES {_values(15, 15)}")
    o.spark.sql(f"UPDATE {t} SET amount = amount + 1 WHERE id % 4 = 0")
    o.spark.sql(f"DELETE FROM {t} WHERE id % 7 = 3")
    o.spark.sql(
        f"MERGE INTO {t} AS target USING (SELECT * FROM VALUES {_values(25, 10)} AS s({_names()})) AS source"
        " ON target.id = source.id"
        " WHEN MATCHED THEN UPDATE SET target.amount = source.amount * 2"
        " WHEN NOT MATCHED THEN INSERT *"
    )
    return t


def _names() -> str:
    return "id, category, amount, event_date"


def scenario_v2_mor(o: Oracle) -> str:
    """Format v2 merge-on-read: 2 appends, DELETE, UPDATE and DELETE writing position-delete files."""
    t = _create(o, "v2_mor", {"format-version": "2", **MOR})
    o.spark.sql(f"INSERT INTO {t} VALUES {_values(0, 15)}")
    o.spark.sql(f"INSERT INTO {t} VALUES {_values(15, 15)}")
    o.spark.sql(f"DELETE FROM {t} WHERE id % 6 = 1")
    o.spark.sql(f"UPDATE {t} SET amount = amount * 3 WHERE id % 5 = 2")
    o.spark.sql(f"DELETE FROM {t} WHERE id IN (4, 20)")
    return t


def scenario_v1_to_v2(o: Oracle) -> str:
    """Created as v1 (2 appends, a copy-on-write delete), upgraded to v2 with merge-on-read, then an append,
    a position-delete DELETE and an UPDATE."""
    t = _create(o, "v1_to_v2", {"format-version": "1"})
    o.spark.sql(f"INSERT INTO {t} VALUES {_values(0, 12)}")
    o.spark.sql(f"INSERT INTO {t} VALUES {_values(12, 12)}")
    o.spark.sql(f"DELETE FROM {t} WHERE id % 9 = 0")
    props = ", ".join(f"'{k}' = '{v}'" for k, v in {"format-version": "2", **MOR}.items())
    o.spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ({props})")
    o.spark.sql(f"INSERT INTO {t} VALUES {_values(24, 12)}")
    o.spark.sql(f"DELETE FROM {t} WHERE id % 7 = 2")
    o.spark.sql(f"UPDATE {t} SET amount = 0 WHERE id % 10 = 5")
    return t


def scenario_partition_evolution(o: Oracle) -> str:
    """Three partition specs (category; category + bucket(4, id); bucket(4, id) + months(event_date)), an
    added column (note) and a renamed one (amount -> price), with appends and a delete in between."""
    t = _create(o, "partition_evolution", {"format-version": "2", **MOR})
    o.spark.sql(f"INSERT INTO {t} VALUES {_values(0, 12)}")
    o.spark.sql(f"ALTER TABLE {t} ADD PARTITION FIELD bucket(4, id) AS id_bucket")
    o.spark.sql(f"ALTER TABLE {t} ADD COLUMN note STRING")
    o.spark.sql(f"INSERT INTO {t} SELECT *, concat('n', id) FROM VALUES {_values(12, 12)} AS s({_names()})")
    o.spark.sql(f"ALTER TABLE {t} RENAME COLUMN amount TO price")
    o.spark.sql(f"ALTER TABLE {t} REPLACE PARTITION FIELD category WITH months(event_date) AS event_month")
    o.spark.sql(f"INSERT INTO {t} SELECT *, 'late' FROM VALUES {_values(24, 12)} AS s({_names()})")
    o.spark.sql(f"DELETE FROM {t} WHERE id % 8 = 3")
    return t


def scenario_tags_branches(o: Oracle) -> str:
    """Tags and branches with their own retention, commits on branches:
    main: 3 appends; tags t_first (RETAIN 7 DAYS, 1st snapshot), t_second (no retention, 2nd);
    branch audit (RETAIN 30 DAYS, keeps 3 snapshots / 2 days) from the 2nd snapshot with 2 appends + a delete;
    branch dev (keeps 1 snapshot) from the 1st snapshot with 1 append; tag t_audit (RETAIN 1 DAYS) on audit's head.
    """
    t = _create(o, "tags_branches", {"format-version": "2", **MOR})
    o.spark.sql(f"INSERT INTO {t} VALUES {_values(0, 9)}")
    first = o.load(t).currentSnapshot().snapshotId()
    o.spark.sql(f"ALTER TABLE {t} CREATE TAG t_first RETAIN 7 DAYS")
    o.spark.sql(f"INSERT INTO {t} VALUES {_values(9, 9)}")
    o.spark.sql(f"ALTER TABLE {t} CREATE TAG t_second")
    o.spark.sql(
        f"ALTER TABLE {t} CREATE BRANCH audit RETAIN 30 DAYS WITH SNAPSHOT RETENTION 3 SNAPSHOTS 2 DAYS"
    )
    o.spark.sql(f"INSERT INTO {t}.branch_audit VALUES {_values(100, 6)}")
    o.spark.sql(f"INSERT INTO {t}.branch_audit VALUES {_values(106, 6)}")
    o.spark.sql(f"DELETE FROM {t}.branch_audit WHERE id % 3 = 0")
    o.spark.sql(
        f"ALTER TABLE {t} CREATE BRANCH dev AS OF VERSION {first} WITH SNAPSHOT RETENTION 1 SNAPSHOTS"
    )
    o.spark.sql(f"INSERT INTO {t}.branch_dev VALUES {_values(200, 6)}")
    audit_head = o.refs(o.load(t))["audit"]
    o.spark.sql(f"ALTER TABLE {t} CREATE TAG t_audit AS OF VERSION {audit_head} RETAIN 1 DAYS")
    o.spark.sql(f"INSERT INTO {t} VALUES {_values(18, 9)}")
    return t


MANY_JAVA_COMMITS = 40


def scenario_many_commits(o: Oracle) -> str:
    """40 Java-API fast appends (3 rows, one file each; fast, no Spark job per commit), then a SQL append and
    a copy-on-write SQL delete: 42 snapshots."""
    t = _create(o, "many_commits", {"format-version": "2", **COW})
    commits = []
    for index in range(MANY_JAVA_COMMITS):
        category = CATEGORIES[index % len(CATEGORIES)]
        commits.append(
            [
                {
                    "id": index * 3 + k,
                    "category": category,
                    "amount": f"{index}.{k}0",
                    "event_date": (dt.date(2024, 1, 1) + dt.timedelta(days=index)).isoformat(),
                }
                for k in range(3)
            ]
        )
    o.append(t, commits)
    o.spark.sql(f"INSERT INTO {t} VALUES {_values(1000, 9)}")
    o.spark.sql(f"DELETE FROM {t} WHERE id % 11 = 0")
    return t


def scenario_v3_dv(o: Oracle) -> str:
    """Format v3 merge-on-read: deletes write deletion vectors (Puffin): 2 appends, a DELETE, a second DELETE on
    the same files (the DVs are replaced by merged ones), an UPDATE, an append."""
    t = _create(o, "v3_dv", {"format-version": "3", **MOR})
    o.spark.sql(f"INSERT INTO {t} VALUES {_values(0, 15)}")
    o.spark.sql(f"INSERT INTO {t} VALUES {_values(15, 15)}")
    o.spark.sql(f"DELETE FROM {t} WHERE id % 6 = 1")
    o.spark.sql(f"DELETE FROM {t} WHERE id % 6 = 2")
    o.spark.sql(f"UPDATE {t} SET amount = amount + 10 WHERE id % 5 = 0")
    o.spark.sql(f"INSERT INTO {t} VALUES {_values(30, 6)}")
    return t


def scenario_jdbc_basic(o: Oracle) -> str:
    """In the JDBC catalog (``jc.jdb.jdbc_basic``, needs --catalog-db): format v2 merge-on-read, 2 appends and a
    position-delete DELETE."""
    if o.catalog_db is None:
        raise OracleError("scenario jdbc_basic needs --catalog-db")
    identifier = f"{JDBC_CATALOG}.{JDBC_NAMESPACE}.jdbc_basic"
    o.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {JDBC_CATALOG}.{JDBC_NAMESPACE}")
    if o.spark.catalog.tableExists(identifier):
        raise OracleError(f"{identifier} already exists in {o.catalog_db}")
    props = ", ".join(f"'{k}' = '{v}'" for k, v in {"format-version": "2", **MOR}.items())
    o.spark.sql(
        f"CREATE TABLE {identifier} ({COLUMNS}) USING iceberg PARTITIONED BY (category) TBLPROPERTIES ({props})"
    )
    o.spark.sql(f"INSERT INTO {identifier} VALUES {_values(0, 10)}")
    o.spark.sql(f"INSERT INTO {identifier} VALUES {_values(10, 10)}")
    o.spark.sql(f"DELETE FROM {identifier} WHERE id % 4 = 1")
    return identifier


SCENARIOS: dict[str, Callable[[Oracle], str]] = {
    "v1": scenario_v1,
    "v2_cow": scenario_v2_cow,
    "v2_mor": scenario_v2_mor,
    "v1_to_v2": scenario_v1_to_v2,
    "partition_evolution": scenario_partition_evolution,
    "tags_branches": scenario_tags_branches,
    "many_commits": scenario_many_commits,
    "v3_dv": scenario_v3_dv,
    "jdbc_basic": scenario_jdbc_basic,
}


# ----------------------------------------------------------------------------------------------
# Commands for the write, concurrency and benchmark interop tests (load-metadata, manifest-list,
# merge-append, append-loop, time-call, wait-file)
# ----------------------------------------------------------------------------------------------


def _manifest_row(manifest: Any) -> dict[str, Any]:
    def count(value: Any) -> int | None:
        return None if value is None else int(value)

    return {
        "path": str(manifest.path()),
        "content": str(manifest.content().name()),
        "spec_id": int(manifest.partitionSpecId()),
        "length": int(manifest.length()),
        "added_snapshot_id": None if manifest.snapshotId() is None else int(manifest.snapshotId()),
        "added_files_count": count(manifest.addedFilesCount()),
        "existing_files_count": count(manifest.existingFilesCount()),
        "deleted_files_count": count(manifest.deletedFilesCount()),
    }


def manifest_list(o: Oracle, table: Any, snapshot_id: int | None) -> list[dict[str, Any]]:
    """The manifest list of a snapshot (Java API), in list order."""
    if snapshot_id is None:
        return []
    return [_manifest_row(m) for m in table.snapshot(snapshot_id).allManifests(table.io())]


def load_metadata(o: Oracle, metadata: str) -> dict[str, Any]:
    """Java's view of ONE metadata file (``StaticTableOperations``): what a reader that loaded exactly that
    version sees: current snapshot, snapshots with parent and operation, refs, live files at the current
    snapshot."""
    iceberg = o.jvm.org.apache.iceberg
    conf = o.spark._jsparkSession.sessionState().newHadoopConf()
    io = iceberg.hadoop.HadoopFileIO(conf)
    table = iceberg.BaseTable(iceberg.StaticTableOperations(metadata, io), metadata)
    current = table.currentSnapshot()
    current_id = None if current is None else int(current.snapshotId())
    snapshots = [
        {
            "snapshot_id": int(s.snapshotId()),
            "parent_id": None if s.parentId() is None else int(s.parentId()),
            "sequence_number": int(s.sequenceNumber()),
            "operation": None if s.operation() is None else str(s.operation()),
        }
        for s in table.snapshots()
    ]
    return {
        "metadata": metadata,
        "format_version": int(table.operations().current().formatVersion()),
        "current_snapshot_id": current_id,
        "snapshots": snapshots,
        "refs": o.refs(table),
        "files": o.files_java(table, current_id),
    }


def merge_append(o: Oracle, identifier: str, branch: str | None = None) -> dict[str, Any]:
    """Commit an EMPTY ``newAppend()`` (MergeAppend) to main or ``branch``: Java's commit-time merge policy
    (``ManifestMergeManager``) runs on the existing manifests alone, which is what our "minor" manifest
    compaction models. Prints the manifest lists before and after and the new snapshot id."""
    table = o.load(identifier)
    head = table.currentSnapshot() if branch is None else table.snapshot(branch)
    if head is None and branch is not None:
        raise OracleError(f"merge-append: no branch {branch!r} in {identifier}")
    before = manifest_list(o, table, None if head is None else int(head.snapshotId()))
    operation = table.newAppend().set("lakeformat.probe", "empty-merge-append")
    if branch is not None:
        operation = operation.toBranch(branch)
    operation.commit()
    table.refresh()
    new_head = int((table.currentSnapshot() if branch is None else table.snapshot(branch)).snapshotId())
    return {
        "parent_id": None if head is None else int(head.snapshotId()),
        "snapshot_id": new_head,
        "manifests_before": before,
        "manifests_after": manifest_list(o, table, new_head),
    }


def _java_exception_class(exc: BaseException) -> str:
    java = getattr(exc, "java_exception", None)
    return "" if java is None else str(java.getClass().getName())


def append_loop(
    o: Oracle,
    identifier: str,
    writers: list[str],
    count: int,
    rows_per_commit: int,
    interval_ms: int,
    ready_file: Path | None,
    go_file: Path | None,
    pause_every: int = 0,
    pause_dir: Path | None = None,
) -> dict[str, Any]:
    """Java writers, one JVM thread each, each committing ``count`` Java-API fast appends concurrently.

    The table needs columns ``writer`` (string), ``seq`` and ``k`` (integers); other columns stay null.
    Commit ``seq`` of writer ``W`` holds rows (W, seq, k) for k < rows_per_commit and sets the snapshot
    summary properties ``lakeformat.writer=W``, ``lakeformat.seq=seq``. Java's own retry
    (``commit.retry.*``) handles conflicts; when it gives up (CommitFailedException: nothing landed) the
    same files are committed again, counted in ``exhausted``. Any other failure stops the loop and is
    reported. With ``ready_file``/``go_file``: write the first once everything is prepared (rows converted,
    tables loaded), then wait for the second, so that the caller can start its own writers at the same
    moment. With ``pause_every``: a barrier after every ``pause_every`` commits of each writer (except after
    its last): ``pause_dir/paused-<writer>-<round>`` is written, then ``pause_dir/resume-<round>`` awaited,
    so that the caller can act between rounds while every writer stands still."""
    import threading

    if pause_every and pause_dir is None:
        raise OracleError("append-loop: --pause-every needs --pause-dir")
    rows = [
        {"writer": writer, "seq": seq, "k": k}
        for writer in writers
        for seq in range(count)
        for k in range(rows_per_commit)
    ]
    table = o.load(identifier)
    schema, spec = table.schema(), table.spec()
    columns = [(str(f.name()), str(f.type().typeId().name())) for f in schema.columns()]
    names = [name for name, _ in columns]
    for required in ("writer", "seq", "k"):
        if required not in names:
            raise OracleError(f"append-loop needs a column {required!r} ({identifier} has {names})")
    java_rows = o._spark_rows(identifier, names, rows)
    iceberg = o.jvm.org.apache.iceberg
    converter = o.jvm.org.apache.iceberg.spark.SparkValueConverter
    records = [converter.convert(schema, java_rows.get(i)) for i in range(len(rows))]
    tables = {writer: o.load(identifier) for writer in writers}
    report: dict[str, dict[str, Any]] = {w: {"commits": 0, "exhausted": 0, "error": None} for w in writers}
    if ready_file is not None:
        ready_file.write_text("ready", encoding="utf-8")
    if go_file is not None:
        deadline = time.monotonic() + 300
        while not go_file.exists():
            if time.monotonic() > deadline:
                raise OracleError(f"{go_file} did not appear within 300 s")
            time.sleep(0.01)

    def commit_one(writer: str, writer_table: Any, seq: int) -> None:
        factory = iceberg.data.GenericAppenderFactory(schema, spec)
        wrapper = iceberg.data.InternalRecordWrapper(schema.asStruct())  # mutable: one per thread
        groups: dict[str, tuple[Any, list[Any]]] = {}
        base = (writers.index(writer) * count + seq) * rows_per_commit
        for record in records[base : base + rows_per_commit]:
            key = iceberg.PartitionKey(spec, schema)
            key.partition(wrapper.wrap(record))
            path = str(spec.partitionToPath(key)) if spec.isPartitioned() else ""
            groups.setdefault(path, (key, []))[1].append(record)
        data_files = []
        for file_index, (key, group) in enumerate(groups.values()):
            name = f"java-loop-{writer}-{seq:05d}-{file_index:03d}-{time.time_ns()}.parquet"
            location = writer_table.locationProvider().newDataLocation(spec, key, name)
            output = iceberg.encryption.EncryptedFiles.plainAsEncryptedOutput(
                writer_table.io().newOutputFile(location)
            )
            data_writer = factory.newDataWriter(
                output, iceberg.FileFormat.PARQUET, key if spec.isPartitioned() else None
            )
            try:
                for record in group:
                    data_writer.write(record)
            finally:
                data_writer.close()
            data_files.append(data_writer.toDataFile())
        while True:
            operation = writer_table.newFastAppend()
            operation = operation.set("lakeformat.writer", writer).set("lakeformat.seq", str(seq))
            for data_file in data_files:
                operation = operation.appendFile(data_file)
            try:
                operation.commit()
                return
            except Exception as exc:
                if not _java_exception_class(exc).endswith("CommitFailedException"):
                    raise
                report[writer]["exhausted"] += 1
                writer_table.refresh()

    def pause(writer: str, round_: int) -> None:
        assert pause_dir is not None
        (pause_dir / f"paused-{writer}-{round_}").write_text("paused", encoding="utf-8")
        resume, deadline = pause_dir / f"resume-{round_}", time.monotonic() + 300
        while not resume.exists():
            if time.monotonic() > deadline:
                raise OracleError(f"{resume} did not appear within 300 s")
            time.sleep(0.005)

    def run(writer: str) -> None:
        started = time.monotonic()
        try:
            for seq in range(count):
                commit_one(writer, tables[writer], seq)
                report[writer]["commits"] += 1
                if pause_every and (seq + 1) % pause_every == 0 and seq + 1 < count:
                    pause(writer, (seq + 1) // pause_every)
                if interval_ms:
                    time.sleep(interval_ms / 1000.0)
        except Exception as exc:  # reported, not raised: the other writer keeps going
            report[writer]["error"] = f"{type(exc).__name__}: {exc}"[:4000]
            if pause_dir is not None:  # a caller waiting at a barrier must not wait for this writer
                (pause_dir / f"failed-{writer}").write_text(report[writer]["error"], encoding="utf-8")
        report[writer]["seconds"] = round(time.monotonic() - started, 3)

    threads = [threading.Thread(target=run, args=(w,), name=f"java-writer-{w}") for w in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"writers": report}


def timed_call(o: Oracle, identifier: str, procedure: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """``call``, timed inside the session: {"rows", "seconds", "session_seconds"} (the session start is
    reported apart and not included)."""
    catalog, namespace, name = identifier.split(".")
    parts = [f"table => {sql_literal(f'{namespace}.{name}')}"]
    parts += [f"{key} => {sql_literal(value)}" for key, value in arguments.items()]
    started = time.perf_counter()
    rows = o.sql(f"CALL {catalog}.system.{procedure}({', '.join(parts)})")
    seconds = time.perf_counter() - started
    return {"rows": rows, "seconds": round(seconds, 3), "session_seconds": o.session_seconds}


def _add_extra_commands(commands: Any, parent: argparse.ArgumentParser) -> None:
    load = commands.add_parser("load-metadata", parents=[parent])
    load.add_argument("--metadata", required=True)
    listing = commands.add_parser("manifest-list", parents=[parent])
    listing.add_argument("--table", required=True)
    listing.add_argument("--snapshot", type=int)
    merge = commands.add_parser("merge-append", parents=[parent])
    merge.add_argument("--table", required=True)
    merge.add_argument("--branch")
    loop = commands.add_parser("append-loop", parents=[parent])
    loop.add_argument("--table", required=True)
    loop.add_argument("--writer", action="append", required=True)
    loop.add_argument("--count", type=int, required=True)
    loop.add_argument("--rows-per-commit", type=int, default=1)
    loop.add_argument("--interval-ms", type=int, default=0)
    loop.add_argument("--ready-file", type=Path)
    loop.add_argument("--go-file", type=Path)
    loop.add_argument("--pause-every", type=int, default=0)
    loop.add_argument("--pause-dir", type=Path)
    rows = commands.add_parser("row-loop", parents=[parent])
    rows.add_argument("--table", required=True)
    rows.add_argument("--writer", action="append", required=True)
    rows.add_argument("--count", type=int, required=True)
    rows.add_argument("--rows-per-commit", type=int, default=3)
    for name in ("--ready-file", "--go-file", "--pause-dir", "--trigger-dir"):
        rows.add_argument(name, type=Path)
    rows.add_argument("--pause-every", type=int, default=0)
    timed = commands.add_parser("time-call", parents=[parent])
    timed.add_argument("--procedure", required=True)
    timed.add_argument("--table", required=True)
    timed.add_argument("--args", default="{}")
    eq = commands.add_parser("add-equality-deletes", parents=[parent])
    eq.add_argument("--table", required=True)
    eq.add_argument("--file", required=True, help="a Parquet file of the equality columns (field ids set)")
    eq.add_argument("--equality-id", type=int, action="append", required=True)
    eq.add_argument("--partition-path", help="e.g. category=a (omit for an unpartitioned spec)")
    eq.add_argument("--record-count", type=int, required=True)
    tasks = commands.add_parser("scan-tasks", parents=[parent])
    tasks.add_argument("--table", required=True)
    tasks.add_argument("--snapshot", type=int)
    wait = commands.add_parser("wait-file", parents=[parent])
    wait.add_argument("--path", type=Path, required=True)
    wait.add_argument("--timeout", type=float, default=600.0)
    wait.add_argument("--signal", type=Path)


EXTRA_COMMANDS = (
    "load-metadata", "manifest-list", "merge-append", "append-loop", "time-call", "wait-file", "scan-tasks",
    "add-equality-deletes", "row-loop",
)  # fmt: skip


def add_equality_deletes(
    o: Oracle, table: Any, path: str, equality_ids: list[int], partition_path: str | None, records: int
) -> dict[str, Any]:
    """Commit an equality-delete file as Flink's writer does: a row delta adding it (Java reads it from then on)."""
    gateway = o.spark.sparkContext._gateway
    ids = gateway.new_array(o.jvm.int, len(equality_ids))
    for index, field_id in enumerate(equality_ids):
        ids[index] = field_id
    builder = (
        o.jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(table.spec())
        .ofEqualityDeletes(ids)
        .withPath(path)
        .withFormat(o.jvm.org.apache.iceberg.FileFormat.PARQUET)
        .withFileSizeInBytes(Path(path).stat().st_size)
        .withRecordCount(records)
    )
    if partition_path:
        builder = builder.withPartitionPath(partition_path)
    table.newRowDelta().addDeletes(builder.build()).commit()
    table.refresh()
    return {"snapshot_id": int(table.currentSnapshot().snapshotId())}


def scan_tasks(o: Oracle, table: Any, snapshot_id: int | None) -> dict[str, list[str]]:
    """Java's planned scan at a snapshot: each live data file's path -> the sorted paths of the delete files
    ``task.deletes()`` attaches to it (Java's DeleteFileIndex; what rewrite_data_files reads with)."""
    if snapshot_id is None:
        return {}
    result: dict[str, list[str]] = {}
    tasks = table.newScan().useSnapshot(snapshot_id).ignoreResiduals().planFiles()
    try:
        iterator = tasks.iterator()
        while iterator.hasNext():
            task = iterator.next()
            deletes = sorted(str(d.location()) for d in task.deletes())
            result[str(task.file().location())] = deletes
    finally:
        tasks.close()
    return result


def wait_file(path: Path, timeout: float, signal: Path | None = None) -> dict[str, Any]:
    """Write ``signal`` (if given), then wait until ``path`` exists (see ``wait-file``)."""
    if signal is not None:
        signal.write_text("waiting", encoding="utf-8")
    started = time.monotonic()
    while not path.exists():
        if time.monotonic() - started > timeout:
            raise OracleError(f"{path} did not appear within {timeout} s")
        time.sleep(0.01)
    return {"waited_seconds": round(time.monotonic() - started, 3)}


def _run_extra(o: Oracle, args: argparse.Namespace) -> Any:
    if args.command == "load-metadata":
        return load_metadata(o, args.metadata)
    if args.command == "wait-file":
        return wait_file(args.path, args.timeout, args.signal)
    identifier = o.identifier(args.table)
    if args.command == "manifest-list":
        table = o.load(identifier)
        return manifest_list(o, table, o.resolve_version(table, args.snapshot, None))
    if args.command == "merge-append":
        return merge_append(o, identifier, args.branch)
    if args.command == "append-loop":
        return append_loop(
            o, identifier, args.writer, args.count, args.rows_per_commit, args.interval_ms,
            args.ready_file, args.go_file, args.pause_every, args.pause_dir,
        )  # fmt: skip
    if args.command == "row-loop":
        from iceberg_oracle_row_loop import row_loop  # beside this script (its directory is on sys.path)

        options = {
            "rows_per_commit": args.rows_per_commit, "ready_file": args.ready_file, "go_file": args.go_file,
            "pause_every": args.pause_every, "pause_dir": args.pause_dir, "trigger_dir": args.trigger_dir,
        }  # fmt: skip
        return row_loop(o, identifier, args.writer, args.count, options)
    if args.command == "time-call":
        return timed_call(o, identifier, args.procedure, json.loads(args.args))
    if args.command == "add-equality-deletes":
        table = o.load(identifier)
        return add_equality_deletes(
            o, table, args.file, args.equality_id, args.partition_path, args.record_count
        )
    if args.command == "scan-tasks":
        table = o.load(identifier)
        return scan_tasks(o, table, o.resolve_version(table, args.snapshot, None))
    raise OracleError(f"unknown command {args.command}")


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------


def _session_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--warehouse", type=Path, default=argparse.SUPPRESS)
    parent.add_argument("--catalog-db", type=Path, default=argparse.SUPPRESS)
    parent.add_argument("--conf", action="append", default=argparse.SUPPRESS, metavar="KEY=VALUE")
    return parent


def _version_options(parser: argparse.ArgumentParser, allow_all: bool) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--snapshot", type=int)
    group.add_argument("--ref")
    if allow_all:
        group.add_argument("--all", action="store_true", dest="all_versions")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (commands documented in the module docstring)."""
    parent = _session_options()
    parser = argparse.ArgumentParser(prog="iceberg_oracle.py", description=__doc__.split("\n\n", 1)[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", parents=[parent])
    build.add_argument("--scenario", nargs="+", required=True, choices=sorted(SCENARIOS))
    for name in ("files", "entries", "rows"):
        sub = commands.add_parser(name, parents=[parent])
        sub.add_argument("--table", required=True)
        _version_options(sub, allow_all=name != "entries")
        if name == "files":
            sub.add_argument("--source", choices=("sql", "java"), default="sql")
    snapshots = commands.add_parser("snapshots", parents=[parent])
    snapshots.add_argument("--table", required=True)
    sql = commands.add_parser("sql", parents=[parent])
    sql.add_argument("--statement", action="append", required=True)
    call = commands.add_parser("call", parents=[parent])
    call.add_argument("--procedure", required=True)
    call.add_argument("--table", required=True)
    call.add_argument("--args", default="{}", help="JSON object of named procedure arguments")
    append = commands.add_parser("append", parents=[parent])
    append.add_argument("--table", required=True)
    append.add_argument("--rows", type=Path, required=True)
    append.add_argument("--ref")
    append.add_argument("--merge", action="store_true")
    expire = commands.add_parser("expire-files", parents=[parent])
    expire.add_argument("--table", required=True)
    expire.add_argument("--older-than-ms", type=int)
    expire.add_argument("--retain-last", type=int)
    expire.add_argument("--snapshot-id", type=int, action="append", default=[])
    _add_extra_commands(commands, parent)
    batch = commands.add_parser("batch", parents=[parent])
    batch.add_argument("file", nargs="?", default="-")
    commands.add_parser("serve")
    return parser


def run_command(o: Oracle, args: argparse.Namespace) -> Any:
    """Execute one parsed command in the session ``o``."""
    command = args.command
    if command == "build":
        tables, seconds = {}, {}
        for name in args.scenario:
            started = time.monotonic()
            identifier = SCENARIOS[name](o)
            seconds[name] = round(time.monotonic() - started, 2)
            tables[name] = o.summary(identifier)
        return {
            "warehouse": str(o.warehouse),
            "catalog_db": None if o.catalog_db is None else str(o.catalog_db),
            "session_seconds": o.session_seconds,
            "tables": tables,
            "seconds": seconds,
        }
    if command == "sql":
        return [o.sql(statement) for statement in args.statement]
    if command in EXTRA_COMMANDS:
        return _run_extra(o, args)
    identifier = o.identifier(args.table)
    if command in ("files", "rows", "entries"):
        table = o.load(identifier)
        version = o.resolve_version(table, args.snapshot, args.ref)
        if command == "entries":
            return o.entries(identifier, version)
        if command == "rows":
            read: Callable[[int], Any] = lambda sid: o.rows(identifier, sid)  # noqa: E731
        elif args.source == "java":
            read = lambda sid: o.files_java(table, sid)  # noqa: E731
        else:
            read = lambda sid: o.files_sql(identifier, sid)  # noqa: E731
        result = o.per_version(identifier, table, read, args.all_versions, version)
        if args.all_versions:
            key = "rows" if command == "rows" else "files"
            result["refs"] = {
                n: {"snapshot_id": r["snapshot_id"], key: r["result"]} for n, r in result["refs"].items()
            }
        return result
    if command == "snapshots":
        return o.snapshots(identifier)
    if command == "call":
        catalog, namespace, name = identifier.split(".")
        arguments = [f"table => {sql_literal(f'{namespace}.{name}')}"]
        for key, value in json.loads(args.args).items():
            arguments.append(f"{key} => {sql_literal(value)}")
        return o.sql(f"CALL {catalog}.system.{args.procedure}({', '.join(arguments)})")
    if command == "append":
        commits = json.loads(args.rows.read_text(encoding="utf-8"))
        if not isinstance(commits, list) or not all(isinstance(c, list) for c in commits):
            raise OracleError("--rows must hold a JSON list of commits, each a list of row objects")
        return {"snapshot_ids": o.append(identifier, commits, ref=args.ref, merge=args.merge)}
    if command == "expire-files":
        return o.expire_files(identifier, args.older_than_ms, args.retain_last, args.snapshot_id)
    raise OracleError(f"unknown command {command}")


def _timed(o: Oracle, args: argparse.Namespace) -> Any:
    """run_command, logging its duration on stderr (the session start is logged once, first)."""
    if not getattr(o, "_logged_session", False):
        print(f"iceberg_oracle: spark session started in {o.session_seconds} s", file=sys.stderr)
        o._logged_session = True  # type: ignore[attr-defined]
    started = time.monotonic()
    result = run_command(o, args)
    label = " ".join(str(v) for k, v in vars(args).items() if v not in (None, False, []))
    print(f"iceberg_oracle: {label}: {time.monotonic() - started:.2f} s", file=sys.stderr)
    return result


def _session_settings(args: argparse.Namespace) -> tuple[Path, Path | None, dict[str, str]]:
    warehouse = getattr(args, "warehouse", None)
    if warehouse is None:
        raise OracleError("--warehouse is required")
    confs = {}
    for item in getattr(args, "conf", None) or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise OracleError(f"--conf wants KEY=VALUE, got {item!r}")
        confs[key] = value
    return warehouse, getattr(args, "catalog_db", None), confs


def _batch_commands(parse: Callable[[list[str]], argparse.Namespace], text: str) -> list[argparse.Namespace]:
    """The commands of a ``batch`` (a JSON list of argument lists without session options), parsed."""
    sub_args = [parse([str(a) for a in argv]) for argv in json.loads(text)]
    for sub in sub_args:
        if sub.command == "batch":
            raise OracleError("batch cannot nest")
        if sub.command == "serve":
            raise OracleError("serve cannot run in a batch")
        for option in ("warehouse", "catalog_db", "conf"):
            if hasattr(sub, option):
                raise OracleError(f"batch commands take no session option (--{option.replace('_', '-')})")
    return sub_args


def _run(oracle: Oracle, args: argparse.Namespace, commands: list[argparse.Namespace] | None) -> Any:
    """One command, or the commands of a batch, in a session already targeted."""
    if commands is None:
        return _timed(oracle, args)
    return [_timed(oracle, sub) for sub in commands]


def _prepare() -> Any:
    """stdout discipline and the process time zone; returns the writer for the real stdout."""
    out = _protect_stdout()
    # pyspark turns timestamps into naive datetimes in the PROCESS time zone: make that UTC, like the session.
    os.environ["TZ"] = "UTC"
    time.tzset()
    return out


def main(argv: list[str] | None = None) -> int:
    """Parse, run in one Spark session, print one JSON document on the real stdout (``serve``: many)."""
    out = _prepare()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "serve":
        return serve(parser, sys.stdin, out)
    try:
        warehouse, catalog_db, confs = _session_settings(args)
        commands = None
        if args.command == "batch":
            text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
            commands = _batch_commands(parser.parse_args, text)
        oracle = Oracle(confs)
        oracle.target(warehouse, catalog_db)
        result = _run(oracle, args, commands)
    except OracleError as exc:
        print(f"iceberg_oracle: error: {exc}", file=sys.stderr)
        return 2
    except Exception:
        traceback.print_exc()
        return 1
    json.dump(result, out, sort_keys=False)
    out.write("\n")
    out.flush()
    _stop(oracle)
    return 0


def _stop(oracle: Oracle | None) -> None:
    if oracle is None:
        return
    try:
        oracle.spark.stop()
    except Exception:  # the JSON is out; a failing shutdown must not turn success into failure
        traceback.print_exc()


# ----------------------------------------------------------------------------------------------
# serve: one Spark session, many requests
# ----------------------------------------------------------------------------------------------


def serve(parser: argparse.ArgumentParser, requests: Any, out: Any) -> int:
    """Answer JSON-lines requests from ``requests`` until it ends, in ONE Spark session started with the
    first request. A request is ``{"argv": [command, session options..., args...], "stdin": text for
    batch}``; the answer, one line on ``out``, ``{"ok": true, "result": ...}`` or ``{"ok": false, "code": 2
    (precondition) | 1 (anything else), "error": message or traceback}``. Every request gets the session
    re-targeted (Oracle.target), so nothing of one request is seen by the next."""
    state: dict[str, Oracle] = {}
    for line in requests:
        if not line.strip():
            continue
        answer = _answer(parser, state, line)
        try:
            text = json.dumps(answer, sort_keys=False)
        except (TypeError, ValueError):
            text = json.dumps({"ok": False, "code": 1, "error": traceback.format_exc()})
        out.write(text + "\n")
        out.flush()
        if not answer["ok"] and "oracle" in state and not _jvm_alive(state["oracle"]):
            print("iceberg_oracle: serve: the JVM is gone, exiting", file=sys.stderr)
            return 1
    _stop(state.get("oracle"))
    return 0


def _answer(parser: argparse.ArgumentParser, state: dict[str, Oracle], line: str) -> dict[str, Any]:
    """One request of ``serve``: parse it, (start and) target the session, run it."""
    try:
        request = json.loads(line)
        args = _parse_request(parser, [str(a) for a in request["argv"]])
        warehouse, catalog_db, confs = _session_settings(args)
        if confs:
            raise OracleError("serve runs no --conf: run a command with Spark settings on its own")
        commands = None
        if args.command == "batch":
            text = request.get("stdin") if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
            commands = _batch_commands(lambda argv: _parse_request(parser, argv), text or "")
        if "oracle" not in state:
            state["oracle"] = Oracle({})
        state["oracle"].target(warehouse, catalog_db)
        return {"ok": True, "result": _run(state["oracle"], args, commands)}
    except OracleError as exc:
        print(f"iceberg_oracle: error: {exc}", file=sys.stderr, flush=True)
        return {"ok": False, "code": 2, "error": str(exc)}
    except Exception:
        message = traceback.format_exc()
        print(message, file=sys.stderr, flush=True)
        return {"ok": False, "code": 1, "error": message}


def _parse_request(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """argparse's parse, its usage errors as OracleError (the CLI exits 2 for them too)."""
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            args = parser.parse_args(argv)
    except SystemExit:
        raise OracleError(errors.getvalue().strip() or f"cannot parse {argv}") from None
    if args.command == "serve":
        raise OracleError("serve cannot be a request")
    return args


def _jvm_alive(oracle: Oracle) -> bool:
    try:
        oracle.jvm.java.lang.System.currentTimeMillis()
    except Exception:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
