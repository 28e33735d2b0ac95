"""DAG-parse time of every example DAG in ``dags/``, as Airflow's DAG processor parses a file.

    .venv/bin/python bench/bench_dag_parse.py [--repeat 5] [--warmup 1]

Every measurement is a fresh ``python`` process (empty ``sys.modules``, as a dag-processor child that
was not forked from a warm parent), with ``AIRFLOW_HOME`` a temporary directory of this run and
``AIRFLOW__CORE__LOAD_EXAMPLES=False``. Inside it the worker imports ``airflow`` and ``airflow.sdk``,
then the DAG processor's own modules (``airflow.dag_processing.dagbag``, the DAG serializer), and
builds the bag exactly as ``airflow.dag_processing.processor._parse_file`` does:
``BundleDagBag(dag_folder=<file>, bundle_path=<dags dir>, bundle_name=..., load_op_links=False)``,
then ``DagSerialization.to_dict`` of every DAG. Timestamps on the system-wide monotonic clock, taken
by the parent before it spawns the process and by the worker after each step, split each run into:

* startup          interpreter start (and this script's stdlib imports)
* import sdk       ``import airflow, airflow.sdk``
* import dagbag    ``airflow.dag_processing.dagbag`` and ``airflow.serialization.serialized_objects``
* dagbag           ``BundleDagBag(...)`` alone: executing the DAG file, with every import it makes
                   beyond the above (the figure the "under a second" target is about)
* serialize        ``DagSerialization.to_dict`` of the bag's DAGs (the processor sends that to the manager)
* total            spawn to exit of the process

Baselines, in the same run and interleaved with the DAG files (round-robin, order rotated every
round): ``baseline`` imports only ``airflow`` and ``airflow.sdk`` and exits; ``minimal`` parses a
generated one-task ``@task`` DAG that imports nothing but ``airflow.sdk``, through the same steps.

Checked in every run (exit 1 otherwise): the bag has no import errors and at least one DAG, and no
``pyspark`` module is in ``sys.modules`` after parsing and serializing. One extra run per file under
``python -X importtime`` attributes the import time spent inside ``BundleDagBag`` to packages.
Timings are never asserted: only ratios within one run mean anything.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
DAGS_DIR = REPO_ROOT / "dags"
RESULTS_DIR = BENCH_DIR / "results"
BASELINE = "baseline"
MINIMAL = "minimal"
MINIMAL_DAG = '''"""A one-task DAG importing only airflow.sdk: the floor of parsing a DAG file."""

from __future__ import annotations

from airflow.sdk import DAG, task

with DAG(dag_id="bench_minimal", schedule=None, catchup=False, tags=["bench"]):

    @task
    def noop() -> None:
        """Does nothing."""

    noop()
'''
PHASES = ("startup", "import_sdk", "import_dagbag", "dagbag", "serialize", "to_dagbag", "total")
TARGET_SECONDS = 1.0  # issue 6: parsing every example DAG takes under a second (DagBag alone)


def _now() -> float:
    # CLOCK_MONOTONIC is system-wide, so the parent's spawn mark and the worker's marks compare.
    return time.clock_gettime(time.CLOCK_MONOTONIC)


# ---- worker (a fresh process per measurement) ----------------------------------------------------


def worker(kind: str, dag_file: str, bundle: str, output: str) -> None:
    marks = {"main": _now()}
    import airflow
    import airflow.sdk

    marks["import_sdk"] = _now()
    document: dict[str, Any] = {"kind": kind, "airflow": airflow.__version__}
    if kind == "parse":
        from airflow.dag_processing.dagbag import BundleDagBag
        from airflow.serialization.serialized_objects import DagSerialization

        marks["import_dagbag"] = _now()
        before = set(sys.modules)
        bag = BundleDagBag(
            dag_folder=dag_file, bundle_path=Path(bundle), bundle_name="bench", load_op_links=False
        )
        marks["dagbag"] = _now()
        new_modules = sorted(set(sys.modules) - before)
        serialized = [DagSerialization.to_dict(dag) for dag in bag.dags.values()]
        marks["serialize"] = _now()
        document.update(
            dag_ids=sorted(bag.dags),
            tasks=sum(len(dag.tasks) for dag in bag.dags.values()),
            serialized_bytes=len(json.dumps(serialized, default=str)),
            import_errors=dict(bag.import_errors),
            new_modules=new_modules,
        )
    document["pyspark_modules"] = sorted(m for m in sys.modules if m == "pyspark" or m.startswith("pyspark."))
    document["marks"] = marks
    Path(output).write_text(json.dumps(document))


# ---- parent ---------------------------------------------------------------------------------------


def worker_env(airflow_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__")}
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "AIRFLOW_CONFIG"):
        env.pop(name, None)
    env.update(
        AIRFLOW_HOME=str(airflow_home),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        PYTHONWARNINGS="ignore",
    )
    # The ingest and Asset DAGs read the connection's warehouse when parsed (the compose stack's, by default).
    env.setdefault(
        "AIRFLOW_CONN_LAKEFORMAT_DEFAULT",
        json.dumps({"conn_type": "lakeformat", "host": "s3://warehouse/wh"}),
    )
    return env


def run_worker(
    target: str, dag_file: Path | None, env: dict[str, str], scratch: Path, importtime: bool = False
) -> dict[str, Any]:
    """One fresh process; the parent's spawn and exit marks around the worker's own."""
    output = scratch / "result.json"
    output.unlink(missing_ok=True)
    kind = BASELINE if target == BASELINE else "parse"
    bundle = dag_file.parent if dag_file else DAGS_DIR
    command = [sys.executable, *(["-X", "importtime"] if importtime else [])]
    command += [
        str(Path(__file__).resolve()),
        "--worker",
        kind,
        str(dag_file or ""),
        str(bundle),
        str(output),
    ]
    spawn = _now()
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=False)
    end = _now()
    if completed.returncode != 0 or not output.exists():
        raise RuntimeError(
            f"{target}: worker failed (exit {completed.returncode}):\n{completed.stderr[-4000:]}"
        )
    document: dict[str, Any] = json.loads(output.read_text())
    marks = document.pop("marks")
    phases = {"startup": marks["main"] - spawn, "import_sdk": marks["import_sdk"] - marks["main"]}
    if kind == "parse":
        phases.update(
            import_dagbag=marks["import_dagbag"] - marks["import_sdk"],
            dagbag=marks["dagbag"] - marks["import_dagbag"],
            serialize=marks["serialize"] - marks["dagbag"],
            to_dagbag=marks["dagbag"] - spawn,
        )
    phases["total"] = end - spawn
    document["phases"] = phases
    if importtime:
        document["importtime"] = parse_importtime(completed.stderr)
    return document


def parse_importtime(stderr: str) -> list[tuple[str, int, int, int]]:
    """``-X importtime`` lines as (module, depth, self µs, cumulative µs), in the order printed."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        head, cumulative_us, field = line.split("|", 2)
        self_us = head[len("import time:") :]
        depth = (len(field) - len(field.lstrip(" ")) - 1) // 2
        rows.append((field.strip(), depth, int(self_us), int(cumulative_us)))
    return rows


