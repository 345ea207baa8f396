#!/usr/bin/env bash
# scripts/gpu_check.sh: everything worth running on a lent GPU machine, in one call, ending
# with a short table. Sections (arguments, default all): tests fuzz exactness resources
# div-bench cuda-tuning bench evidence; multi-gpu (not in the default set: on a machine of
# several GPUs, the several-device tests and the multi_gpu benchmark); and the robustness
# sections (not in the default set; each fits one 10-minute device command): certify (one
# `vyre certify` per adapter: cuda:0 and wgpu on the GPU's Vulkan driver), interrupts
# (SIGINT storm on cuda and wgpu),
# cache-growth (10,000 distinct programs on one long-lived instance, cuda and wgpu in
# parallel, ~3 min), fuzz-long (cuda and wgpu fuzzed in parallel processes, ~9 min of wall
# time: run it as its own command), soak (fuzz-long in the background while the whole test
# suite runs, then the exactness table of both: one 10-minute command), zero-cost
# (vyre.print's before / after launch and bandwidth rows and the 1% shadow cost, issue 30:
# scripts/zero_cost_print.py, ~3 min; a copy without .git needs .zerocost/ carried). Logs and JSON go to $OUT (or ./gpu-check-out). Meant to be called as
#   source .device/enter.sh && scripts/gpu_check.sh tests bench
# It never changes the GPU's settings. Environment: GPU_CHECK_FUZZ_MINUTES (default 3),
# GPU_CHECK_RESOURCE_CYCLES (default 10000), GPU_CHECK_STORM_SECONDS (default 20),
# GPU_CHECK_CACHE_PROGRAMS (default 10000), GPU_CHECK_LONG_FUZZ_MINUTES (default 8).
set -uo pipefail
OUT="${OUT:-$PWD/gpu-check-out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
sections=("$@")
[ "${#sections[@]}" -gt 0 ] || sections=(tests fuzz exactness resources div-bench cuda-tuning bench evidence)
rows=()

row() { rows+=("$(printf '%-11s %-6s %5ss  %s' "$1" "$2" "$3" "$4")"); }

run_section() {
    local name="$1" t0 rc
    shift
    echo "=== $name: $*" >&2
    t0=$(date +%s)
    "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    local dt=$(($(date +%s) - t0))
    local summary
    summary="$(grep -E '^(=+ .*(passed|failed|error).* =+|\[fuzz\] done.*|[0-9]+ (passed|failed).*|\[(cache-growth|long-fuzz)\] .*|verdict: .*)$' \
        "$OUT/$name.log" | tail -"${SUMMARY_LINES:-1}" | paste -sd ' ')"
    row "$name" "$([ "$rc" = 0 ] && echo ok || echo "rc=$rc")" "$dt" "${summary:-see $name.log}"
    tail -n 40 "$OUT/$name.log" >&2
}

start_long_fuzz() {  # cuda and wgpu fuzzed in parallel background processes for $1 minutes
    local be
    for be in cuda wgpu; do
        ( timeout 590 "$PY" scripts/fuzz_long.py --examples 10000000 --batch 100 --backends "$be" \
            --minutes "$1" --save-dir "$OUT/fuzz-cases/$be" 2>&1 \
            | sed -e "s/^\[fuzz\] done/[long-fuzz] $be done/" ) > "$OUT/fuzz-long-$be.log" &
    done
}

finish_long_fuzz() {  # waits for start_long_fuzz's processes; fails unless both found nothing
    wait
    cat "$OUT/fuzz-long-cuda.log" "$OUT/fuzz-long-wgpu.log"
    grep -q "long-fuzz\] cuda done: 0 " "$OUT/fuzz-long-cuda.log" \
        && grep -q "long-fuzz\] wgpu done: 0 " "$OUT/fuzz-long-wgpu.log"
}

nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader >&2

