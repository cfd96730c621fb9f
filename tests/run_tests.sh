#!/bin/sh
# Runs every cmocka test binary given, prints each one's output, then one summary line
# "N passed, N failed, N skipped" over all of them; exits non-zero when any test failed.
set -u
passed=0 failed=0 skipped=0 broken=""
for t in "$@"; do
    name=$(basename "$t")
    out=$("$t" 2>&1)
    rc=$?
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
[ -n "$broken" ] && echo "test binaries that crashed or exited early:$broken"
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
