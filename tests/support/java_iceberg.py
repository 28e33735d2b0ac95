"""Main-process side of the Java Iceberg oracle (Java Iceberg 1.10.2 in Spark 3.5.7).

Spark 3.5 cannot live next to the main venv's pyspark 4.3, so the oracle has its own virtualenv (``.venv-iceberg``,
made by ``scripts/setup_iceberg_oracle.sh``) and this module only talks to it through subprocesses running
``tests/interop/iceberg_oracle.py`` (see its docstring for the commands). Nothing here imports pyspark.
``$LAKEFORMAT_ICEBERG_PYTHON`` overrides the oracle's interpreter.

Processes: :func:`run_oracle` (and so :func:`run_oracle_batch`, the fixtures' builds and every
:class:`JavaIcebergWarehouse` helper) sends its command to ONE ``iceberg_oracle.py serve`` process per pytest
process, started on first use and stopped at exit (a JVM and a Spark session start cost 15-25 s; a request to the
running server costs its own work only). The server re-targets its catalogs at each request's warehouse and drops
what the previous request left, so requests don't see each other. Its log goes to a temporary file whose tail is
in the errors; if it dies or times out (it is killed then), the next request starts a new one. Two kinds of call
get a subprocess of their own: those with ``conf`` (Spark settings fixed at a session's start) and those made
while another thread's request is running. :func:`start_oracle` (background commands, for concurrency tests)
always starts its own process. The server's client is ``tests/support/oracle_server.py``, shared with the
pypaimon oracle.

Fixtures (register with ``pytest_plugins = ["tests.support.java_iceberg"]`` in ``tests/conftest.py`` or in the
test module):

    java_iceberg_warehouse        session-scoped: every scenario built once by Java (Hadoop catalog ``hc``,
                                  tables ``hc.db.<scenario>``; JDBC catalog ``jc`` on a SQLite file with
                                  ``jc.jdb.jdbc_basic``), plus Java's baseline views of each table
                                  (``.baseline[scenario]``: files at every snapshot/ref, snapshots, rows).
                                  READ-ONLY: never modify it.
    fresh_java_iceberg_warehouse  function-scoped: the same warehouse, restored from a tarball to its pristine
                                  state before the test and again after it; modify freely.

Why restore instead of copy: Iceberg metadata holds absolute paths (metadata.json -> manifest lists -> manifests
-> data files), so a ``cp -r`` of a table is not an independent table; expiring "the copy" deletes the
original's files. The session build therefore lives at one fixed path for the whole session, is tarred right
after the build, and ``fresh_java_iceberg_warehouse`` untars it back over that SAME path. Both fixtures hand out
the same :class:`JavaIcebergWarehouse` paths; a test must not use the read-only one for writes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.oracle_server import OracleClient, always_same_env

REPO_ROOT = Path(__file__).resolve().parents[2]
ORACLE_SCRIPT = REPO_ROOT / "tests" / "interop" / "iceberg_oracle.py"
RELOCATE_SCRIPT = REPO_ROOT / "scripts" / "relocate_jackson.py"
VENV = REPO_ROOT / ".venv-iceberg"
PYTHON_ENV_VAR = "LAKEFORMAT_ICEBERG_PYTHON"
DEFAULT_PYTHON = VENV / "bin" / "python"
DEFAULT_JAVA_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"
DEFAULT_TIMEOUT = 900.0
RUNTIME_JAR_NAME = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"

HADOOP_CATALOG = "hc"
JDBC_CATALOG = "jc"  # also the catalog_name pyiceberg's SqlCatalog must use to see Java's JDBC tables
SCENARIOS = (
    "v1",
    "v2_cow",
    "v2_mor",
    "v1_to_v2",
    "partition_evolution",
    "tags_branches",
    "many_commits",
    "v3_dv",
)
JDBC_SCENARIOS = ("jdbc_basic",)


class JavaIcebergUnavailableError(RuntimeError):
    """The oracle virtualenv or its jars are missing."""


class JavaIcebergOracleError(RuntimeError):
    """The oracle subprocess failed or printed something that is not one JSON document."""


def iceberg_python() -> Path:
    """The interpreter of ``.venv-iceberg`` ($LAKEFORMAT_ICEBERG_PYTHON overrides the default)."""
    override = os.environ.get(PYTHON_ENV_VAR)
    python = Path(override) if override else DEFAULT_PYTHON
    if not (python.is_file() and os.access(python, os.X_OK)):
        origin = f"${PYTHON_ENV_VAR}" if override else "the default location"
        raise JavaIcebergUnavailableError(
            f"Java Iceberg oracle interpreter not found at {python} ({origin}). "
            "Run `bash scripts/setup_iceberg_oracle.sh` (or scripts/setup.sh) to create .venv-iceberg."
        )
    return python


def oracle_jars() -> dict[str, Path]:
    """The jars the oracle runs with: ``runtime`` (from the PyPI wheel), ``jackson`` (relocated), ``sqlite``."""
    runtime = sorted(
        VENV.glob(f"lib/python*/site-packages/snowpark_connect_deps_iceberg/jars/{RUNTIME_JAR_NAME}")
    )
    jackson = sorted((VENV / "oracle-jars").glob("iceberg-shaded-jackson-*.jar"))
    sqlite = VENV / "oracle-jars" / "sqlite-jdbc.jar"
    if not runtime or not jackson or not sqlite.is_file():
        raise JavaIcebergUnavailableError(
            f"oracle jars missing under {VENV}: run `bash scripts/setup_iceberg_oracle.sh`"
        )
    return {"runtime": runtime[-1], "jackson": jackson[-1], "sqlite": sqlite}


def _session_args(warehouse: Path, catalog_db: Path | None, conf: Mapping[str, str] | None) -> list[str]:
    args = ["--warehouse", str(warehouse)]
    if catalog_db is not None:
        args += ["--catalog-db", str(catalog_db)]
    for key, value in (conf or {}).items():
        args += ["--conf", f"{key}={value}"]
    return args


def _oracle_env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "SPARK_HOME", "PYSPARK_PYTHON"):
        env.pop(name, None)  # the main venv's settings (and its pyspark 4) must not leak into the oracle
    env.setdefault("JAVA_HOME", DEFAULT_JAVA_HOME)
    env["PYTHONWARNINGS"] = "ignore"
    return env


def _command_argv(
    command: str,
    args: Iterable[str | os.PathLike[str] | int],
    warehouse: str | os.PathLike[str],
    catalog_db: str | os.PathLike[str] | None,
    conf: Mapping[str, str] | None,
) -> list[str]:
    """``COMMAND <session options> ARGS...`` as the oracle's command line takes it."""
    session = _session_args(Path(warehouse), Path(catalog_db) if catalog_db else None, conf)
    return [command, *session, *(os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args)]


