#!/bin/sh
# deb_check.sh - check the package `make deb` built: `dpkg -c` lists exactly
# what `make install` installs (tests/install/filelist.sh, under usr/, man
# pages gzipped) plus the Debian files, with Debian's permissions and owner;
# the control file's Depends, shlibs and trigger; and lintian reports no
# errors (warnings are printed; docs/DESIGN.md, "Install and packaging", says
# why each one stays). Run by scripts/install_test.sh and `make deb-check`.
#
#   deb_check.sh BUILD DEB      (run from the top of the tree)
set -eu
build=$1 deb=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "deb-check: $*" >&2; exit 1; }
[ -f "$deb" ] || fail "$deb: no such package (make deb)"
deb=$(cd "$(dirname "$deb")" && pwd)/${deb##*/}

# the file list
{
	sh tests/install/filelist.sh "$build" | sed -e 's|^|usr/|' -e 's|^\(usr/share/man/.*\.1\)$|\1.gz|'
	echo usr/share/doc/kplan/copyright
	echo usr/share/doc/kplan/changelog.gz
	echo usr/share/lintian/overrides/kplan
} | LC_ALL=C sort > "$tmp/want"
dpkg-deb -c "$deb" > "$tmp/contents"
awk '$1 !~ /^d/ { sub(/^\.\//, "", $6); print $6 }' "$tmp/contents" | LC_ALL=C sort > "$tmp/got"
if ! cmp -s "$tmp/want" "$tmp/got"; then
	diff "$tmp/want" "$tmp/got" >&2 || true
	fail "$deb: files differ from the install list (< expected only, > packaged only)"
fi

# permissions and owners: only the programs in bin/ executable, shared objects not
awk '{ p = $6; sub(/^\.\//, "", p)
	want = $1 ~ /^d/ ? "drwxr-xr-x" : $1 ~ /^l/ ? "lrwxrwxrwx" : \
		p ~ /^usr\/bin\/kplan(-calibrate)?$/ ? "-rwxr-xr-x" : "-rw-r--r--"
	if ($1 != want || $2 != "root/root")
		printf "%s %s %s (want %s root/root)\n", $1, $2, p, want }' "$tmp/contents" > "$tmp/modes"
[ ! -s "$tmp/modes" ] || { cat "$tmp/modes" >&2; fail "$deb: wrong permissions or owner"; }
real=$(sed -n 's|^usr/lib/\(libkplanrt\.so\.0\.[0-9]*\.[0-9]*\)$|\1|p' "$tmp/want")
for l in libkplanrt.so libkplanrt.so.0; do
	grep -q " \./usr/lib/$l -> $real\$" "$tmp/contents" || fail "$deb: usr/lib/$l is not a link to $real"
done

# control: Depends on the Debian libraries the binaries link (never on
# the CUDA toolkit's), shlibs for libkplanrt.so.0, the ldconfig trigger
dpkg-deb -e "$deb" "$tmp/ctl"
depends=$(dpkg-deb -f "$deb" Depends)
for p in libc6 libsqlite3-0 zlib1g; do
	echo "$depends" | grep -q "\(^\|, \)$p \?\((\|,\|$\)" || fail "Depends lacks $p: $depends"
done
! echo "$depends" | grep -qi 'cuda' || fail "Depends names a CUDA package: $depends"
grep -qx 'libkplanrt 0 kplan (>= .*)' "$tmp/ctl/shlibs" || fail "DEBIAN/shlibs: $(cat "$tmp/ctl/shlibs")"
grep -qx 'activate-noawait ldconfig' "$tmp/ctl/triggers" || fail "DEBIAN/triggers: no ldconfig trigger"
(cd "$tmp" && dpkg-deb -x "$deb" root && cd root && md5sum --quiet -c ../ctl/md5sums) >&2 ||
	fail "DEBIAN/md5sums does not match the files"

# lintian: no errors (it refuses nothing as root, but says so on stderr)
command -v lintian >/dev/null || fail "lintian not found: apt-get install lintian (or: sh scripts/deps.sh package)"
t0=$(date +%s.%N)
st=0
lintian --fail-on error "$deb" > "$tmp/lintian" 2> "$tmp/lintian.err" || st=$?
t1=$(date +%s.%N)
grep -v 'running with root privileges is not recommended' "$tmp/lintian.err" >&2 || true
if [ $st != 0 ] || grep -q '^E:' "$tmp/lintian"; then
	cat "$tmp/lintian" >&2
	fail "lintian reports errors (exit $st)"
fi
warnings=$(awk '/^W:/ { print $3 }' "$tmp/lintian" | LC_ALL=C sort -u | paste -sd ' ')
printf 'deb-check: ok (%s: file list, permissions, Depends: %s; lintian %.1f s: no errors; warnings: %s)\n' \
	"${deb##*/}" "$depends" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "${warnings:-none}"
