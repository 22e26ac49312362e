#!/bin/sh
# deps.sh - make sure the Debian packages kplan builds against are present.
#
# Checks for each package's header (or tool); when something is missing and
# we are root, installs it with apt-get; otherwise prints the exact command
# and fails. Extra package groups: "deps.sh chromium" adds the browser used
# by the report's rendering test; "deps.sh package" adds what makes and
# checks the Debian package (dpkg-shlibdeps, lintian), which `make test`
# asks for (packaging/module.mk).
set -eu

# header-or-command  package
need="
/usr/include/sqlite3.h libsqlite3-dev
/usr/include/csv.h libcsv-dev
/usr/include/CUnit/Basic.h libcunit1-dev
/usr/include/yajl/yajl_parse.h libyajl-dev
/usr/include/zlib.h zlib1g-dev
/usr/include/sodium.h libsodium-dev
/usr/lib/x86_64-linux-gnu/libsodium.a libsodium-dev
/usr/lib/x86_64-linux-gnu/libcsv.a libcsv-dev
/usr/bin/python3 python3
/usr/bin/pkg-config pkgconf
/usr/bin/cmake cmake
/usr/bin/readelf binutils
"
for extra in "$@"; do
	case "$extra" in
	chromium) need="$need
/usr/bin/chromium chromium" ;;
	package) need="$need
/usr/bin/dpkg-shlibdeps dpkg-dev
/usr/bin/lintian lintian" ;;
	clang) need="$need
/usr/bin/clang clang
/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a libclang-rt-14-dev" ;;
	*) echo "deps.sh: unknown group '$extra'" >&2; exit 2 ;;
	esac
done

missing=$(echo "$need" | while read -r file pkg; do
	[ -n "$file" ] || continue
	[ -e "$file" ] || echo "$pkg"
done | sort -u | tr '\n' ' ')

[ -z "$missing" ] && exit 0

cmd="apt-get update && apt-get install -y --no-install-recommends $missing"
if [ "$(id -u)" = 0 ]; then
	echo "deps.sh: installing $missing" >&2
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2
else
	echo "kplan needs these Debian packages: $missing" >&2
	echo "run as root:  $cmd" >&2
	exit 1
fi
