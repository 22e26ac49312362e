#!/bin/sh
# filelist.sh - what `make install` puts under PREFIX (files and symbolic
# links, one path a line relative to PREFIX, sorted), written out from what
# the issue asks for rather than from packaging/module.mk, so that the install
# test (scripts/install_test.sh) and the package test (tests/install/deb_check.sh)
# catch a file that goes missing or one that nobody meant to ship.
#
#   filelist.sh BUILD      (run from the top of the tree)
set -eu
build=$1
kplan=$build/bin/kplan
{
	for f in bin/kplan lib/libkplanrt.so lib/libkplanrt.so.0 lib/libkplanrt.a \
		lib/kplan/libkplan_collect.so include/kplan/runtime.h lib/pkgconfig/kplan.pc \
		lib/cmake/kplan/kplanConfig.cmake lib/cmake/kplan/kplanConfigVersion.cmake \
		share/bash-completion/completions/kplan share/man/man1/kplan.1; do
		echo "$f"
	done
	# the GPU measurements for `kplan calibrate`, built where nvcc is
	[ ! -x "$build/bin/kplan-calibrate" ] || echo bin/kplan-calibrate
	# the real file, libkplanrt.so.0.MINOR.PATCH
	ls "$build"/lib/libkplanrt.so.0.*.* | sed 's|.*/|lib/|'
	# one page per command of `kplan --help`
	for c in $("$kplan" --help | awk '/^commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }'); do
		[ "$c" = help ] || echo "share/man/man1/kplan-$c.1"
	done
	for f in python/kplan/*.py; do echo "lib/python3/dist-packages/kplan/${f##*/}"; done
} | LC_ALL=C sort
