#!/usr/bin/env bash
# Runs one libFuzzer target for mk/fuzz.mk:
#   tests/fuzz/run.sh TARGET SECONDS BUILD_DIR MERGE [libFuzzer flags...]
# New inputs go to BUILD_DIR/corpus/TARGET (scratch); the committed seeds in
# tests/fuzz/corpus/TARGET are only read, unless MERGE=1, which afterwards
# merges inputs that add coverage into them. Crash inputs land in
# BUILD_DIR/artifacts/TARGET/, the full log in BUILD_DIR/logs/TARGET.log.
# Exits non-zero on any crash, leak, sanitizer report, timeout or violated
# invariant, after printing the report.
set -uo pipefail
cd "$(dirname "$0")/../.."

t=$1 secs=$2 build=$3 merge=$4
shift 4
bin=$build/$t
seeds=tests/fuzz/corpus/$t
scratch=$build/corpus/$t
artifacts=$build/artifacts/$t
log=$build/logs/$t.log
mkdir -p "$scratch" "$artifacts" "$build/logs" "$seeds"

dict=()
[ -f "tests/fuzz/$t.dict" ] && dict=("-dict=tests/fuzz/$t.dict")

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

echo "fuzz: $t for ${secs}s (log: $log)"
"$bin" -max_total_time="$secs" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" "${dict[@]}" "$@" "$scratch" "$seeds" >"$log" 2>&1
rc=$?

if [ $rc -ne 0 ]; then
        echo "fuzz: $t FAILED (exit $rc); report:"
        # The sanitizer / invariant report and the saved input.
        awk '/INVARIANT FAILED|==[0-9]+==ERROR|runtime error|ERROR: libFuzzer|SUMMARY:|Test unit written|^#[0-9]+ /{p=1} p' "$log" |
                grep -v '^#[0-9]*[[:space:]]*\(NEW\|REDUCE\|pulse\)' | tail -n 80
        ls -1 "$artifacts" | sed "s|^|  artifact: $artifacts/|"
        exit $rc
fi

# libFuzzer's final status line and its stats.
grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1 | sed "s/^/  $t: /"
grep -E '^stat::(number_of_executed_units|peak_rss_mb|new_units_added)' "$log" | sed "s/^/  $t: /"
grep -E '^Done [0-9]+ runs' "$log" | sed "s/^/  $t: /"

if [ "$merge" = 1 ]; then
        echo "fuzz: merging new coverage of $t into $seeds"
        "$bin" -merge=1 "${dict[@]}" "$seeds" "$scratch" >>"$log" 2>&1 || {
                echo "fuzz: merge of $t failed (see $log)"
                exit 1
        }
fi
exit 0
