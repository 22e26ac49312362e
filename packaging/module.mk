# packaging/module.mk - make install / uninstall / deb, and what they ship.
#
#   make install [PREFIX=/usr/local] [DESTDIR=]   install the tree below
#   make uninstall [PREFIX=...] [DESTDIR=]        remove exactly those files
#   make deb                                      $(BUILD)/kplan_VERSION_ARCH.deb
#   make install-test                             (part of `make test`)
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

PKG_GEN := $(PKG_DIR)/kplan.pc $(PKG_DIR)/kplanConfig.cmake $(PKG_DIR)/kplanConfigVersion.cmake

.PHONY: install uninstall install-test check-exports deb
# what install puts down, relative to PREFIX (uninstall removes these)
INSTALL_FILES = bin/kplan lib/libkplanrt.so.$(RT_VERSION) lib/libkplanrt.so.$(RT_SOVERSION) \
	lib/libkplanrt.so lib/libkplanrt.a lib/kplan/libkplan_collect.so \
	include/kplan/runtime.h lib/pkgconfig/kplan.pc lib/cmake/kplan/kplanConfig.cmake \
	lib/cmake/kplan/kplanConfigVersion.cmake share/bash-completion/completions/kplan

install: $(BUILD)/bin/kplan $(RT_REAL) $(BUILD)/lib/libkplanrt.so $(BUILD)/lib/libkplanrt.a \
		$(COLLECTOR_LIB) $(PKG_GEN) $(MAN_STAMP)
	$(quiet) INSTALL $(DESTDIR)$(PREFIX)
	$(Q)set -e; D='$(DESTDIR)$(PREFIX)'; \
	install -d "$$D/bin" "$$D/lib/kplan" "$$D/include/kplan" "$$D/lib/pkgconfig" \
		"$$D/lib/cmake/kplan" "$$D/share/bash-completion/completions" \
		"$$D/share/man/man1" "$$D/$(PY_DEST)/kplan"; \
	install -m 755 $(BUILD)/bin/kplan "$$D/bin/kplan"; \
	install -m 755 $(RT_REAL) "$$D/lib/libkplanrt.so.$(RT_VERSION)"; \
	ln -sfn libkplanrt.so.$(RT_VERSION) "$$D/lib/libkplanrt.so.$(RT_SOVERSION)"; \
	ln -sfn libkplanrt.so.$(RT_VERSION) "$$D/lib/libkplanrt.so"; \
	install -m 644 $(BUILD)/lib/libkplanrt.a "$$D/lib/libkplanrt.a"; \
	install -m 755 $(COLLECTOR_LIB) "$$D/lib/kplan/libkplan_collect.so"; \
	install -m 644 include/kplan/runtime.h "$$D/include/kplan/runtime.h"; \
	install -m 644 $(PKG_DIR)/kplan.pc "$$D/lib/pkgconfig/kplan.pc"; \
	install -m 644 $(PKG_DIR)/kplanConfig.cmake $(PKG_DIR)/kplanConfigVersion.cmake "$$D/lib/cmake/kplan/"; \
	install -m 644 packaging/kplan.bash-completion "$$D/share/bash-completion/completions/kplan"; \
	install -m 644 $(MAN_DIR)/*.1 "$$D/share/man/man1/"; \
	install -m 644 python/kplan/*.py "$$D/$(PY_DEST)/kplan/"

uninstall:
	$(quiet) UNINSTALL $(DESTDIR)$(PREFIX)
	$(Q)set -e; D='$(DESTDIR)$(PREFIX)'; \
	for f in $(INSTALL_FILES); do rm -f "$$D/$$f"; done; \
	rm -f "$$D"/share/man/man1/kplan.1 "$$D"/share/man/man1/kplan-*.1; \
	for f in python/kplan/*.py; do rm -f "$$D/$(PY_DEST)/kplan/$${f##*/}"; done; \
	rm -rf "$$D/$(PY_DEST)/kplan/__pycache__"; \
	for d in $(PY_DEST)/kplan lib/cmake/kplan include/kplan lib/kplan; do \
		rmdir "$$D/$$d" 2>/dev/null || true; done

# libkplanrt exports exactly the functions include/kplan/runtime.h declares
check-exports: $(BUILD)/lib/libkplanrt.so
	@sh scripts/check_exports.sh $(BUILD)/lib/libkplanrt.so include/kplan/runtime.h $(RT_SONAME)

# install into a scratch DESTDIR, build and run programs against it
# (scripts/install_test.sh)
install-test: $(BUILD)/bin/kplan $(BUILD)/lib/libkplanrt.so $(COLLECTOR_LIB)
	@sh scripts/install_test.sh '$(MAKE)' $(BUILD) '$(SANITIZER)'

# A Debian package from the tree (dpkg-deb; no debhelper needed). PREFIX=/usr.
DEB_ARCH := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB := $(BUILD)/kplan_$(KP_VERSION)_$(DEB_ARCH).deb
DEB_ROOT := $(PKG_DIR)/deb
# the Debian packages of what build/bin/kplan and the libraries link
# dynamically (ldd): libsqlite3 and zlib; libcsv, yajl, libsodium are static
DEB_DEPENDS := libc6 (>= 2.34), libsqlite3-0, zlib1g

deb: $(DEB)
$(DEB): $(BUILD)/bin/kplan $(RT_REAL) $(BUILD)/lib/libkplanrt.a $(COLLECTOR_LIB) $(PKG_GEN) \
		$(MAN_STAMP) packaging/module.mk
	$(Q)rm -rf $(DEB_ROOT)
	$(Q)$(MAKE) --no-print-directory install PREFIX=/usr DESTDIR=$(abspath $(DEB_ROOT))
	$(Q)gzip -9n $(DEB_ROOT)/usr/share/man/man1/*.1
	@mkdir -p $(DEB_ROOT)/DEBIAN
	$(Q){ echo 'Package: kplan'; echo 'Version: $(KP_VERSION)'; \
	echo 'Architecture: $(DEB_ARCH)'; echo 'Maintainer: kplan developers <kplan@localhost>'; \
	echo 'Section: devel'; echo 'Priority: optional'; \
	echo 'Depends: $(DEB_DEPENDS)'; \
	echo 'Suggests: python3'; \
	echo "Installed-Size: $$(du -sk $(DEB_ROOT)/usr | cut -f1)"; \
	echo 'Description: CUDA kernel-launch profiler and CUDA-graph planner'; \
	echo ' kplan records CUDA workloads, finds where the GPU waits for the CPU to'; \
	echo ' launch work, and writes a plan that runs those regions as CUDA graphs;'; \
	echo ' libkplanrt applies the plan. The CUDA toolkit is found at run time.'; \
	} > $(DEB_ROOT)/DEBIAN/control
	$(Q)printf 'activate-noawait ldconfig\n' > $(DEB_ROOT)/DEBIAN/triggers
	$(quiet) DEB $@
	$(Q)dpkg-deb --root-owner-group -Zxz --build $(DEB_ROOT) $@ >/dev/null
