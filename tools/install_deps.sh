#!/bin/sh
# Installs the Debian packages spanprobe builds, tests, installs and plots with (help2man: the man
# pages of `make install`; clang and libomp-dev: the libFuzzer harnesses of `make fuzz`); fast when
# all are present.
set -eu
PACKAGES="make gcc pkg-config libc6-dev libopenblas-dev liblapacke-dev libhdf5-dev libcjson-dev libpcre2-dev libicu-dev libssl-dev libcmocka-dev gnuplot-nox python3-pip clang libomp-dev help2man binutils python3-h5py openmpi-bin libopenmpi-dev"
missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "deps: all present"
    exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing
