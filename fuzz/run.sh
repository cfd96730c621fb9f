#!/bin/sh
# fuzz/run.sh NAME...: runs each built harness $FUZZ_BUILD/fuzz/fuzz_NAME for $FUZZ_SECONDS seconds
# on its seeds (fuzz/corpus/NAME/, only read) and its working corpus ($FUZZ_BUILD/corpus/NAME/, where
# new inputs go, kept between runs so that campaigns resume), one harness at a time, and prints one
# line per harness. An input that crashes, leaks, hangs or runs out of memory is saved as
# $FUZZ_BUILD/crashes/NAME-<kind>-<sha1> and the exit status is 1. The HDF5 readers read each file
# first in a forked child (io/h5_vet.c), which inherits libFuzzer's handlers: an input that crashes
# libhdf5 there is contained (the reader returns one error line) but libFuzzer in the child still
# saves it; such files are moved to $FUZZ_BUILD/contained/ and counted. FUZZ_TOTALS=FILE adds each
# run to FILE's row for the harness (fuzz/totals.txt: the running totals of the campaigns).
set -u
FUZZ_SECONDS=${FUZZ_SECONDS:-10}
FUZZ_BUILD=${FUZZ_BUILD:-build-fuzz}
FUZZ_TOTALS=${FUZZ_TOTALS:-}
# one thread each: OpenMP and OpenBLAS pools would only slow every input down
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export LSAN_OPTIONS="suppressions=$(pwd)/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

# The largest input a harness is given: about twice its largest seed.
max_len() {
    case $1 in
    gguf_model) echo 262144 ;;
    checkpoint | dump | report | trainlog | gguf | safetensors | hf_tokenizer | pt | *_tree) echo 131072 ;;
    *) echo 16384 ;;
    esac
}

stat_of() { sed -n "s/^stat::$1: *//p" "$2" | tail -n 1; }

# add_total NAME EXECS CRASHED: adds one campaign to FUZZ_TOTALS (bugs_found and bugs_fixed, the
# distinct bugs behind the crashes, are kept by hand)
add_total() {
    [ -n "$FUZZ_TOTALS" ] || return 0
    [ -f "$FUZZ_TOTALS" ] || printf '%-14s %12s %10s %11s %11s %11s  %s\n' "# harness" executions campaigns \
        crash_runs bugs_found bugs_fixed last_run >"$FUZZ_TOTALS"
    awk -v n="$1" -v e="$2" -v c="$3" -v d="$(date -u +%Y-%m-%d)" '
        function row(x, k, cr, bf, bx) { printf "%-14s %12d %10d %11d %11d %11d  %s\n", n, x, k, cr, bf, bx, d }
        $1 == n { row($2 + e, $3 + 1, $4 + c, $5, $6); done = 1; next }
        { print }
        END { if (!done) row(e, 1, c, 0, 0) }' "$FUZZ_TOTALS" >"$FUZZ_TOTALS.tmp" &&
        mv "$FUZZ_TOTALS.tmp" "$FUZZ_TOTALS"
}

status=0
mkdir -p "$FUZZ_BUILD/crashes" "$FUZZ_BUILD/contained" "$FUZZ_BUILD/logs"
for name in "$@"; do
    bin=$FUZZ_BUILD/fuzz/fuzz_$name
    log=$FUZZ_BUILD/logs/$name.log
    mkdir -p "$FUZZ_BUILD/corpus/$name"
    touch "$log.start"
    "$bin" "$FUZZ_BUILD/corpus/$name" "fuzz/corpus/$name" -max_total_time="$FUZZ_SECONDS" \
        -max_len="$(max_len "$name")" -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=25 \
        -print_final_stats=1 -artifact_prefix="$FUZZ_BUILD/crashes/$name-" >"$log" 2>&1
    rc=$?
    saved=$(sed -n 's/.*Test unit written to \(.*\)/\1/p' "$log" | tail -n 1)
    contained=$(find "$FUZZ_BUILD/crashes" -name "$name-*" -newer "$log.start" ! -path "${saved:-none}" \
        -exec mv {} "$FUZZ_BUILD/contained/" \; -print | wc -l)
    execs=$(stat_of number_of_executed_units "$log")
    crashes=0
    what=""
    if [ "$rc" -ne 0 ]; then
        crashes=1
        status=1
        what=" (${saved:-no input saved}; log: $log)"
    fi
    [ "$contained" -eq 0 ] || what="$what, $contained contained in the vetting child"
    add_total "$name" "${execs:-0}" "$crashes"
    printf 'fuzz %-13s %10s executions, %6s/s, %4s new inputs, %d crashes%s\n' "$name" "${execs:-?}" \
        "$(stat_of average_exec_per_sec "$log")" "$(stat_of new_units_added "$log")" "$crashes" "$what"
done
exit $status
