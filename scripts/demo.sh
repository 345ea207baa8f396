#!/usr/bin/env bash
# scripts/demo.sh: set up .venv (scripts/setup.sh), then run `vyre demo` through it: list
# the backends found, run the demo programs on each available one, check them against the
# reference and print a table. Extra arguments go to `vyre demo` (e.g. --backend wgpu).
# Exits with vyre demo's status (1 if any backend disagrees with the reference).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
. "$ROOT/scripts/runtime_env.sh"
exec "$ROOT/.venv/bin/vyre" demo "$@"
