#!/bin/sh
# install_test.sh - `make install` into a scratch DESTDIR, then use it as a
# user would: the file list, a C program built with pkg-config and with
# CMake's find_package(kplan) (linked and run: it calls only kp_rt_* that
# do not start CUDA), `kplan --version` and `kplan record` (finding the
# collector in lib/kplan/) from the installed bin/, then `make uninstall`.
#
#   install_test.sh MAKE BUILD [SANITIZER]
set -eu
make=$1 build=$2 san=${3:-}
prefix=/opt/kplan
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
P=$root$prefix
fail() { echo "install-test: $*" >&2; exit 1; }

$make --no-print-directory -s BUILD="$build" PREFIX=$prefix DESTDIR="$root" install >/dev/null

# the file list
version=$(sed -n 's/^#define KP_VERSION "\(.*\)"/\1/p' common/version.h)
{
	for f in bin/kplan lib/libkplanrt.so lib/libkplanrt.so.0 lib/libkplanrt.a \
		lib/kplan/libkplan_collect.so include/kplan/runtime.h lib/pkgconfig/kplan.pc \
		lib/cmake/kplan/kplanConfig.cmake lib/cmake/kplan/kplanConfigVersion.cmake \
		share/bash-completion/completions/kplan share/man/man1/kplan.1; do
		echo "$f"
	done
	ls "$build"/lib/libkplanrt.so.0.* | sed 's|.*/|lib/|'
	for c in $("$build"/bin/kplan --help | awk '/^commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }'); do
		[ "$c" = help ] || echo "share/man/man1/kplan-$c.1"
	done
	for f in python/kplan/*.py; do echo "lib/python3/dist-packages/kplan/${f##*/}"; done
} | sort > "$tmp/want"
(cd "$P" && find . -type f -o -type l) | sed 's|^\./||' | sort > "$tmp/got"
if ! cmp -s "$tmp/want" "$tmp/got"; then
	diff "$tmp/want" "$tmp/got" >&2 || true
	fail "installed files differ (< expected only, > installed only)"
fi
[ -L "$P/lib/libkplanrt.so" ] && [ -L "$P/lib/libkplanrt.so.0" ] ||
	fail "lib/libkplanrt.so and .so.0 should be symlinks"
readelf -d "$P/lib/libkplanrt.so" | grep -q 'SONAME.*\[libkplanrt\.so\.0\]' ||
	fail "lib/libkplanrt.so: soname is not libkplanrt.so.0"

# a program against the installed runtime
cat > "$tmp/app.c" <<'EOC'
#include <stdio.h>
#include <string.h>
#include <kplan/runtime.h>

int main(void)
{
	const char *r = kp_rt_reason_name(0);

	kp_rt_close(NULL);		/* a no-op, touches no CUDA */
	printf("kplan runtime linked: reason 0 = %s\n", r ? r : "(null)");
	return r ? 0 : 1;
}
EOC
run() { # program: run it unless sanitized (an ASan library wants ASan first)
	if [ -n "$san" ]; then return 0; fi
	"$1" > "$tmp/out" || fail "$1 failed"
	grep -q 'kplan runtime linked' "$tmp/out" || fail "$1: unexpected output"
}

# pkg-config: the .pc's prefix follows the file, so the DESTDIR copy works
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
[ "$(pkg-config --modversion kplan)" = "$version" ] || fail "pkg-config --modversion kplan"
flags=$(pkg-config --cflags --libs kplan)
inc=$(pkg-config --cflags-only-I kplan | sed 's/^-I//; s/ *$//')
[ "$inc" -ef "$P/include" ] || fail "pkg-config --cflags: '$inc' is not $P/include"
${CC:-cc} -std=c11 -Wall -Werror -o "$tmp/app-pc" "$tmp/app.c" $flags -Wl,-rpath,"$P/lib" ||
	fail "build with pkg-config failed"
readelf -d "$tmp/app-pc" | grep -q 'NEEDED.*\[libkplanrt\.so\.0\]' || fail "app-pc: no NEEDED libkplanrt.so.0"
run "$tmp/app-pc"

# CMake: find_package(kplan) through CMAKE_PREFIX_PATH, target kplan::runtime
mkdir -p "$tmp/cm"
cp "$tmp/app.c" "$tmp/cm/app.c"
cat > "$tmp/cm/CMakeLists.txt" <<'EOC'
cmake_minimum_required(VERSION 3.13)
project(kplan_install_test C)
find_package(kplan 0.1 REQUIRED)
add_executable(app app.c)
target_link_libraries(app PRIVATE kplan::runtime)
EOC
cmake -S "$tmp/cm" -B "$tmp/cm/b" -DCMAKE_PREFIX_PATH="$P" >"$tmp/cmake.log" 2>&1 &&
	cmake --build "$tmp/cm/b" >>"$tmp/cmake.log" 2>&1 ||
	{ cat "$tmp/cmake.log" >&2; fail "build with CMake find_package(kplan) failed"; }
run "$tmp/cm/b/app"

# the installed CLI
[ "$("$P/bin/kplan" --version)" = "kplan $version" ] || fail "installed kplan --version"
if [ -z "$san" ]; then
	# record finds the collector in PREFIX/lib/kplan (no CUDA program: nothing recorded)
	(unset KPLAN_COLLECTOR; cd "$tmp" && "$P/bin/kplan" record -o "$tmp/r.db" -- true) \
		>"$tmp/rec.log" 2>&1 || { cat "$tmp/rec.log" >&2; fail "installed kplan record failed"; }
fi
[ -s "$P/share/man/man1/kplan-record.1" ] && grep -q '^\.TH KPLAN-RECORD 1' "$P/share/man/man1/kplan-record.1" ||
	fail "man page kplan-record.1"

# uninstall leaves nothing behind
$make --no-print-directory -s BUILD="$build" PREFIX=$prefix DESTDIR="$root" uninstall >/dev/null
left=$(cd "$P" && find . -type f -o -type l)
[ -z "$left" ] || fail "uninstall left: $left"
echo "install-test: ok (install, pkg-config, CMake find_package, kplan --version, uninstall)"
