#!/usr/bin/env bash
# scripts/test.sh: set up .venv (scripts/setup.sh), then run the checks through it:
# ruff (lint), mypy (types) and pytest (with Hypothesis bounded by
# scripts/pytest_hypothesis_profile.py). Every step runs even if an earlier one failed;
# the exit status is non-zero if any failed. pytest's "no tests collected" (exit 5) counts
# as a failure, never as success. Extra arguments go to pytest (e.g. -k wgpu, -x).
#
# Environment: VYRE_TEST_TIMEOUT (seconds for the whole pytest run, default 1800; then it is
# interrupted and reports where it was), VYRE_TEST_STALL_DUMP (seconds after which a single
# test's stack is dumped, default 300), VYRE_HYPOTHESIS_MAX_EXAMPLES (default 50).
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

run_pytest() {
    local rc limit="${VYRE_TEST_TIMEOUT:-1800}" cmd=()
    if command -v timeout >/dev/null 2>&1; then
        # SIGINT: pytest stops like on Ctrl-C and prints where it was and what failed so far.
        cmd=(timeout --signal=INT --kill-after=60 "$limit")
    fi
    PYTHONPATH="$ROOT/scripts${PYTHONPATH:+:$PYTHONPATH}" \
        ${cmd[@]+"${cmd[@]}"} "$VPY" -m pytest -q -p pytest_hypothesis_profile \
        -o faulthandler_timeout="${VYRE_TEST_STALL_DUMP:-300}" "$@"
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
