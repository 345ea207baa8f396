#!/usr/bin/env bash
# scripts/test.sh: set up .venv (scripts/setup.sh), then run the checks through it:
# ruff (lint), mypy (types) and pytest (with Hypothesis bounded by
# scripts/pytest_hypothesis_profile.py). Every step runs even if an earlier one failed;
# the exit status is non-zero if any failed. pytest's "no tests collected" (exit 5) counts
# as a failure, never as success. Extra arguments go to pytest (e.g. -k wgpu, -x).
#
# Environment: VYRE_TEST_TIMEOUT (seconds for the whole pytest run, default 1800; then it is
# interrupted and reports where it was), VYRE_TEST_STALL_DUMP (seconds after which a single
# test's stack is dumped, default 300), VYRE_HYPOTHESIS_MAX_EXAMPLES (default 50),
# VYRE_TEST_WORKERS (pytest-xdist processes, default one per core up to 4; 1: none).
# This is the command .ci/run runs.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh" || { echo "[test] setup failed" >&2; exit 1; }
cd "$ROOT"
. "$ROOT/scripts/runtime_env.sh"
VPY="$ROOT/.venv/bin/python"

failed=()
summary=()
step() {
    # step NAME CMD...: run CMD, record its status and duration.
    local name="$1" t0 rc
    shift
    printf '\n[test] ==> %s\n' "$name" >&2
    t0=$(date +%s)
    "$@"
    rc=$?
    summary+=("$(printf '%-7s %-5s %4ss' "$name" "$([ "$rc" = 0 ] && echo ok || echo "rc=$rc")" "$(($(date +%s) - t0))")")
    [ "$rc" = 0 ] || failed+=("$name")
    return 0
}

test_workers() {
    # pytest-xdist worker processes: the suite is CPU-bound (NumPy, lavapipe, NVRTC) and one
    # process uses one core; one per core, at most 4 (each holds its own backends and
    # lavapipe threads). VYRE_TEST_WORKERS=1 runs in this process; an explicit -n or
    # -p no:xdist among the arguments wins.
    local a n="${VYRE_TEST_WORKERS:-}"
    for a in "$@"; do
        case "$a" in -n | -n* | --numprocesses* | no:xdist) return ;; esac
    done
    if [ -z "$n" ]; then
        n="$(nproc 2>/dev/null || echo 1)"
        [ "$n" -le 4 ] || n=4
    fi
    [ "$n" -le 1 ] || printf '%s\n' -n "$n"
}

run_pytest() {
    local rc limit="${VYRE_TEST_TIMEOUT:-1800}" cmd=() workers=()
    if command -v timeout >/dev/null 2>&1; then
        # SIGINT: pytest stops like on Ctrl-C and prints where it was and what failed so far.
        cmd=(timeout --signal=INT --kill-after=60 "$limit")
    fi
    mapfile -t workers < <(test_workers "$@")
    PYTHONPATH="$ROOT/scripts${PYTHONPATH:+:$PYTHONPATH}" \
        ${cmd[@]+"${cmd[@]}"} "$VPY" -m pytest -q -p pytest_hypothesis_profile \
        ${workers[@]+"${workers[@]}"} -o faulthandler_timeout="${VYRE_TEST_STALL_DUMP:-300}" "$@"
    rc=$?
    case "$rc" in
        5) echo "[test] pytest collected no tests: that is a failure, not a pass" >&2; return 1 ;;
        124 | 137) echo "[test] pytest ran past ${limit}s (VYRE_TEST_TIMEOUT) and was stopped" >&2 ;;
    esac
    return "$rc"
}

step ruff "$VPY" -m ruff check .
step mypy "$VPY" -m mypy
step pytest run_pytest "$@"

printf '\n[test] summary:\n' >&2
printf '  %s\n' "${summary[@]}" >&2
if [ "${#failed[@]}" -gt 0 ]; then
    echo "[test] FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "[test] all checks passed" >&2