def attribute_imports(rows: list[tuple[str, int, int, int]], new_modules: set[str]) -> dict[str, Any]:
    """Import time of the modules first imported inside BundleDagBag: self time by top-level package,
    and the outermost such imports with their cumulative time (what a DAG file pulls in)."""
    by_package: dict[str, int] = {}
    for module, _, self_us, _ in rows:
        if module in new_modules:
            top = module.split(".")[0]
            by_package[top] = by_package.get(top, 0) + self_us
    # The log is post-order: a module's line follows its children's, one level shallower.
    roots: list[tuple[str, int]] = []
    stack: list[tuple[str, int, int]] = []  # (module, depth, cumulative) awaiting their parent
    for module, depth, _, cumulative_us in rows:
        children = []
        while stack and stack[-1][1] > depth:
            children.append(stack.pop())
        if module not in new_modules:
            roots.extend((m, c) for m, _, c in children if m in new_modules)
        stack.append((module, depth, cumulative_us))
    roots.extend((m, c) for m, _, c in stack if m in new_modules)
    roots.sort(key=lambda item: -item[1])
    return {
        "self_ms_by_package": {
            k: round(v / 1000, 1) for k, v in sorted(by_package.items(), key=lambda i: -i[1])
        },
        "outermost_ms": [[m, round(c / 1000, 1)] for m, c in roots[:12]],
    }


