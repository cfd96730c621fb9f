#!/bin/sh
# tools/gpu_deps.sh: spanprobe's build and test dependencies for the GPU machine, which has no apt
# and no network (an Ubuntu 24.04-like image with gcc, nvcc and PyTorch; docs/benchmarks.md).
#
#   tools/gpu_deps.sh download [DIR]      HERE (Debian, packages installed by tools/install_deps.sh):
#                                         the .deb files into DIR [.gpu_debs], with two lists
#   eval "$(tools/gpu_deps.sh unpack DIR PREFIX [--all])"
#                                         THERE: dpkg -x into PREFIX (never /), then prints the
#                                         exports that make `make` and the tests find them
#
# What is downloaded: the -dev packages behind the Makefile's pkg-config names (hdf5, libcjson,
# openblas, lapacke, libpcre2-8, icu-uc) and the tests' cmocka, the runtime packages of the libraries
# they link, and the tools pkg-config and make. Their runtime closure is read off this machine: ldd of
# those libraries and programs, each file mapped to its package (dpkg -S), all at the versions
# installed here. Never taken: glibc and the compiler's runtime (libc6, libgcc-s1, libstdc++6; the GPU
# machine's own are newer, and an older copy first in LD_LIBRARY_PATH would break its programs), and
# the libraries every Debian or Ubuntu base system has under the same soname (BASE_PKGS: TLS,
# compression, ...). Not taken either: gnuplot and the ~20 MiB of image libraries it draws with. The
# device tool carries at most 64 MiB with the working tree, and plotting runs no GPU code, so the GPU
# session leaves the tests that draw out (bench/gpu_session.sh).
# always.list: the -dev packages, the runtime packages of the linked libraries and the tools; always
#   unpacked. if-missing.list: the rest of the closure (libcurl, krb5, ...); unpacked only when one of
#   the package's shared libraries is unknown to the GPU machine's `ldconfig -p`, so nothing it
#   already has is shadowed (--all unpacks them too: a test of the whole path on a machine that has
#   everything).
set -eu
ARCH_DIR=x86_64-linux-gnu
DEV_PKGS="libhdf5-dev libcjson-dev libopenblas-dev libopenblas-pthread-dev liblapacke-dev libpcre2-dev libicu-dev libssl-dev libcmocka-dev"
TOOL_PKGS="pkgconf pkgconf-bin make"
NEVER_PKGS="libc6 libgcc-s1 libstdc++6"
BASE_PKGS="libssl3 libgnutls30 libgmp10 libhogweed6 libnettle8 libp11-kit0 libzstd1 libffi8 libidn2-0 libunistring2 libtasn1-6"
L=/usr/lib/$ARCH_DIR
LINKED_LIBS="$L/hdf5/serial/libhdf5.so $L/libcjson.so $L/openblas-pthread/libopenblas.so $L/liblapacke.so $L/libpcre2-8.so $L/libicuuc.so $L/libcrypto.so $L/libcmocka.so"
TOOL_BINS="/usr/bin/pkgconf /usr/bin/make"

usage() {
    echo "usage: tools/gpu_deps.sh download [DIR] | unpack DIR PREFIX [--all]" >&2
    exit 2
}

# The packages owning FILE... (symlinks resolved; usr-merged paths tried both ways).
owners() {
    for f in "$@"; do
        r=$(realpath "$f")
        { dpkg -S "$r" 2>/dev/null || dpkg -S "${r#/usr}" 2>/dev/null || dpkg -S "/usr$r" 2>/dev/null ||
            { echo "gpu_deps: $r: no package owns it" >&2; exit 1; }; } | head -1 | cut -d: -f1
    done
}

# The shared libraries ldd resolves for FILE... (absolute paths).
needed() {
    for f in "$@"; do ldd "$f" | awk '$3 ~ /^\// { print $3 }'; done | sort -u
}

without_never() {
    for p in "$@"; do
        case " $NEVER_PKGS $BASE_PKGS " in *" $p "*) ;; *) echo "$p" ;; esac
    done
}

