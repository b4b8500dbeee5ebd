#!/usr/bin/env bash
# Builds the libFuzzer harnesses (preset `fuzz`: clang with ASan and UBSan) and runs each one.
#   scripts/fuzz.sh smoke            every harness for a few seconds (CTest's fuzz.smoke)
#   scripts/fuzz.sh run SECONDS      every harness for SECONDS, one after another
#   scripts/fuzz.sh run SECONDS NAME one harness (mesh spec shape schedule config_json model cli
#                                    plan ckpt_index safetensors examples)
# New inputs collect in build/fuzz/corpus/NAME, crashes in build/fuzz/findings. Exits 77
# (skipped) where clang cannot link a libFuzzer program, 1 on any finding.
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-smoke}"
seconds="${FUZZ_SMOKE_SECONDS:-3}"
if [ "$mode" = run ]; then seconds="${2:?seconds}"; fi
names=(mesh spec shape schedule config_json model cli plan ckpt_index safetensors examples)
if [ "$mode" = run ] && [ -n "${3:-}" ]; then names=("$3"); fi

probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
  >"$probe/probe.cpp"
if ! clang++ -fsanitize=fuzzer "$probe/probe.cpp" -o "$probe/probe" >/dev/null 2>&1; then
  echo "fuzz: clang++ cannot link a libFuzzer program here (libclang-rt-14-dev); skipped"
  exit 77
fi

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz >/dev/null

mkdir -p build/fuzz/findings
total=0
for name in "${names[@]}"; do
  mkdir -p "build/fuzz/corpus/$name"
  log="build/fuzz/$name.log"
  if ! "build/fuzz/fuzz/${name}_fuzzer" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="build/fuzz/findings/$name-" \
      "build/fuzz/corpus/$name" "fuzz/corpus/$name" >"$log" 2>&1; then
    echo "fuzz: $name found a problem; see $log and build/fuzz/findings"
    tail -n 40 "$log"
    exit 1
  fi
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")"
  total=$((total + runs))
  echo "fuzz: $name: $runs executions ($rate per second), no finding"
done
echo "fuzz: $total executions in all, no finding"
