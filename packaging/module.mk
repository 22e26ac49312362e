# packaging/module.mk - make install / uninstall / deb, and what they ship.
#
#   make install [PREFIX=/usr/local] [DESTDIR=]   install the tree below
#   make uninstall [PREFIX=...] [DESTDIR=]        remove exactly those files
#   make deb                                      $(BUILD)/kplan_VERSION_ARCH.deb
#   make deb-check                                dpkg -c and lintian on it
#   make install-test                             (part of `make test`: both)
#
# Installed tree (PREFIX):
#   bin/kplan
#   lib/libkplanrt.so.$(RT_VERSION), .so.$(RT_SOVERSION) and .so (symlinks)
#   lib/libkplanrt.a
#   lib/kplan/libkplan_collect.so          (kplan record looks there)
#   include/kplan/runtime.h
#   lib/pkgconfig/kplan.pc                 (prefix relative to the .pc file)
#   lib/cmake/kplan/kplanConfig.cmake, kplanConfigVersion.cmake (kplan::runtime)
#   share/bash-completion/completions/kplan
#   share/man/man1/kplan.1, kplan-CMD.1    (scripts/mkman.sh, from the help)
#   lib/python3/dist-packages/kplan/       (Debian's python3 path for PREFIX)
# The CUDA toolkit is not installed or required by the package: libkplanrt and
# the collector find libcudart/libcupti through their rpath ($(CUDA_LIBDIR))
# or the loader's path, as in the build tree.

PREFIX ?= /usr/local
DESTDIR ?=
PKG_DIR := $(BUILD)/pkg
MAN_DIR := $(PKG_DIR)/man
MAN_STAMP := $(MAN_DIR)/.stamp
PY_DEST := lib/python3/dist-packages

SUBST = sed -e 's|@VERSION@|$(KP_VERSION)|g' -e 's|@RT_VERSION@|$(RT_VERSION)|g' \
	-e 's|@RT_SOVERSION@|$(RT_SOVERSION)|g' -e 's|@CUDA_LIBDIR@|$(CUDA_LIBDIR)|g'

$(PKG_DIR)/%: packaging/%.in runtime/module.mk common/version.h
	@mkdir -p $(dir $@)
	$(quiet) GEN $@
	$(Q)$(SUBST) $< > $@

$(MAN_STAMP): $(BUILD)/bin/kplan scripts/mkman.sh
	$(quiet) MAN $(MAN_DIR)
	$(Q)rm -rf $(MAN_DIR) && sh scripts/mkman.sh $(BUILD)/bin/kplan $(KP_VERSION) $(MAN_DIR)
	@touch $@

# installing for real (no DESTDIR) as root: refresh the loader's cache, so
# that programs find lib/libkplanrt.so.0 under /usr/local (ld.so.conf) at once
LDCONFIG = if [ -z '$(DESTDIR)' ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi

PKG_GEN := $(PKG_DIR)/kplan.pc $(PKG_DIR)/kplanConfig.cmake $(PKG_DIR)/kplanConfigVersion.cmake

.PHONY: install uninstall install-test check-exports deb deb-check
# what install puts down, relative to PREFIX (uninstall removes these)
INSTALL_FILES = bin/kplan bin/kplan-calibrate lib/libkplanrt.so.$(RT_VERSION) lib/libkplanrt.so.$(RT_SOVERSION) \
	lib/libkplanrt.so lib/libkplanrt.a lib/kplan/libkplan_collect.so \
	include/kplan/runtime.h lib/pkgconfig/kplan.pc lib/cmake/kplan/kplanConfig.cmake \
	lib/cmake/kplan/kplanConfigVersion.cmake share/bash-completion/completions/kplan

install: $(BUILD)/bin/kplan $(RT_REAL) $(BUILD)/lib/libkplanrt.so $(BUILD)/lib/libkplanrt.a \
		$(COLLECTOR_LIB) $(PKG_GEN) $(MAN_STAMP) $(CALIBRATE_BIN)
	$(quiet) INSTALL $(DESTDIR)$(PREFIX)
	$(Q)set -e; D='$(DESTDIR)$(PREFIX)'; \
	install -d "$$D/bin" "$$D/lib/kplan" "$$D/include/kplan" "$$D/lib/pkgconfig" \
		"$$D/lib/cmake/kplan" "$$D/share/bash-completion/completions" \
		"$$D/share/man/man1" "$$D/$(PY_DEST)/kplan"; \
	install -m 755 $(BUILD)/bin/kplan "$$D/bin/kplan"; \
	if [ -n '$(CALIBRATE_BIN)' ]; then install -m 755 $(CALIBRATE_BIN) "$$D/bin/kplan-calibrate"; fi; \
	install -m 644 $(RT_REAL) "$$D/lib/libkplanrt.so.$(RT_VERSION)"; \
	ln -sfn libkplanrt.so.$(RT_VERSION) "$$D/lib/libkplanrt.so.$(RT_SOVERSION)"; \
	ln -sfn libkplanrt.so.$(RT_VERSION) "$$D/lib/libkplanrt.so"; \
	install -m 644 $(BUILD)/lib/libkplanrt.a "$$D/lib/libkplanrt.a"; \
	install -m 644 $(COLLECTOR_LIB) "$$D/lib/kplan/libkplan_collect.so"; \
	install -m 644 include/kplan/runtime.h "$$D/include/kplan/runtime.h"; \
	install -m 644 $(PKG_DIR)/kplan.pc "$$D/lib/pkgconfig/kplan.pc"; \
	install -m 644 $(PKG_DIR)/kplanConfig.cmake $(PKG_DIR)/kplanConfigVersion.cmake "$$D/lib/cmake/kplan/"; \
	install -m 644 packaging/kplan.bash-completion "$$D/share/bash-completion/completions/kplan"; \
	install -m 644 $(MAN_DIR)/*.1 "$$D/share/man/man1/"; \
	install -m 644 python/kplan/*.py "$$D/$(PY_DEST)/kplan/"
	$(Q)$(LDCONFIG)

uninstall:
	$(quiet) UNINSTALL $(DESTDIR)$(PREFIX)
	$(Q)set -e; D='$(DESTDIR)$(PREFIX)'; \
	for f in $(INSTALL_FILES); do rm -f "$$D/$$f"; done; \
	rm -f "$$D"/share/man/man1/kplan.1 "$$D"/share/man/man1/kplan-*.1; \
	for f in python/kplan/*.py; do rm -f "$$D/$(PY_DEST)/kplan/$${f##*/}"; done; \
	rm -rf "$$D/$(PY_DEST)/kplan/__pycache__"; \
	for d in $(PY_DEST)/kplan lib/cmake/kplan include/kplan lib/kplan; do \
		rmdir "$$D/$$d" 2>/dev/null || true; done
	$(Q)$(LDCONFIG)