# The static libraries (.a) taken out of every package that has them, repacked: the build links
# the shared ones, and the .a files (17 MiB of the 45) put the working tree over the device
# tool's 64 MiB (2026-11-27).
strip_static() {
    for deb in "$1"/*.deb; do
        dpkg-deb -c "$deb" | awk '/\.a$/ { n++ } END { exit !n }' || continue
        tmp=$(mktemp -d)
        dpkg-deb -R "$deb" "$tmp/pkg" && find "$tmp/pkg" -name '*.a' -delete && dpkg-deb -Zxz -b "$tmp/pkg" "$deb" >/dev/null
        rm -rf "$tmp"
    done
}

# Word splitting of the package and file lists is intended (names have no blanks).
# shellcheck disable=SC2046,SC2086
download() {
    dir=$1
    tools/install_deps.sh >/dev/null
    always=$(printf '%s\n' $DEV_PKGS $TOOL_PKGS $(without_never $(owners $LINKED_LIBS)) | sort -u)
    closure=$(without_never $(owners $(needed $LINKED_LIBS $TOOL_BINS)) | sort -u)
    missing_ok=$(printf '%s\n' $closure | grep -vxF "$always" || true)
    rm -rf "$dir"
    mkdir -p "$dir"
    printf '%s\n' $always >"$dir/always.list"
    printf '%s\n' $missing_ok >"$dir/if-missing.list"
    # The installed versions, so headers, .pc files and libraries agree; where the archive no longer
    # has one (a superseded security update), the candidate of the same release.
    for p in $always $missing_ok; do
        (cd "$dir" && { apt-get download -q "$p=$(dpkg-query -W -f='${Version}' "$p")" >/dev/null 2>&1 ||
            apt-get download -q "$p" >/dev/null 2>&1 || echo "gpu_deps: $p: cannot download" >&2; })
    done
    strip_static "$dir"
    n=$(find "$dir" -name '*.deb' | wc -l)
    expected=$(cat "$dir/always.list" "$dir/if-missing.list" | wc -l)
    [ "$n" -eq "$expected" ] || { echo "gpu_deps: $n of $expected packages downloaded into $dir" >&2; exit 1; }
    echo "gpu_deps: $n packages ($(du -sh "$dir" | cut -f1)) in $dir: $(wc -l <"$dir/always.list") always," \
         "$(wc -l <"$dir/if-missing.list") if missing" >&2
}

# 0 when every shared library of the .deb (its sonames: the names ending in .so.N) is already known
# to the dynamic linker.
system_has() {
    libs=$(dpkg-deb -c "$1" | awk '{ print $6 }' | grep -E '/lib[^/]*\.so\.[0-9]+$' | xargs -r -n1 basename | sort -u)
    [ -n "$libs" ] || return 1
    for so in $libs; do
        ldconfig -p | grep -qF "$so " || return 1
    done
    return 0
}

unpack() {
    dir=$1 prefix=$2 all=${3:-}
    case "$prefix" in /) echo "gpu_deps: refusing to unpack into /" >&2; exit 2 ;; esac
    [ -s "$dir/always.list" ] || { echo "gpu_deps: $dir/always.list: missing (run tools/gpu_deps.sh download here first)" >&2; exit 3; }
    mkdir -p "$prefix"
    n=0 skipped=""
    for list in always if-missing; do
        # shellcheck disable=SC2013
        for p in $(cat "$dir/$list.list"); do
            deb=$(find "$dir" -name "${p}_*.deb" | head -1)
            [ -n "$deb" ] || { echo "gpu_deps: $dir: no .deb for $p" >&2; exit 3; }
            if [ "$list" = if-missing ] && [ "$all" != --all ] && system_has "$deb"; then
                skipped="$skipped $p"
                continue
            fi
            dpkg -x "$deb" "$prefix"
            n=$((n + 1))
        done
    done
    # Absolute symlinks point into /: point them into the prefix. Then the links Debian makes with
    # update-alternatives (which dpkg -x does not run).
    find "$prefix" -type l | while read -r link; do
        target=$(readlink "$link")
        case "$target" in /*) ln -sfn "$prefix$target" "$link" ;; esac
    done
    pc="$prefix$L/pkgconfig"
    mkdir -p "$pc"
    [ -e "$pc/hdf5.pc" ] || ln -s hdf5-serial.pc "$pc/hdf5.pc"
    [ -e "$pc/lapack.pc" ] || ln -s ../openblas-pthread/pkgconfig/lapack-openblas.pc "$pc/lapack.pc"
    [ -e "$pc/blas.pc" ] || ln -s ../openblas-pthread/pkgconfig/blas-openblas.pc "$pc/blas.pc"
    echo "gpu_deps: unpacked $n packages into $prefix; already on this machine:${skipped:- none}" >&2
    libs="$prefix$L:$prefix$L/openblas-pthread:$prefix$L/hdf5/serial"
    pcs="$pc:$prefix$L/openblas-pthread/pkgconfig:$prefix/usr/share/pkgconfig"
    # PKG_CONFIG_LIBDIR replaces the default search path, so only these .pc files are read, and
    # PKG_CONFIG_SYSROOT_DIR puts the prefix before the /usr paths inside them. The paths that
    # pkg-config drops as system directories (/usr/include, /usr/lib/ARCH) come back through
    # C_INCLUDE_PATH and LIBRARY_PATH (and the Makefile's EXTRA_CFLAGS with a -L, which, unlike
    # LIBRARY_PATH, comes before the compiler's own /usr/lib/ARCH); the linker and the programs find the libraries (and the
    # libraries' own dependencies) through LD_LIBRARY_PATH. The tools go at the END of PATH: the
    # machine's own make and pkg-config win where it has them.
    cat <<EOF
export PKG_CONFIG_LIBDIR="$pcs"
export PKG_CONFIG_PATH="$pcs"
export PKG_CONFIG_SYSROOT_DIR="$prefix"
export C_INCLUDE_PATH="$prefix/usr/include\${C_INCLUDE_PATH:+:\$C_INCLUDE_PATH}"
export LIBRARY_PATH="$libs\${LIBRARY_PATH:+:\$LIBRARY_PATH}"
export EXTRA_CFLAGS="-L$prefix$L\${EXTRA_CFLAGS:+ \$EXTRA_CFLAGS}"
export LD_LIBRARY_PATH="$libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export PATH="\$PATH:$prefix/usr/bin"
EOF
}

case "${1:-}" in
download) [ $# -le 2 ] || usage; download "${2:-.gpu_debs}" ;;
unpack)
    if [ $# -lt 3 ] || [ $# -gt 4 ]; then usage; fi
    unpack "$2" "$3" "${4:-}"
    ;;
*) usage ;;
esac
