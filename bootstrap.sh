#!/bin/sh
# The two commands of README.md, on a fresh Debian machine:
#   ./bootstrap.sh main   install what is needed, build, fetch the corpus, run the default job
#   ./bootstrap.sh test   install what is needed, build, run the tests, then again under ASan/UBSan
set -eu
cd "$(dirname "$0")"
what=${1:-}
case "$what" in
main | test) ;;
*)
    echo "usage: ./bootstrap.sh main|test" >&2
    exit 2
    ;;
esac
if ! command -v make >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends make
fi
make deps
jobs=$(nproc 2>/dev/null || echo 2)
if [ "$what" = test ]; then
    # the test binaries run side by side too (tests/run_tests.sh: private scratch directories)
    make -j"$jobs"
    TEST_JOBS="$jobs" make -j"$jobs" test
    # a short run of every fuzz harness (fuzz/README.md), where clang has libFuzzer
    if printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return d && n; }\n' |
        clang -fsanitize=fuzzer -x c -o /dev/null - 2>/dev/null; then
        make -j"$jobs" fuzz FUZZ_SECONDS=5
    else
        echo "note: fuzz smoke skipped (no clang with libFuzzer)"
    fi
    TEST_JOBS="$jobs" make -j"$jobs" test-asan
else
    make -j"$jobs"
    make data
    make main
fi