def summarize(values: list[float]) -> dict[str, Any]:
    return {
        "median": statistics.median(values),
        "max": max(values),
        "min": min(values),
        "all": [round(v, 4) for v in values],
    }


def machine() -> dict[str, Any]:
    from importlib import metadata

    from bench.support.runs import machine_facts

    facts = machine_facts()
    for dist in ("apache-airflow", "apache-airflow-core", "apache-airflow-task-sdk", "pyspark"):
        try:
            facts[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            facts[dist] = None
    return facts


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per file (median and max reported)")
    parser.add_argument(
        "--warmup", type=int, default=1, help="untimed rounds first (airflow.cfg, page cache)"
    )
    parser.add_argument(
        "--no-importtime", action="store_true", help="skip the -X importtime attribution runs"
    )
    parser.add_argument("--output", default=None, help="JSON result (default bench/results/dag_parse.json)")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    return parser


def _measure(
    args: argparse.Namespace, dag_files: list[Path]
) -> tuple[list[str], dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """Rounds of one fresh worker per target (the baseline, the minimal DAG, each example DAG file; the order
    rotates each round), then the ``-X importtime`` runs: (targets, the timed runs, the import attribution)."""
    scratch = Path(tempfile.mkdtemp(prefix="lakeformat-dag-parse-"))
    try:
        airflow_home = scratch / "airflow-home"
        airflow_home.mkdir()
        minimal_file = scratch / "bundle" / "bench_minimal.py"
        minimal_file.parent.mkdir()
        minimal_file.write_text(MINIMAL_DAG)
        env = worker_env(airflow_home)
        files: dict[str, Path | None] = {BASELINE: None, MINIMAL: minimal_file}
        files.update({str(f.relative_to(REPO_ROOT)): f for f in dag_files})
        targets = list(files)
        runs: dict[str, list[dict[str, Any]]] = {t: [] for t in targets}
        rounds = args.warmup + args.repeat
        for r in range(rounds):
            print(f"round {r + 1}/{rounds}{' (warm-up)' if r < args.warmup else ''} ...", file=sys.stderr)
            order = targets[r % len(targets) :] + targets[: r % len(targets)]
            for target in order:
                document = run_worker(target, files[target], env, scratch)
                if r >= args.warmup:
                    runs[target].append(document)
        attribution: dict[str, Any] = {}
        if not args.no_importtime:
            print("-X importtime runs ...", file=sys.stderr)
            for target in targets[1:]:
                document = run_worker(target, files[target], env, scratch, importtime=True)
                attribution[target] = attribute_imports(document["importtime"], set(document["new_modules"]))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    return targets, runs, attribution


def _file_results(
    targets: list[str],
    runs: dict[str, list[dict[str, Any]]],
    attribution: dict[str, Any],
    baseline: dict[str, Any],
    failures: list[str],
) -> dict[str, Any]:
    """Each DAG file's phases, ratios and checks (import errors, pyspark imported, no DAG found)."""
    results: dict[str, Any] = {}
    for target in targets[1:]:
        documents = runs[target]
        phases = {p: summarize([d["phases"][p] for d in documents]) for p in PHASES}
        last = documents[-1]
        errors = [d["import_errors"] for d in documents if d["import_errors"]]
        pyspark = sorted({m for d in documents for m in d["pyspark_modules"]})
        if errors:
            failures.append(f"{target}: import errors {errors[0]}")
        if pyspark:
            failures.append(f"{target}: imported {', '.join(pyspark[:5])}")
        if any(not d["dag_ids"] for d in documents):
            failures.append(f"{target}: no DAG found")
        packages: dict[str, int] = {}
        for module in last["new_modules"]:
            packages[module.split(".")[0]] = packages.get(module.split(".")[0], 0) + 1
        dagbag = phases["dagbag"]["median"]
        results[target] = {
            "dag_ids": last["dag_ids"],
            "tasks": last["tasks"],
            "serialized_bytes": last["serialized_bytes"],
            "import_errors": errors[0] if errors else {},
            "pyspark_imported": bool(pyspark),
            "modules_imported_by_dagbag": len(last["new_modules"]),
            "modules_imported_by_dagbag_by_package": dict(sorted(packages.items(), key=lambda i: -i[1])),
            "seconds": phases,
            "ratios": {
                "dagbag/import_sdk": dagbag / baseline["import_sdk"]["median"],
                "dagbag/minimal_dagbag": (dagbag / results[MINIMAL]["seconds"]["dagbag"]["median"])
                if target != MINIMAL
                else 1.0,
                "to_dagbag/baseline_total": phases["to_dagbag"]["median"] / baseline["total"]["median"],
                "total/baseline_total": phases["total"]["median"] / baseline["total"]["median"],
            },
            "dagbag_under_target": phases["dagbag"]["max"] < TARGET_SECONDS,
            "importtime": attribution.get(target),
        }
    return results


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)

    if args.worker:
        worker(*args.worker)
        return 0
    if args.repeat < 1 or args.warmup < 0:
        parser.error("need --repeat >= 1 and --warmup >= 0")

    dag_files = sorted(DAGS_DIR.glob("*.py"))
    if not dag_files:
        print(f"no DAG files in {DAGS_DIR}", file=sys.stderr)
        return 1
    output = Path(args.output) if args.output else RESULTS_DIR / "dag_parse.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    started = _now()
    load_start = os.getloadavg()  # other work on the machine skews every timing
    targets, runs, attribution = _measure(args, dag_files)
    baseline = {p: summarize([d["phases"][p] for d in runs[BASELINE]]) for p in runs[BASELINE][0]["phases"]}
    failures: list[str] = []
    results = _file_results(targets, runs, attribution, baseline, failures)
    result: dict[str, Any] = {
        "benchmark": "DAG parse time",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "params": {
            "repeat": args.repeat,
            "warmup": args.warmup,
            "dag_bag": "airflow.dag_processing.dagbag.BundleDagBag(load_op_links=False)",
            "env": {"AIRFLOW_HOME": "<temporary>", "AIRFLOW__CORE__LOAD_EXAMPLES": "False"},
            "lakeformat_env_set": sorted(k for k in os.environ if k.startswith("LAKEFORMAT_")),
            "target_seconds": TARGET_SECONDS,
        },
        "baseline": {"what": "import airflow, airflow.sdk in a fresh process", "seconds": baseline},
        "files": results,
        "load_average": {"start": load_start, "end": os.getloadavg()},
        "failures": failures,
        "wall_seconds": round(_now() - started, 1),
    }
    from bench.support.runs import write_result

    write_result(output, result)
    print_summary(result)
    print(f"results: {output}")
    return 0 if not failures else 1


def print_summary(result: dict[str, Any]) -> None:
    base = result["baseline"]["seconds"]
    print()
    print(
        f"baseline (import airflow, airflow.sdk; {result['params']['repeat']} runs): "
        f"startup {base['startup']['median']:.3f} s, import sdk {base['import_sdk']['median']:.3f} s, "
        f"process total {base['total']['median']:.3f} s (medians)"
    )
    header = (
        f"{'file':<42} {'dagbag med':>10} {'max':>6} {'/sdk':>5} {'/min':>5} {'serial':>6} "
        f"{'to bag':>6} {'total':>6} {'/base':>5} {'mods':>5} pyspark"
    )
    print(header)
    for name, f in result["files"].items():
        s, r = f["seconds"], f["ratios"]
        print(
            f"{name:<42} {s['dagbag']['median']:>10.3f} {s['dagbag']['max']:>6.3f} "
            f"{r['dagbag/import_sdk']:>5.3f} {r['dagbag/minimal_dagbag']:>5.2f} {s['serialize']['median']:>6.3f} "
            f"{s['to_dagbag']['median']:>6.3f} {s['total']['median']:>6.3f} {r['total/baseline_total']:>5.2f} "
            f"{f['modules_imported_by_dagbag']:>5} {f['pyspark_imported']}"
        )
    print(
        "dagbag: BundleDagBag(...) alone (s, median and max); /sdk: ÷ import airflow.sdk; /min: ÷ the minimal "
        "DAG's dagbag; to bag: spawn to a parsed bag; total: spawn to exit; /base: ÷ baseline process total; "
        "mods: modules first imported inside the bag"
    )
    for name, f in result["files"].items():
        if f["importtime"]:
            top = ", ".join(f"{k} {v}" for k, v in list(f["importtime"]["self_ms_by_package"].items())[:5])
            print(f"  {name}: import ms inside the bag by package: {top}")
    if result["failures"]:
        print(f"FAILURES: {result['failures']}")


if __name__ == "__main__":
    sys.exit(main())
