#!/bin/sh
# check_exports.sh - libkplanrt exports exactly the kp_rt_* functions its
# public header declares, nothing else, under the expected soname.
#
#   check_exports.sh LIB HEADER SONAME
set -eu
lib=$1 header=$2 soname=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# declared: function names followed by '(' once comments are gone
${CC:-cc} -E -P -x c "$header" | grep -oE '\bkp_rt_[A-Za-z0-9_]+[[:space:]]*\(' |
	sed 's/[[:space:]]*($//' | sort -u > "$tmp/declared"
nm -D --defined-only "$lib" | awk '{ print $NF }' | sed 's/@.*//' | sort -u > "$tmp/exported"

st=0
if ! cmp -s "$tmp/declared" "$tmp/exported"; then
	echo "check_exports: $lib exports differ from $header (< declared only, > exported only):" >&2
	diff "$tmp/declared" "$tmp/exported" >&2 || true
	st=1
fi
got=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$got" != "$soname" ]; then
	echo "check_exports: $lib has soname '$got', expected '$soname'" >&2
	st=1
fi
[ $st = 0 ] && echo "check_exports: $(wc -l < "$tmp/exported") kp_rt_* functions exported, soname $got"
exit $st
