#!/bin/sh
# check_layers.sh - the folders' dependencies run one way.
#
#   sh scripts/check_layers.sh "DIR USES..." ...
#
# For each argument, every #include "..." in DIR's sources (.c, .h, .cu)
# names a header of DIR itself or of a folder USES lists; each other one is
# printed and the exit status is 1. The Makefile passes each folder's
# <dir>_USES from its module.mk (`make check-layers`).
set -eu

bad=$(for arg in "$@"; do
	set -- $arg
	dir=$1
	shift
	for f in "$dir"/*.c "$dir"/*.h "$dir"/*.cu; do
		[ -f "$f" ] || continue
		sed -n 's|^[[:space:]]*#[[:space:]]*include[[:space:]]*"\(\.\./\)*\([A-Za-z0-9_]*\)/.*|\2|p' "$f" |
		while read -r used; do
			case " $dir $* " in
			*" $used "*) ;;
			*) echo "check-layers: $f includes from $used/ ($dir/ may use: $*)" ;;
			esac
		done
	done
done)
[ -z "$bad" ] && exit 0
echo "$bad" >&2
exit 1