def _command() -> list[str]:
    return [str(iceberg_python()), str(ORACLE_SCRIPT)]


# The server and its one-shot fallback (tests/support/oracle_server.py). The server re-targets its catalogs per
# request, so it serves every caller's environment; it may take 30 s to stop its Spark session.
_client = OracleClient(
    name="Java Iceberg oracle",
    error=JavaIcebergOracleError,
    command=_command,
    env=_oracle_env,
    log_prefix="java-iceberg-oracle-",
    same_env=always_same_env,
    stop_seconds=30.0,
)


def __getattr__(name: str) -> Any:
    if name == "_server":  # the running server, for the tests of the server itself
        return _client.server
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run_oracle(
    command: str,
    *args: str | os.PathLike[str] | int,
    warehouse: str | os.PathLike[str],
    catalog_db: str | os.PathLike[str] | None = None,
    conf: Mapping[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Any:
    """Run ``iceberg_oracle.py COMMAND <session options> ARGS...`` in .venv-iceberg; return its parsed JSON.

    Sent to this process's oracle server (one Spark session for the whole pytest process), unless there are
    Spark settings (``conf`` or a ``--conf`` argument: they need a session of their own, so a one-shot
    subprocess) or another thread is using the server (a one-shot subprocess too: two threads never wait for
    each other)."""
    argv = _command_argv(command, args, warehouse, catalog_db, conf)
    return _client.run(argv, stdin, timeout, shared="--conf" not in argv)


def run_oracle_batch(
    commands: Iterable[Iterable[str | os.PathLike[str] | int]],
    *,
    warehouse: str | os.PathLike[str],
    catalog_db: str | os.PathLike[str] | None = None,
    conf: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> list[Any]:
    """Run several oracle commands in one request (``batch``), in order.

    ``run_oracle_batch([["files", "--table", "db.v1", "--all"], ["snapshots", "--table", "db.v1"]], ...)``
    returns ``[<files result>, <snapshots result>]``. Commands take no session options."""
    argvs = [[os.fspath(a) if isinstance(a, os.PathLike) else a for a in argv] for argv in commands]
    result: list[Any] = run_oracle(
        "batch",
        warehouse=warehouse,
        catalog_db=catalog_db,
        conf=conf,
        stdin=json.dumps(argvs),
        timeout=timeout,
    )
    return result


def check_jackson_jar(
    runtime: Path, provided: Iterable[Path], jdk: str | None = DEFAULT_JAVA_HOME
) -> tuple[int, dict[str, Any]]:
    """Run ``scripts/relocate_jackson.py check --json``; returns (exit status, report)."""
    argv = [
        sys.executable,  # the script is pure Python: any interpreter will do
        str(RELOCATE_SCRIPT),
        "check",
        "--runtime",
        str(runtime),
        "--json",
        *(arg for jar in provided for arg in ("--jar", str(jar))),
    ]
    if jdk:
        argv += ["--jdk", jdk]
    completed = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)
    if completed.returncode not in (0, 1):
        raise JavaIcebergOracleError(f"relocate_jackson.py check crashed:\n{completed.stderr}")
    return completed.returncode, json.loads(completed.stdout)


# ---- a built warehouse -----------------------------------------------------------------------


@dataclass
class JavaIcebergWarehouse:
    """A warehouse built by the oracle: the build document plus helpers that run oracle commands on it."""

    warehouse: Path
    catalog_db: Path
    build: dict[str, Any]
    # Java's views of the pristine tables, computed in the build's Spark session: scenario -> {"files": files
    # --all --source java, "snapshots": snapshots, "rows": rows of the current snapshot}.
    baseline: dict[str, dict[str, Any]] = field(default_factory=dict)
    pristine: Path | None = None  # tarball of the pristine state (warehouse + catalog db)

    @property
    def tables(self) -> dict[str, dict[str, Any]]:
        """Scenario name -> table summary (identifier, location, path, metadata_location, refs...)."""
        tables: dict[str, dict[str, Any]] = self.build["tables"]
        return tables

    def run(
        self, command: str, *args: str | os.PathLike[str] | int, conf: Mapping[str, str] | None = None
    ) -> Any:
        """One oracle command against this warehouse (and its JDBC catalog)."""
        return run_oracle(command, *args, warehouse=self.warehouse, catalog_db=self.catalog_db, conf=conf)

    def batch(
        self,
        commands: Iterable[Iterable[str | os.PathLike[str] | int]],
        conf: Mapping[str, str] | None = None,
    ) -> list[Any]:
        """Several oracle commands in one Spark session."""
        return run_oracle_batch(commands, warehouse=self.warehouse, catalog_db=self.catalog_db, conf=conf)

    def files(
        self,
        table: str,
        *,
        snapshot: int | None = None,
        ref: str | None = None,
        all_versions: bool = False,
        source: str = "sql",
    ) -> Any:
        """Java's live files (see ``iceberg_oracle.py files``)."""
        return self.run(
            "files", "--table", table, *_version_args(snapshot, ref, all_versions), "--source", source
        )

    def rows(
        self, table: str, *, snapshot: int | None = None, ref: str | None = None, all_versions: bool = False
    ) -> Any:
        """Java's rows, normalised and sorted."""
        return self.run("rows", "--table", table, *_version_args(snapshot, ref, all_versions))

    def snapshots(self, table: str) -> dict[str, Any]:
        """Java's snapshots, refs and logs."""
        result: dict[str, Any] = self.run("snapshots", "--table", table)
        return result

    def call(
        self, procedure: str, table: str, conf: Mapping[str, str] | None = None, **arguments: Any
    ) -> list[dict[str, Any]]:
        """``CALL <catalog>.system.<procedure>(table => ..., **arguments)``; the procedure's output rows."""
        result: list[dict[str, Any]] = self.run(
            "call", "--procedure", procedure, "--table", table, "--args", json.dumps(arguments), conf=conf
        )
        return result

    def append(
        self,
        table: str,
        commits: list[list[Mapping[str, Any]]],
        *,
        ref: str | None = None,
        merge: bool = False,
    ) -> list[int]:
        """Java-API appends, one commit per list of rows; returns the new snapshot ids."""
        rows_file = self.warehouse.parent / f"append-{os.getpid()}-{id(commits)}.json"
        rows_file.write_text(json.dumps(commits), encoding="utf-8")
        try:
            args: list[str] = ["--table", table, "--rows", str(rows_file)]
            if ref:
                args += ["--ref", ref]
            if merge:
                args.append("--merge")
            result: list[int] = self.run("append", *args)["snapshot_ids"]
            return result
        finally:
            rows_file.unlink(missing_ok=True)

    def restore(self) -> None:
        """Put the pristine warehouse and catalog db back at the SAME paths (see the module docstring)."""
        if self.pristine is None:
            raise RuntimeError("this warehouse has no pristine tarball")
        shutil.rmtree(self.warehouse, ignore_errors=True)
        self.catalog_db.unlink(missing_ok=True)
        with tarfile.open(self.pristine) as archive:
            archive.extractall(self.pristine.parent, filter="tar")

    def listing(self) -> dict[str, int]:
        """Path (relative to the warehouse's parent) -> size of every file of the warehouse and the catalog db."""
        base = self.warehouse.parent
        files = [p for p in self.warehouse.rglob("*") if p.is_file()]
        if self.catalog_db.is_file():
            files.append(self.catalog_db)
        return {str(path.relative_to(base)): path.stat().st_size for path in files}


def _version_args(snapshot: int | None, ref: str | None, all_versions: bool) -> list[str]:
    if snapshot is not None:
        return ["--snapshot", str(snapshot)]
    if ref is not None:
        return ["--ref", ref]
    return ["--all"] if all_versions else []


def build_warehouse(
    base: Path, scenarios: Iterable[str] = SCENARIOS + JDBC_SCENARIOS
) -> JavaIcebergWarehouse:
    """Build ``scenarios`` under ``base`` (``base/warehouse`` + ``base/catalog.db``) and, in the same Spark
    session, Java's baseline views of each table; then tar the result to ``base/pristine.tar`` so that it can be
    restored at the same path."""
    warehouse, catalog_db = base / "warehouse", base / "catalog.db"
    scenarios = list(scenarios)
    identifiers = [
        f"{JDBC_CATALOG}.jdb.{n}" if n in JDBC_SCENARIOS else f"{HADOOP_CATALOG}.db.{n}" for n in scenarios
    ]
    commands: list[list[str]] = [["build", "--scenario", *scenarios]]
    for identifier in identifiers:
        commands += [
            ["files", "--table", identifier, "--all", "--source", "java"],
            ["snapshots", "--table", identifier],
            ["rows", "--table", identifier],
        ]
    results = run_oracle_batch(commands, warehouse=warehouse, catalog_db=catalog_db)
    build, views = results[0], results[1:]
    baseline = {
        name: {"files": views[3 * i], "snapshots": views[3 * i + 1], "rows": views[3 * i + 2]}
        for i, name in enumerate(scenarios)
    }
    pristine = base / "pristine.tar"
    with tarfile.open(pristine, "w") as archive:
        archive.add(warehouse, arcname=warehouse.name)
        if catalog_db.exists():
            archive.add(catalog_db, arcname=catalog_db.name)
    return JavaIcebergWarehouse(
        warehouse=warehouse, catalog_db=catalog_db, build=build, baseline=baseline, pristine=pristine
    )


def pyiceberg_sql_catalog(target: JavaIcebergWarehouse) -> Any:
    """pyiceberg's SqlCatalog on the oracle's SQLite file: named ``jc`` (the JDBC rows' catalog_name), same
    warehouse. Imported lazily so that modules not using pyiceberg don't pay for it."""
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog(JDBC_CATALOG, uri=f"sqlite:///{target.catalog_db}", warehouse=target.warehouse.as_uri())


# ---- pytest fixtures -------------------------------------------------------------------------


def _require_oracle() -> None:
    try:
        iceberg_python()
        oracle_jars()
    except JavaIcebergUnavailableError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def java_iceberg_warehouse(tmp_path_factory: pytest.TempPathFactory) -> JavaIcebergWarehouse:
    """Every scenario, built once per session by Java Iceberg at a fixed path. Shared: treat it as read-only."""
    _require_oracle()
    return build_warehouse(tmp_path_factory.mktemp("java-iceberg"))


@pytest.fixture
def fresh_java_iceberg_warehouse(
    java_iceberg_warehouse: JavaIcebergWarehouse,
) -> Iterator[JavaIcebergWarehouse]:
    """The session warehouse restored to pristine at the same path before the test, and again after it."""
    java_iceberg_warehouse.restore()
    try:
        yield java_iceberg_warehouse
    finally:
        java_iceberg_warehouse.restore()


# ---- helpers for the write / concurrency interop tests and the benchmarks (additive) --------------


def oracle_argv_env(
    command: str,
    *args: str | os.PathLike[str] | int,
    warehouse: str | os.PathLike[str],
    catalog_db: str | os.PathLike[str] | None = None,
    conf: Mapping[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment :func:`run_oracle` uses, for callers that run the oracle in the background."""
    argv = _command_argv(command, args, warehouse, catalog_db, conf)
    return [str(iceberg_python()), str(ORACLE_SCRIPT), *argv], _oracle_env()


@dataclass
class BackgroundOracle:
    """An oracle command running in the background (``start_oracle``); ``result()`` waits for its JSON."""

    process: subprocess.Popen[str]
    argv: list[str]

    def result(self, timeout: float = DEFAULT_TIMEOUT) -> Any:
        try:
            stdout, stderr = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            stdout, stderr = self.process.communicate()
            raise JavaIcebergOracleError(
                f"oracle timed out after {timeout} s: {' '.join(self.argv)}\n{stderr[-4000:]}"
            ) from None
        if self.process.returncode != 0:
            raise JavaIcebergOracleError(
                f"Java Iceberg oracle failed (exit {self.process.returncode}): {' '.join(self.argv)}\n"
                f"--- stderr (tail) ---\n{stderr.strip()[-6000:]}\n--- stdout ---\n{stdout.strip()[:2000]}"
            )
        try:
            return json.loads(stdout)
        except json.JSONDecodeError as exc:
            raise JavaIcebergOracleError(f"oracle printed invalid JSON ({exc}):\n{stdout[:2000]}") from exc

    def stop(self) -> None:
        """Kill it if it still runs (for ``finally`` blocks)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


def start_oracle(
    command: str,
    *args: str | os.PathLike[str] | int,
    warehouse: str | os.PathLike[str],
    catalog_db: str | os.PathLike[str] | None = None,
    conf: Mapping[str, str] | None = None,
    stdin: str | None = None,
) -> BackgroundOracle:
    """Start ``iceberg_oracle.py COMMAND ...`` (``batch`` with ``stdin``) without waiting for it."""
    argv, env = oracle_argv_env(command, *args, warehouse=warehouse, catalog_db=catalog_db, conf=conf)
    process = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )
    if stdin is not None:
        assert process.stdin is not None
        process.stdin.write(stdin)
        process.stdin.close()
        process.stdin = None  # communicate() must not flush it again
    return BackgroundOracle(process, argv)


PAUSING_FS_CLASS = "lakeformat.probe.PausingLocalFileSystem"
PAUSING_FS_SOURCE = """\
package lakeformat.probe;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;

/** Hadoop's local file system, except that the rename of a temporary file onto a Hadoop table's
 * vN.metadata.json (HadoopTableOperations.renameToFinal, AFTER its fs.exists(dst) check) writes
 * $lakeformat.pause.dir/renaming and waits until $lakeformat.pause.dir/go exists. */
public class PausingLocalFileSystem extends LocalFileSystem {
  @Override
  public boolean rename(Path src, Path dst) throws IOException {
    String dir = System.getProperty("lakeformat.pause.dir");
    if (dir != null && dst.getName().matches("v[0-9]+(\\\\.gz)?\\\\.metadata\\\\.json")) {
      java.nio.file.Path go = Paths.get(dir, "go");
      if (!Files.exists(go)) {
        Files.writeString(Paths.get(dir, "renaming"), dst.toString() + " exists=" + exists(dst));
        long deadline = System.currentTimeMillis() + 300_000L;
        while (!Files.exists(go) && System.currentTimeMillis() < deadline) {
          try {
            Thread.sleep(10);
          } catch (InterruptedException e) {
            throw new IOException(e);
          }
        }
      }
    }
    return super.rename(src, dst);
  }
}
"""


def compile_pausing_filesystem(dest: Path) -> Path:
    """Compile :data:`PAUSING_FS_SOURCE` against the oracle's Hadoop client jar; returns the class directory
    (for ``spark.driver.extraClassPath``)."""
    hadoop = sorted(VENV.glob("lib/python*/site-packages/pyspark/jars/hadoop-client-api-*.jar"))
    if not hadoop:
        raise JavaIcebergUnavailableError(f"no hadoop-client-api jar under {VENV}")
    source = dest / "src" / "PausingLocalFileSystem.java"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(PAUSING_FS_SOURCE, encoding="utf-8")
    classes = dest / "classes"
    classes.mkdir(parents=True, exist_ok=True)
    javac = Path(os.environ.get("JAVA_HOME", DEFAULT_JAVA_HOME)) / "bin" / "javac"
    completed = subprocess.run(
        [str(javac), "-nowarn", "-cp", str(hadoop[-1]), "-d", str(classes), str(source)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if completed.returncode != 0:
        raise JavaIcebergOracleError(f"javac failed:\n{completed.stderr}")
    return classes


def pausing_filesystem_conf(classes: Path, pause_dir: Path) -> dict[str, str]:
    """Oracle ``--conf`` settings that install the pausing local file system in the oracle's JVM."""
    return {
        "spark.hadoop.fs.file.impl": PAUSING_FS_CLASS,
        "spark.hadoop.fs.file.impl.disable.cache": "true",
        "spark.driver.extraClassPath": str(classes),
        "spark.driver.extraJavaOptions": f"-Dlakeformat.pause.dir={pause_dir}",
    }
