#!/bin/sh
# deps.sh - make sure the Debian packages kplan builds against are present.
#
# Checks for each package's header (or tool); when something is missing and
# we are root, installs it with apt-get; otherwise prints the exact command
# and fails. Extra package groups: "deps.sh chromium" adds the browser used
# by the report's rendering test; "deps.sh package" adds what makes and
# checks the Debian package (dpkg-shlibdeps, lintian), which `make test`
# asks for (packaging/module.mk).
#
# Another apt (unattended-upgrades, cloud-init, a second build) holding its
# lock is waited for, up to KPLAN_APT_WAIT seconds (default 600): apt's own
# DPkg::Lock::Timeout for the dpkg lock, a retry loop for the package
# lists' lock, which `apt-get update` does not wait for. KPLAN_DEPS_ROOT
# (tests) is prepended to the paths checked.
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
	[ -e "${KPLAN_DEPS_ROOT:-}$file" ] || echo "$pkg"
done | sort -u | tr '\n' ' ')

[ -z "$missing" ] && exit 0

cmd="apt-get update && apt-get install -y --no-install-recommends $missing"
wait_s=${KPLAN_APT_WAIT:-600}
apt="apt-get -o DPkg::Lock::Timeout=$wait_s"

# apt-get update, waiting while another apt holds the lists' lock
update() {
	waited=0
	while ! out=$($apt update -qq 2>&1); do
		case $out in
		*"Could not get lock"*|*"Unable to lock"*) ;;
		*) echo "$out" >&2; return 1 ;;
		esac
		if [ "$waited" -ge "$wait_s" ]; then
			echo "$out" >&2
			echo "deps.sh: another apt still holds its lock after ${wait_s} s" >&2
			return 1
		fi
		[ "$waited" -gt 0 ] || echo "deps.sh: another apt holds its lock; waiting (up to ${wait_s} s)" >&2
		sleep 5
		waited=$((waited + 5))
	done
	[ -z "$out" ] || echo "$out" >&2
}

if [ "$(id -u)" = 0 ]; then
	echo "deps.sh: installing $missing" >&2
	update
	DEBIAN_FRONTEND=noninteractive $apt install -y -qq --no-install-recommends $missing >&2
else
	echo "kplan needs these Debian packages: $missing" >&2
	echo "run as root:  $cmd" >&2
	exit 1
fi
