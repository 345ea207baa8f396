#!/usr/bin/env bash
# One device call for the CUDA backend (issue 4): CUDA tests, CUDA parts of the concurrency and
# resource suites, SASS facts of the saxpy kernel, then bench/bench_cuda.py. Logs to $OUT;
# prints a short table last.
set -u
OUT="${OUT:-/tmp/vyre-cuda-check}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv > "$OUT/smi.txt" 2>&1
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_runtime.py tests/test_cuda_conformance.py tests/test_cuda_compile.py > "$OUT/t_cuda.log" 2>&1; r1=$?
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_concurrency.py tests/test_resources.py -k cuda > "$OUT/t_conc_res.log" 2>&1; r2=$?
python3 - > "$OUT/sass.txt" 2>&1 <<'PY'
import subprocess, tempfile, os
from vyre import ProgramBuilder, ScalarType as ST
from vyre.backends.cuda import compile_program
k = ProgramBuilder("saxpy", workgroup_size=256)
x, y = k.buffer("x", ST.F32), k.buffer("y", ST.F32, "read_write")
a = k.param("a", ST.F32); i = k.global_linear_id()
with k.if_(i < y.length()):
    y[i] = a * x[i] + y[i]
for c in (4, 8):
    cub = compile_program(k.build(), "sm_90", coarsen=c).cubin
    p = tempfile.mktemp(suffix=".cubin"); open(p, "wb").write(cub)
    res = subprocess.run(["cuobjdump", "-res-usage", "-sass", p], capture_output=True, text=True).stdout
    mem = [l.split(";")[0].strip() for l in res.splitlines() if "LDG" in l or "STG" in l]
    print(f"coarsen={c}:", [l for l in res.splitlines() if "REG" in l][:1], mem)
PY
timeout 300 python3 bench/bench_cuda.py --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1; r3=$?
echo "== smi"; cat "$OUT/smi.txt"
echo "== sass"; cut -c1-600 "$OUT/sass.txt"
echo "== cuda tests rc=$r1"; grep -E "passed|failed|error" "$OUT/t_cuda.log" | tail -15
echo "== concurrency+resources (cuda) rc=$r2"; grep -E "passed|failed|error|FAILED" "$OUT/t_conc_res.log" | tail -15
echo "== bench rc=$r3"; sed -n '/== (a)/,$p' "$OUT/bench.log" | grep -v "host micro" | tail -45
