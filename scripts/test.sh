#!/usr/bin/env bash
# THE test command: environment setup, lint, format check, type check, layering check, and every test (the
# checks run beside the Java Iceberg oracle's set-up and the tests; see below).
# Runs all steps even when one fails, and exits non-zero if any failed (pytest's exit code 5,
# "no tests collected", counts as a failure).
set -uo pipefail
cd "$(dirname "$0")/.."

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
T0="$(now)"

# The Java Iceberg oracle's venv (about 40 s cold) is built below, while the static checks run.
LAKEFORMAT_SKIP_ICEBERG=1 bash scripts/setup.sh || { echo "test.sh: scripts/setup.sh failed" >&2; exit 1; }
export PATH="$PWD/.venv/bin:$PATH"

failed=()
step() {  # step NAME CMD...
  local name="$1"; shift
  local t; t="$(now)"
  echo "==> $name: $*"
  "$@"
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    failed+=("$name (exit $rc)")
  fi
  echo "<== $name: exit $rc ($(elapsed "$t") s)"
  return 0
}

# The static checks (mypy alone takes 80 s on a fresh clone) run in the background, beside the oracle's
# set-up and the tests: the test streams spend much of their time waiting on subprocesses. Their output
# is printed, whole, after the tests; a failed check lands in $STATIC_FAILED.
STATIC_LOG="$(mktemp)"; STATIC_FAILED="$(mktemp)"
static_checks() {
  failed=()
  # Each bounded (20 min; mypy takes 80 s on a fresh clone), so that the wait for them cannot hang the job.
  step "ruff check" timeout -k 30 1200 .venv/bin/ruff check .
  step "ruff format" timeout -k 30 1200 .venv/bin/ruff format --check .
  step "mypy" timeout -k 30 1200 .venv/bin/mypy airflow_lakeformat
  step "lint-imports" timeout -k 30 1200 .venv/bin/lint-imports
  printf '%s\n' "${failed[@]}" > "$STATIC_FAILED"
}
static_checks > "$STATIC_LOG" 2>&1 &
STATIC_PID=$!
step "setup_iceberg_oracle" bash scripts/setup_iceberg_oracle.sh
# Every test, all markers, nothing deselected, in two pytest processes at once: the suite spends much
# of its time waiting on subprocesses (JVMs, Airflow, pypaimon), so one process leaves a core idle; on
# a slow 2-core machine one process took 79 min of CI's 90. The streams are balanced by measured time
# (scripts/test_times.py; on 2026-11-28, minutes of each directory with both streams busy: airflow 21.6,
# spark 17.5, interop 11.1, stateful 3.1, iceberg 3.0, s3 2.5, commit 1.2, unit 1.2, maintenance 0.7):
# stream A: airflow, stateful, s3, commit, unit, maintenance; stream B: every other directory (a new
# one lands there): spark, interop and iceberg. Each stream's output is printed whole when
# both are done, then one closing line with the sums. Every test's time is kept in test-results/stream-*.xml
# (JUnit XML; scripts/test_times.py sums them per file and per stream).
STREAM_A=(tests/airflow tests/stateful tests/commit tests/unit tests/maintenance)
PROGRESS_EVERY="${LAKEFORMAT_PROGRESS_EVERY:-300}"
STREAMS_DEADLINE="${LAKEFORMAT_STREAMS_DEADLINE:-4800}"  # 80 min: CI kills at 90
streams_watch() {  # streams_watch PID_A LOG_A PID_B LOG_B
  local pid_a="$1" log_a="$2" pid_b="$3" log_b="$4" last=0 now_s
  while kill -0 "$pid_a" 2>/dev/null || kill -0 "$pid_b" 2>/dev/null; do
    sleep 5
    now_s="$(elapsed "$T0")"; now_s="${now_s%.*}"
    if [ "$((now_s - last))" -ge "$PROGRESS_EVERY" ]; then
      last="$now_s"
      echo "test.sh: ${now_s} s: A at: $(tail -c 300 "$log_a" | tr '\r' '\n' | grep -v '^$' | tail -n 1 | cut -c1-150)"
      echo "test.sh: ${now_s} s: B at: $(tail -c 300 "$log_b" | tr '\r' '\n' | grep -v '^$' | tail -n 1 | cut -c1-150)"
    fi
    if [ "$now_s" -ge "$STREAMS_DEADLINE" ]; then
      echo "test.sh: the streams ran past ${STREAMS_DEADLINE} s: SIGABRT (stacks into the logs), then SIGKILL"
      kill -ABRT "$pid_a" "$pid_b" 2>/dev/null
      sleep 20
      kill -KILL "$pid_a" "$pid_b" 2>/dev/null
      return
    fi
  done
}
pytest_streams() {
  local log_a log_b pid_a pid_b rc_a rc_b
  log_a="$(mktemp)"; log_b="$(mktemp)"
  mkdir -p test-results
  .venv/bin/python -m pytest -p no:cacheprovider --durations=20 --junit-xml=test-results/stream-a.xml \
    "${STREAM_A[@]}" >"$log_a" 2>&1 &
  pid_a=$!
  .venv/bin/python -m pytest -p no:cacheprovider --durations=20 --junit-xml=test-results/stream-b.xml tests \
    "${STREAM_A[@]/#/--ignore=}" >"$log_b" 2>&1 &
  pid_b=$!
  # Progress while they run (every PROGRESS_EVERY s, each stream's current line: the test file it is in),
  # and a watchdog: past STREAMS_DEADLINE s since this script started, a stream still running gets SIGABRT
  # (pytest's faulthandler prints every thread's stack into its log), then SIGKILL, so that CI, which kills
  # the job at 90 minutes and then shows nothing, always sees the logs and where a stream stood.
  streams_watch "$pid_a" "$log_a" "$pid_b" "$log_b" &
  local watch=$!
  wait "$pid_a"; rc_a=$?
  wait "$pid_b"; rc_b=$?
  kill "$watch" 2>/dev/null; wait "$watch" 2>/dev/null
  echo "---- stream A (${STREAM_A[*]}): exit $rc_a"; cat "$log_a"
  echo "---- stream B (every other test directory): exit $rc_b"; cat "$log_b"
  python3 - "$log_a" "$log_b" <<'PY'
import re, sys
passed = failed = 0
for log in sys.argv[1:]:
    lines = [l for l in open(log, errors="replace") if re.match(r"^=+ .* in [0-9.]+s", l)]
    last = lines[-1] if lines else ""
    passed += sum(int(n) for n in re.findall(r"(\d+) passed", last))
    failed += sum(int(n) for n in re.findall(r"(\d+) (?:failed|errors?)", last))
print(f"pytest: {passed} passed, {failed} failed")
PY
  rm -f "$log_a" "$log_b"
  [ "$rc_a" -eq 0 ] && [ "$rc_b" -eq 0 ]
}
step "pytest" pytest_streams
wait "$STATIC_PID"
echo "---- static checks (run beside the tests)"; cat "$STATIC_LOG"
while IFS= read -r line; do [ -n "$line" ] && failed+=("$line"); done < "$STATIC_FAILED"
rm -f "$STATIC_LOG" "$STATIC_FAILED"

echo "test.sh: total $(elapsed "$T0") s"
if [ "${#failed[@]}" -ne 0 ]; then
  echo "test.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "test.sh: all checks passed"
