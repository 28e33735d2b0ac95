"""``lakeformat --version`` and ``--help`` start fast: the parser imports no format and no heavy library.

Each run is a fresh interpreter (an in-process check would see what earlier tests imported); it calls
``main`` with the arguments, which exit through argparse, then prints the modules loaded by then.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("pandas", "pyarrow", "pyiceberg", "fastavro", "fsspec")
FORMATS = ("airflow_lakeformat.core.paimon", "airflow_lakeformat.core.iceberg")

PROGRAM = """
import json, sys
from airflow_lakeformat.cli import main
try:
    main(json.loads(sys.argv[1]), out=sys.stderr)
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def loaded_modules(argv: list[str]) -> list[str]:
    run = subprocess.run(
        [sys.executable, "-c", PROGRAM, json.dumps(argv)], capture_output=True, text=True, check=True
    )
    return json.loads(run.stdout.splitlines()[-1])


def is_heavy(module: str) -> bool:
    return module.split(".")[0] in HEAVY or any(module == f or module.startswith(f + ".") for f in FORMATS)


@pytest.mark.parametrize(
    "argv",
    [["--version"], ["--help"], ["expire", "--help"], ["completion", "bash"]],
    ids=["version", "help", "command-help", "completion"],
)
def test_the_parser_alone_imports_nothing_heavy(argv: list[str]) -> None:
    heavy = [m for m in loaded_modules(argv) if is_heavy(m)]
    assert heavy == [], f"lakeformat {' '.join(argv)} imported {heavy[:10]} ({len(heavy)} in all)"


def test_the_check_sees_a_heavy_import() -> None:
    """The same check after running a command's module: it would catch a regression."""
    modules = loaded_modules(["snapshots", "/nonexistent/lakeformat-startup-table"])
    assert any(is_heavy(m) for m in modules)


COMPLETE = """
source "$1"
COMP_WORDS=($2)
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
_lakeformat
printf '%s\\n' "${COMPREPLY[@]}"
"""


def completions(script: str, line: str) -> list[str]:
    """What bash's completion function offers for the last word of ``line`` (as COMP_WORDS sets it)."""
    run = subprocess.run(
        ["bash", "-c", COMPLETE, "complete", script, line], capture_output=True, text=True, check=True
    )
    return run.stdout.split()


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_scripts_come_from_the_parser(tmp_path: Path, shell: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "airflow_lakeformat.cli", "completion", shell],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "_lakeformat()" in run.stdout and "complete -o default -F _lakeformat lakeformat" in run.stdout
    if shell == "zsh":
        assert "bashcompinit" in run.stdout
        return
    script = tmp_path / "lakeformat.bash"
    script.write_text(run.stdout)
    # exactly the commands starting with "ex" (expire, and whatever expire-* commands the parser has)
    from airflow_lakeformat.cli.completion import _subcommands
    from airflow_lakeformat.cli.parser import build_parser

    expected = sorted(name for name in _subcommands(build_parser()) if name.startswith("ex"))
    assert "expire" in expected and completions(str(script), "lakeformat ex") == expected
    assert completions(str(script), "lakeformat expire /wh/t --ap") == ["--apply"]
    assert completions(str(script), "lakeformat files /wh/t --format ice") == ["iceberg"]
    assert "--retain-min" in completions(str(script), "lakeformat expire /wh/t --")
    assert "--retain-min" not in completions(str(script), "lakeformat files /wh/t --")


@pytest.mark.parametrize("module", ["maintenance", "tables", "output", "completion", "errors", "parser"])
def test_the_command_modules_reach_the_formats_only_through_the_facade(module: str) -> None:
    """cli/maintenance.py (and the shared modules) import no format package: open_table picks the format."""
    import ast

    import airflow_lakeformat.cli as cli_package

    source = Path(cli_package.__file__).with_name(f"{module}.py").read_text()
    imported = [
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    ]
    assert imported and not [m for m in imported if m and m.startswith(FORMATS)], imported
