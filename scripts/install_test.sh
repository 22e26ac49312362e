#!/bin/sh
# install_test.sh - `make install` into a scratch DESTDIR, then use it as a
# user would: the file list (tests/install/filelist.sh), a C program built
# with pkg-config and with CMake's find_package(kplan) (linked and run: it
# calls only kp_rt_* that do not start CUDA), the example examples/mlp built
# with nvcc against the installed runtime through pkg-config and through
# CMake (tests/install/CMakeLists.txt; run only where a GPU is), `kplan
# --version` and `kplan record` (finding the collector in lib/kplan/) from the
# installed bin/, then `make uninstall`. Meanwhile `make deb` and
# tests/install/deb_check.sh (dpkg -c, lintian) check the package. The build
# tree's own libkplanrt.so.0 and .so copies are checked too.
#
#   install_test.sh MAKE BUILD [SANITIZER]
#
# NVCC and CUDA_HOME (environment) come from the Makefile. Under SANITIZER
# the programs are built but not run, and the examples and the package are
# left to the plain build (they would test nothing more).
set -eu
make=$1 build=$2 san=${3:-}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$CUDA_HOME/bin/nvcc}
prefix=/opt/kplan
tmp=$(mktemp -d)
debpid= nvccpid=
trap 'for p in $debpid $nvccpid; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT
root=$tmp/root
P=$root$prefix
fail() { echo "install-test: $*" >&2; exit 1; }
t_start=$(date +%s)

$make --no-print-directory -s BUILD="$build" PREFIX=$prefix DESTDIR="$root" install >/dev/null

# the package, checked in the background while the rest goes on
version=$(sed -n 's/^#define KP_VERSION "\(.*\)"/\1/p' common/version.h)
if [ -z "$san" ]; then
	$make --no-print-directory -s BUILD="$build" deb >/dev/null
	deb=$build/kplan_${version}_$(dpkg --print-architecture).deb
	sh tests/install/deb_check.sh "$build" "$deb" >"$tmp/deb.log" 2>&1 &
	debpid=$!
fi

# the file list
sh tests/install/filelist.sh "$build" > "$tmp/want"
(cd "$P" && find . -type f -o -type l) | sed 's|^\./||' | LC_ALL=C sort > "$tmp/got"
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

# the build tree keeps regular-file copies of the library under both names
# (runtime/module.mk says why), and programs linked there still run
real=$(ls "$build"/lib/libkplanrt.so.0.*.*)
for f in "$build/lib/libkplanrt.so.0" "$build/lib/libkplanrt.so"; do
	[ -f "$f" ] && [ ! -L "$f" ] && cmp -s "$f" "$real" || fail "$f: not a copy of $real"
done
${CC:-cc} -std=c11 -Wall -Werror -Iinclude -o "$tmp/app-tree" "$tmp/app.c" -L"$build/lib" -lkplanrt \
	-Wl,-rpath,"$(cd "$build/lib" && pwd)" || fail "build against $build/lib failed"
run "$tmp/app-tree"

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

# the example through pkg-config (nvcc, flags as examples/module.mk's),
# built in the background while CMake works
ex=examples/mlp/mlp.cu
if [ -z "$san" ]; then
	[ -x "$NVCC" ] || fail "nvcc not found at $NVCC (set CUDA_HOME or NVCC)"
	cudalib=$CUDA_HOME/lib64
	"$NVCC" -O2 -std=c++17 -arch=sm_90 -Xcompiler -Wall -cudart shared $(pkg-config --cflags kplan) \
		-o "$tmp/ex-pc" "$ex" $(pkg-config --libs kplan) -L"$cudalib" -lcublas \
		-Xlinker -rpath,"$P/lib" -Xlinker -rpath,"$cudalib" >"$tmp/nvcc.log" 2>&1 &
	nvccpid=$!
fi

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

# the example through CMake (tests/install/CMakeLists.txt, CUDA language)
if [ -z "$san" ]; then
	cmake -S tests/install -B "$tmp/ex-cm" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_CUDA_COMPILER="$NVCC" \
		-DKPLAN_EXAMPLE="$PWD/$ex" >"$tmp/ex-cmake.log" 2>&1 &&
		cmake --build "$tmp/ex-cm" >>"$tmp/ex-cmake.log" 2>&1 ||
		{ cat "$tmp/ex-cmake.log" >&2; fail "$ex: build with CMake find_package(kplan) failed"; }
	st=0
	wait $nvccpid || st=$?
	nvccpid=
	[ $st = 0 ] || { cat "$tmp/nvcc.log" >&2; fail "$ex: build with nvcc and pkg-config failed"; }
	for e in "$tmp/ex-pc" "$tmp/ex-cm/example"; do
		readelf -d "$e" | grep -q 'NEEDED.*\[libkplanrt\.so\.0\]' || fail "$e: no NEEDED libkplanrt.so.0"
		readelf -d "$e" | grep -q "R.*PATH.*$P/lib" || fail "$e: does not find the installed runtime"
	done
	# run where a GPU is (tests/install/run_examples.sh), else "skipped: no GPU"
	mkplan=-
	[ ! -x "$build/bin/kplan-mkplan" ] || mkplan=$build/bin/kplan-mkplan
	exmsg=$(sh tests/install/run_examples.sh "$mkplan" "$tmp/ex-pc" "$tmp/ex-cm/example") ||
		fail "examples/mlp against the installed runtime failed"
	exmsg="built with pkg-config and CMake; $exmsg"
	echo "install-test: examples/mlp against the installed runtime: $exmsg"
fi

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

if [ -n "$debpid" ]; then
	st=0
	wait $debpid || st=$?
	debpid=
	cat "$tmp/deb.log"
	[ $st = 0 ] || fail "the package check failed"
fi
if [ -n "$san" ]; then what="examples and package skipped under SANITIZER"; else what="examples, package"; fi
echo "install-test: ok (install, build tree copies, pkg-config, CMake find_package," \
	"kplan --version, uninstall; $what) in $(($(date +%s) - t_start)) s"
