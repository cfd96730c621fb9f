#!/bin/sh
# Runs every cmocka test binary given, prints each one's output (in the order given), then one
# summary line "N passed, N failed, N skipped" over all of them; exits non-zero when any test failed.
# TEST_JOBS=N runs N binaries at a time (each one's output is still printed whole, in order); the
# tests' scratch directories are private (tests/support/scratch.c), so they do not collide. Stopped
# by SIGTERM or SIGINT (a time limit), it still prints what finished and names what did not.
set -u
jobs=${TEST_JOBS:-1}
# the policy the computing commands would set for themselves (cli/main.c), so that each of the
# suite's hundreds of runs does not restart itself to set it (tests/test_cli.c tests that restart)
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
results=$(mktemp -d)

# The outputs and the summary of the binaries that finished; exit status 1 when one failed or any
# did not finish.
report() {
    passed=0 failed=0 skipped=0 broken="" unfinished="" i=0
    for t in "$@"; do
        i=$((i + 1))
        name=$(basename "$t")
        if [ ! -s "$results/$i.rc" ]; then
            unfinished="$unfinished $name"
            continue
        fi
        out=$(cat "$results/$i.out")
        rc=$(cat "$results/$i.rc")
        printf '%s\n' "$out"
        p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -n 1)
        f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -n 1)
        s=$(printf '%s\n' "$out" | sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' | tail -n 1)
        passed=$((passed + ${p:-0}))
        failed=$((failed + ${f:-0}))
        skipped=$((skipped + ${s:-0}))
        if [ "$rc" -ne 0 ] && [ -z "$f" ]; then
            broken="$broken $name(exit $rc)"
            failed=$((failed + 1))
        fi
    done
    [ -z "$broken" ] || echo "test binaries that crashed or exited early:$broken"
    [ -z "$unfinished" ] || echo "test binaries that did not finish (stopped):$unfinished"
    echo "tests: $passed passed, $failed failed, $skipped skipped"
    rm -rf "$results"
    [ "$failed" -eq 0 ] && [ -z "$unfinished" ]
}

trap 'report "$@"; exit 1' TERM INT
i=0
for t in "$@"; do
    i=$((i + 1))
    printf '%s %s\n' "$i" "$t"
done | xargs -P "$jobs" -n 2 sh -c '"$2" >"$0/$1.out" 2>&1; echo $? >"$0/$1.rc"' "$results"
report "$@"