# libkplanrt exports exactly the functions include/kplan/runtime.h declares
check-exports: $(BUILD)/lib/libkplanrt.so
	@sh scripts/check_exports.sh $(BUILD)/lib/libkplanrt.so include/kplan/runtime.h $(RT_SONAME)

# `make test` installs dpkg-dev and lintian with the other packages (one
# apt-get), for the package check below; a plain build does not need them
test: DEPS_GROUPS += package

# install into a scratch DESTDIR, build and run programs and examples/mlp
# against it, and check `make deb`'s package (scripts/install_test.sh,
# tests/install/). Everything install and deb need is built first, here.
install-test: $(BUILD)/bin/kplan $(RT_REAL) $(BUILD)/lib/libkplanrt.so $(BUILD)/lib/libkplanrt.a \
		$(COLLECTOR_LIB) $(PKG_GEN) $(MAN_STAMP) $(PKG_DIR)/kplan.lintian-overrides $(CALIBRATE_BIN)
	@NVCC='$(NVCC)' CUDA_HOME='$(CUDA_HOME)' sh scripts/install_test.sh '$(MAKE)' $(BUILD) '$(SANITIZER)'

# A Debian package from the tree, PREFIX=/usr, without debhelper:
# packaging/mkdeb.sh strips, adds the copyright file, changelog and lintian
# overrides, takes Depends from dpkg-shlibdeps (libc6, libsqlite3-0, zlib1g:
# libcsv, yajl and libsodium are static, the CUDA libraries found at run
# time) and runs dpkg-deb. DEB_MAINTAINER='Name <address>' sets Maintainer.
# `make deb-check` (part of install-test) checks it with dpkg -c and lintian.
DEB_ARCH := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB := $(BUILD)/kplan_$(KP_VERSION)_$(DEB_ARCH).deb
DEB_ROOT := $(PKG_DIR)/deb

deb: $(DEB)
$(DEB): $(BUILD)/bin/kplan $(RT_REAL) $(BUILD)/lib/libkplanrt.a $(COLLECTOR_LIB) $(PKG_GEN) $(CALIBRATE_BIN) \
		$(MAN_STAMP) $(PKG_DIR)/kplan.lintian-overrides packaging/module.mk packaging/mkdeb.sh \
		packaging/copyright packaging/changelog packaging/kplan.bash-completion \
		include/kplan/runtime.h $(wildcard python/kplan/*.py)
	$(Q)rm -rf $(DEB_ROOT)
	$(Q)$(MAKE) --no-print-directory install PREFIX=/usr DESTDIR=$(abspath $(DEB_ROOT))
	$(quiet) DEB $@
	$(Q)sh packaging/mkdeb.sh $(DEB_ROOT) $@ $(KP_VERSION) $(DEB_ARCH) $(RT_SOVERSION) \
		$(CUDA_LIBDIR) $(PKG_DIR)/kplan.lintian-overrides

deb-check: $(DEB)
	@sh tests/install/deb_check.sh $(BUILD) $(DEB)
