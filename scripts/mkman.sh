#!/bin/sh
# mkman.sh - write kplan's man pages from the commands' own help text.
#
#   mkman.sh KPLAN VERSION OUTDIR
#
# OUTDIR/kplan.1 from `kplan --help`, and OUTDIR/kplan-CMD.1 from
# `kplan help CMD` for each command that `kplan --help` lists. The help text
# goes in as it is (a no-fill block); no help2man needed.
set -eu
kplan=$1 version=$2 out=$3
mkdir -p "$out"

# roff-escape a help text: backslashes, and lines starting with . or '
esc() {
	sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"
}

page() { # name section-title summary; help text on stdin
	printf '.TH %s 1 "" "kplan %s" "kplan manual"\n' "$(echo "$1" | tr a-z A-Z)" "$version"
	printf '.SH NAME\n%s \\- %s\n' "$1" "$2"
	printf '.SH DESCRIPTION\n.nf\n'
	esc
	printf '.fi\n'
}

cmds=$("$kplan" --help | awk '/^commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }')

{
	"$kplan" --help | page kplan "profile CUDA launch overhead and plan CUDA graphs"
	printf '.SH SEE ALSO\n'
	sep=
	for c in $cmds; do
		[ "$c" = help ] && continue
		printf '%s\\fBkplan-%s\\fR(1)' "$sep" "$c"
		sep=', '
	done
	printf '\n'
} > "$out/kplan.1"

for c in $cmds; do
	[ "$c" = help ] && continue
	summary=$("$kplan" --help | awk -v c="$c" '$1 == c { $1 = ""; sub(/^ +/, ""); print; exit }')
	"$kplan" help "$c" | page "kplan-$c" "$summary" > "$out/kplan-$c.1"
done
