#!/bin/sh
# tools/install.sh install|uninstall: what `make install` and `make uninstall` do (docs/install.md).
# Environment (the Makefile sets it): DESTDIR, PREFIX, BUILD, VERSION, SO_MAJOR, API_HEADER (the C
# API, include/spanprobe/spanprobe.h), HEADERS (the library's module headers, paths from the
# repository root), PC_CFLAGS, PC_LIBS_PRIVATE.
# install: the two programs, libspanprobe.so.VERSION with its soname link libspanprobe.so.SO_MAJOR and
# libspanprobe.so, libspanprobe.a, the C API as include/spanprobe/spanprobe.h, the module headers
# under include/spanprobe/ too (as in the source tree: they include each other as "core/common.h"), lib/pkgconfig/spanprobe.pc, man pages made by help2man
# from --help (spanprobe.1, spanprobe-f64.1, spanprobe-COMMAND.1 for every command) and the bash
# completion; every path written is listed in share/spanprobe/installed.txt.
# uninstall: removes exactly the paths that list names, then the directories it leaves empty.
set -eu
root="${DESTDIR:-}${PREFIX}"
manifest="$root/share/spanprobe/installed.txt"

if [ "$1" = uninstall ]; then
    [ -f "$manifest" ] || { echo "uninstall: $manifest not found: nothing installed there" >&2; exit 1; }
    dirs=$(mktemp)
    while IFS= read -r p; do
        rm -f "$root/$p"
        dirname "$root/$p" >>"$dirs"
    done <"$manifest"
    # the deepest directories first; rmdir leaves any that hold something else
    sort -ru "$dirs" | while IFS= read -r d; do
        while [ "$d" != "$root" ] && rmdir "$d" 2>/dev/null; do d=$(dirname "$d"); done
    done
    rm -f "$dirs"
    echo "uninstalled spanprobe from $root"
    exit 0
fi

list=$(mktemp)
trap 'rm -f "$list"' EXIT
put() { # put MODE SOURCE DEST (DEST relative to root)
    install -D -m "$1" "$2" "$root/$3"
    echo "$3" >>"$list"
}
link() { # link TARGET NAME (NAME relative to root)
    ln -sf "$1" "$root/$2"
    echo "$2" >>"$list"
}

put 755 "$BUILD/spanprobe" bin/spanprobe
put 755 "$BUILD/spanprobe-f64" bin/spanprobe-f64
put 644 "$BUILD/libspanprobe.so.$VERSION" "lib/libspanprobe.so.$VERSION"
link "libspanprobe.so.$VERSION" "lib/libspanprobe.so.$SO_MAJOR"
link "libspanprobe.so.$SO_MAJOR" lib/libspanprobe.so
put 644 "$BUILD/libspanprobe.a" lib/libspanprobe.a
put 644 "$API_HEADER" include/spanprobe/spanprobe.h
for h in $HEADERS; do
    put 644 "$h" "include/spanprobe/$h"
done

pc=$(mktemp)
cat >"$pc" <<PC
prefix=$PREFIX
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: spanprobe
Description: layer-wise diagnostics of Transformer depth (the library behind the spanprobe command)
Version: $VERSION
Cflags: -I\${includedir} -I\${includedir}/spanprobe $PC_CFLAGS
Libs: -L\${libdir} -lspanprobe
Libs.private: $PC_LIBS_PRIVATE
PC
put 644 "$pc" lib/pkgconfig/spanprobe.pc
rm -f "$pc"

# man pages from --help (help2man: the Debian package of that name)
man=$(mktemp -d)
help2man -N --no-discard-stderr --version-string="spanprobe $VERSION" \
    --name="layer-wise diagnostics of Transformer depth" -o "$man/spanprobe.1" "$BUILD/spanprobe"
help2man -N --no-discard-stderr --version-string="spanprobe-f64 $VERSION" \
    --name="spanprobe computing in float64 (reference reports)" -o "$man/spanprobe-f64.1" "$BUILD/spanprobe-f64"
"$BUILD/spanprobe" --help | sed -n 's/^  \([a-z][a-z0-9-]*\)  *\(.*\)/\1 \2/p' | while read -r cmd what; do
    help2man -N --no-discard-stderr --version-string="spanprobe-$cmd $VERSION" --name="$what" \
        --help-option="$cmd --help" -o "$man/spanprobe-$cmd.1" "$BUILD/spanprobe"
done
for page in "$man"/*.1; do
    put 644 "$page" "share/man/man1/$(basename "$page")"
done
rm -rf "$man"
put 644 dist/spanprobe.bash share/bash-completion/completions/spanprobe

echo share/spanprobe/installed.txt >>"$list"
install -D -m 644 "$list" "$manifest"
echo "installed spanprobe $VERSION into $root ($(wc -l <"$manifest") files; make uninstall removes them)"