for s in "${sections[@]}"; do
    case "$s" in
        tests)
            run_section tests "$PY" -m pytest -q -p no:cacheprovider -x --maxfail=20 \
                -o faulthandler_timeout=240 -rfEs tests ;;
        fuzz)
            run_section fuzz timeout 600 "$PY" scripts/fuzz_long.py --examples 100000 \
                --minutes "${GPU_CHECK_FUZZ_MINUTES:-3}" --save-dir "$OUT/fuzz-cases" ;;
        resources)
            rm -f "$OUT/resources.jsonl"
            VYRE_RESOURCE_CYCLES="${GPU_CHECK_RESOURCE_CYCLES:-10000}" \
                VYRE_RESOURCE_REPORT="$OUT/resources.jsonl" \
                run_section resources "$PY" -m pytest -q -p no:cacheprovider -rfEs \
                tests/test_resources.py tests/test_cuda_runtime.py tests/test_cuda_ledger.py \
                -k "leave or leak or close"
            "$PY" scripts/resource_table.py "$OUT/resources.jsonl" >&2 ;;
        div-bench)
            # cost of vyre's exact f32 division / sqrt vs the driver's (wgpu)
            run_section div-bench "$PY" scripts/div_bench.py ;;
        cuda-tuning)
            run_section cuda-tuning "$PY" -m vyre.tools.bench.cuda_tuning --json "$OUT/cuda-tuning.json" ;;
        bench)
            run_section bench "$PY" -m vyre.tools.cli bench --out "$OUT/bench" ;;
        exactness)
            # conformance, regressions and real kernels per backend, plus the fuzz log if the
            # fuzz section ran: cases and disagreements with the reference, as one table
            files=$(ls tests/test_*conformance*.py tests/test_*semantics*.py \
                tests/test_regressions.py tests/test_realkernels*.py tests/test_exactness*.py \
                2>/dev/null)
            run_section exactness "$PY" -m pytest -q -p no:cacheprovider -rfE \
                --junitxml="$OUT/exactness.xml" $files
            "$PY" scripts/exactness_table.py --junit "$OUT/exactness.xml" \
                --fuzz-log "$OUT/fuzz.log" | tee "$OUT/exactness.txt" >&2 ;;
        evidence)
            run_section evidence "$PY" -m vyre.tools.bench.evidence --json "$OUT/evidence.json" ;;
        multi-gpu)
            # several GPUs of one host (nvidia-h100-x2 / -x4): their tests, then the multi_gpu
            # benchmark (every result checked against one GPU's bits)
            run_section multi-gpu-tests "$PY" -m pytest -q -p no:cacheprovider -rfEs \
                tests/test_several_devices.py tests/test_device_group.py
            run_section multi-gpu-bench "$PY" -m vyre.tools.bench.multi_gpu \
                --json "$OUT/multi_gpu.json" ;;
        certify)
            # a certificate per adapter (conformance, exact functions on a sample, real
            # kernels against gcc's outputs), JSON beside the log
            for be in cuda:0 wgpu; do
                run_section "certify-${be%%:*}" "$PY" -m vyre.tools.cli certify --backend "$be" \
                    --out "$OUT/certificate-${be%%:*}.json"
            done ;;
        interrupts)
            VYRE_INTERRUPT_STORM_SECONDS="${GPU_CHECK_STORM_SECONDS:-20}" \
                run_section interrupts timeout 580 "$PY" -m pytest -q -p no:cacheprovider -s \
                -rfEs tests/test_interrupts.py
            grep -h '^\[interrupt-storm\]' "$OUT/interrupts.log" >&2 ;;
        cache-growth)
            SUMMARY_LINES=2 run_section cache-growth timeout 580 bash -c '
                "$0" scripts/compile_cache_growth.py --backend cuda --programs "$1" \
                    --prewarm-jobs 12 --minutes 3 > "$2/cache-growth-cuda.log" 2>&1 & c=$!
                "$0" scripts/compile_cache_growth.py --backend wgpu --programs "$1" \
                    --minutes 3 > "$2/cache-growth-wgpu.log" 2>&1 & w=$!
                wait $c; rc=$?; wait $w; rw=$?
                cat "$2/cache-growth-cuda.log" "$2/cache-growth-wgpu.log"
                exit $((rc | rw))' "$PY" "${GPU_CHECK_CACHE_PROGRAMS:-10000}" "$OUT" ;;
        fuzz-long)
            start_long_fuzz "${GPU_CHECK_LONG_FUZZ_MINUTES:-8}"
            SUMMARY_LINES=2 run_section fuzz-long finish_long_fuzz ;;
        soak)
            # fuzz-long in the background while the whole test suite runs with a JUnit file,
            # then the exactness table from both: everything but the timings in one
            # 10-minute device command
            start_long_fuzz "${GPU_CHECK_LONG_FUZZ_MINUTES:-8}"
            # SIGINT at the limit: pytest still writes its summary and the JUnit file
            run_section tests timeout -s INT -k 30 "${GPU_CHECK_TESTS_SECONDS:-480}" "$PY" -m pytest -q \
                -p no:cacheprovider -o faulthandler_timeout=240 -rfE \
                --junitxml="$OUT/tests.xml" tests
            SUMMARY_LINES=2 run_section fuzz-long finish_long_fuzz
            "$PY" scripts/exactness_table.py --junit "$OUT/tests.xml" \
                --fuzz-log "$OUT/fuzz-long-cuda.log" --fuzz-log "$OUT/fuzz-long-wgpu.log" \
                | tee "$OUT/exactness.txt" >&2 ;;
        zero-cost)
            run_section zero-cost timeout 590 "$PY" scripts/zero_cost_print.py --out "$OUT"
            sed -n '/^== /,$p' "$OUT/zero-cost.log" >&2 ;;
        *) echo "unknown section $s" >&2; exit 2 ;;
    esac
done

# The device tool brings back at most 8 files: pack the fuzzer's saved cases into one.
if [ -d "$OUT/fuzz-cases" ]; then
    tar -C "$OUT" -czf "$OUT/fuzz-cases.tgz" fuzz-cases && rm -rf "$OUT/fuzz-cases"
fi

printf '\n%-11s %-6s %6s  %s\n' section status time summary
printf '%s\n' "${rows[@]}"
