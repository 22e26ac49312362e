#!/bin/sh
# mkdeb.sh - turn a `make install PREFIX=/usr DESTDIR=ROOT` tree into a
# Debian binary package, doing by hand what debhelper would (no debian/
# folder, no dh): strip like dh_strip, gzip the man pages, add the
# copyright file, the changelog (gzipped) and lintian overrides, Depends from
# dpkg-shlibdeps, shlibs, the ldconfig trigger, md5sums, then dpkg-deb. Run by `make deb`
# (packaging/module.mk); tests/install/deb_check.sh checks the result.
#
#   mkdeb.sh ROOT DEB VERSION ARCH SOVERSION CUDA_LIBDIR OVERRIDES
#
# DEB_MAINTAINER (environment) names the Maintainer, "Name <address>".
set -eu
root=$(cd "$1" && pwd) deb=$2 version=$3 arch=$4 soversion=$5 cuda_libdir=$6 overrides=$7
maint=${DEB_MAINTAINER:-kplan developers <kplan@example.org>}
doc=$root/usr/share/doc/kplan
ctl=$root/DEBIAN
fail() { echo "mkdeb: $*" >&2; exit 1; }
command -v dpkg-shlibdeps >/dev/null ||
	fail "dpkg-shlibdeps not found: apt-get install dpkg-dev (or: sh scripts/deps.sh package)"

# the changelog's latest entry is this version (a native package: no -N)
cl_version=$(sed -n '1s/^kplan (\([^)]*\)).*/\1/p' packaging/changelog)
[ "$cl_version" = "$version" ] ||
	fail "packaging/changelog's latest entry is '$cl_version' but common/version.h says '$version': add an entry for $version at its top"
# file times and the changelog's date agree, so two builds of one tree match
cl_date=$(sed -n 's/^ -- .*>  \(.*\)$/\1/p' packaging/changelog | head -n 1)
SOURCE_DATE_EPOCH=$(date -d "$cl_date" +%s) || fail "packaging/changelog: bad date '$cl_date'"
export SOURCE_DATE_EPOCH

# executables and shared objects as dh_strip leaves them (symbols of the
# dynamic table stay); static archives keep their symbols, lose debug info
strip --remove-section=.comment --remove-section=.note "$root/usr/bin/kplan"
[ ! -f "$root/usr/bin/kplan-calibrate" ] ||
	strip --remove-section=.comment --remove-section=.note "$root/usr/bin/kplan-calibrate"
find "$root/usr/lib" -type f -name '*.so*' -exec \
	strip --remove-section=.comment --remove-section=.note --strip-unneeded {} +
find "$root/usr/lib" -type f -name '*.a' -exec \
	strip --strip-debug --remove-section=.comment --remove-section=.note \
	--enable-deterministic-archives {} +

gzip -9n "$root"/usr/share/man/man1/*.1
install -d "$doc" "$root/usr/share/lintian/overrides"
{ cat packaging/copyright
  for p in libcsv-dev libyajl-dev libsodium-dev; do
	[ -f "/usr/share/doc/$p/copyright" ] || fail "/usr/share/doc/$p/copyright missing (is $p installed?)"
	printf '\n%s\n%s, from /usr/share/doc/%s/copyright:\n\n' \
		'------------------------------------------------------------------------' "$p" "$p"
	cat "/usr/share/doc/$p/copyright"
  done; } > "$doc/copyright"
gzip -9n < packaging/changelog > "$doc/changelog.gz"
install -m 644 "$overrides" "$root/usr/share/lintian/overrides/kplan"

# Depends: the Debian packages of the libraries the ELF files link
# (dpkg-shlibdeps). The CUDA toolkit's libraries are no Debian package's:
# they are found at run time (RUNPATH), so they count for nothing here.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
install -d "$ctl" "$tmp/debian"
ln -s "$root" "$tmp/debian/kplan"	# where dpkg-shlibdeps expects the package
elfs=$(cd "$tmp" && find debian/kplan/usr/ -type f \( -perm -u+x -o -name '*.so*' \) | LC_ALL=C sort)
for f in $elfs; do
	readelf -d "$tmp/$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
done | LC_ALL=C sort -u | while read -r so; do
	if [ -e "$cuda_libdir/$so" ]; then echo "$so" | sed 's/\.so\./ /'; fi
done > "$tmp/shlibs.local"
printf 'Source: kplan\n\nPackage: kplan\nArchitecture: any\n' > "$tmp/debian/control"
depends=$(cd "$tmp" && dpkg-shlibdeps -O -L"$tmp/shlibs.local" $(printf ' -e%s' $elfs)) ||
	fail "dpkg-shlibdeps failed (a library from outside Debian and the CUDA toolkit?)"
depends=${depends#shlibs:Depends=}
# the static libraries, for license compliance (Debian policy 7.8)
built_using=$(dpkg-query -W -f='${source:Package} (= ${source:Version}), ' \
	libcsv-dev libyajl-dev libsodium-dev | sed 's/, $//')

# permissions: dpkg-deb --root-owner-group makes everything root's
find "$root" -type d -exec chmod 755 {} +
find "$root" -type f -exec chmod 644 {} +
chmod 755 "$root/usr/bin/kplan"
[ ! -f "$root/usr/bin/kplan-calibrate" ] || chmod 755 "$root/usr/bin/kplan-calibrate"

{
	echo "Package: kplan"
	echo "Version: $version"
	echo "Architecture: $arch"
	echo "Maintainer: $maint"
	echo "Installed-Size: $(du -sk --apparent-size "$root/usr" | cut -f1)"
	echo "Depends: $depends"
	echo "Suggests: python3"
	echo "Built-Using: $built_using"
	echo "Section: devel"
	echo "Priority: optional"
	echo "Description: CUDA kernel-launch profiler and CUDA-graph planner"
	echo " kplan records what a CUDA program launches (or imports a PyTorch"
	echo " profiler or Nsight Systems trace), finds the regions where the GPU"
	echo " waits for the CPU to launch work, and writes a plan that runs them as"
	echo " CUDA graphs. The runtime library libkplanrt applies the plan; this"
	echo " package also holds its header, pkg-config and CMake files, the CUPTI"
	echo " collector and the Python package. The CUDA toolkit is not a"
	echo " dependency: it is found at run time."
} > "$ctl/control"
echo "libkplanrt $soversion kplan (>= $version)" > "$ctl/shlibs"
echo "activate-noawait ldconfig" > "$ctl/triggers"
(cd "$root" && find usr -type f | LC_ALL=C sort | xargs md5sum) > "$ctl/md5sums"
chmod 644 "$ctl"/*

dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
