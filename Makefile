# dat2: build, test and install libdat2.so.2.
#
#   make            build build/libdat2.so.2.0.0 (+ links libdat2.so.2, libdat2.so),
#                   build/libdat2prov.so.2 and build/dat2-info
#   make plugin     build/libdat2prov.so.2 only: the built-in providers as a DAT provider
#                   library for another libdat2 (Debian's) to load through dat.conf
#   make run        the main job (see README)
#   make test       the quick loop: lint, cargo test and the C groups that need neither root,
#                   the VM nor Debian's packages, plain pass (GROUPS="dataxfer hostile" narrows
#                   it; see docs/testing.md)
#   make check      the whole test suite
#   make check-vm   the tests on real verbs in a qemu VM with Soft-RoCE (tests/vm)
#   make bench-vm   benchmarks on Soft-RoCE in the test VM (see bench/vm/run.sh)
#   make install    PREFIX=/usr/local LIBDIR=$(PREFIX)/lib DESTDIR=
#   make uninstall
#   make deb        build/libdat2-2_*.deb, build/libdat2-dev_*.deb, build/dat2-utils_*.deb:
#                   Debian packages in place of libdapl2 and libdapl-dev (tools/make-deb)
PREFIX     ?= /usr/local
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
BINDIR     ?= $(PREFIX)/bin
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DESTDIR    ?=

CARGO  ?= cargo
BUILD  := build
SONAME := libdat2.so.2
REAL   := libdat2.so.2.0.0
PLUGIN := libdat2prov.so.2
VERSION := 2.0.0
HEADERS := $(wildcard include/dat2/*.h)
MAN1   := $(wildcard man/man1/*.1)
MAN3   := $(wildcard man/man3/*.3)
MAN5   := $(wildcard man/man5/*.5)
MAN7   := $(wildcard man/man7/*.7)
MANS   := $(MAN1) $(MAN3) $(MAN5) $(MAN7)

# dat2-info, the command installed with the library (C, public DAT API only).
CC     ?= cc
CFLAGS ?= -O2 -g -Wall -Wextra
INFO   := $(BUILD)/dat2-info
INFO_SRC := $(wildcard tools/dat2-info*.c)

# Debian packages the targets need. deps installs the missing ones when run as root,
# and prints the exact command otherwise.
DEB_BUILD :=
DEB_CHECK := pkg-config groff-base libdapl2 libdapl-dev dapl2-utils iproute2 strace g++ dpkg-dev lintian man-db

.PHONY: all lib plugin tools run test check check-host check-vm check-symbols lint lint-man install uninstall clean deps-build deps-check deb

all: lib plugin tools

lib: $(BUILD)/$(REAL)

$(BUILD)/$(REAL): FORCE
	$(CARGO) build --release --locked --lib
	@mkdir -p $(BUILD)
	cp -f target/release/libdat2.so $(BUILD)/$(REAL).tmp && mv -f $(BUILD)/$(REAL).tmp $(BUILD)/$(REAL)
	ln -sf $(REAL) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $(BUILD)/libdat2.so

# The same crate with the feature "plugin" (src/plugin.rs), in a target directory of its own so
# that it never replaces the library's target/release/libdat2.so.
plugin: $(BUILD)/$(PLUGIN)

$(BUILD)/$(PLUGIN): FORCE
	$(CARGO) build --release --locked --lib --features plugin --target-dir target/plugin
	@mkdir -p $(BUILD)
	cp -f target/plugin/release/libdat2.so $(BUILD)/$(PLUGIN).tmp && mv -f $(BUILD)/$(PLUGIN).tmp $(BUILD)/$(PLUGIN)

FORCE:

tools: $(INFO)

# Order-only on the library: relinking is not needed when only the library changes.
$(INFO): $(INFO_SRC) tools/dat2-info.h $(HEADERS) | $(BUILD)/$(REAL)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Iinclude -o $@ $(INFO_SRC) $(LDFLAGS) -L$(BUILD) -ldat2

deps-build:
	@tools/ensure-debs $(DEB_BUILD)

deps-check:
	@tools/ensure-debs $(DEB_CHECK)

run: deps-build lib
	@tools/run-main $(BUILD)

# Performance of the soft device against UCX, iperf3 and memcpy measured in the same run
# (informational: a target missed is reported, not failed). See bench/run.sh.
.PHONY: bench
bench: lib
	bench/run.sh

# Benchmarks on real verbs inside the Soft-RoCE VM (tests/vm): registration cost against raw
# verbs and Debian's dapl, dapltest -T P against Debian's dapl and perftest as the limit,
# user-space instructions per data-path operation against Debian's dapl (callgrind);
# ratios from one VM run, interleaved rounds, medians (informational: a target missed is
# reported, not failed). Its time follows the host's load (printed first): at a load average
# of 15-20 one data-path round took 190-260 s and the instruction counts 5 minutes, so the
# VM gets an hour. tests/vm/run.sh prepares the VM (qemu, kernel, perftest). See
# bench/vm/run.sh.
DEB_BENCH_VM := libibverbs-dev perftest dapl2-utils libdapl2 valgrind
# The peers beside dat2's registration cache (bench/vm/reg_peer.h): libfabric 1.17, UCX 1.13.
DEB_BENCH_VM_PEERS := libfabric1 libfabric-dev libucx0 libucx-dev ucx-utils
BENCH_VM_REG := $(BUILD)/bench-vm/reg
BENCH_VM_OPS := $(BUILD)/bench-vm/ops
BENCH_VM_PEERS := $(BUILD)/bench-vm/reg-fi $(BUILD)/bench-vm/reg-ucx

.PHONY: bench-vm
bench-vm: lib $(BENCH_VM_REG) $(BENCH_VM_OPS) $(BENCH_VM_PEERS)
	@tools/ensure-debs $(DEB_BENCH_VM) $(DEB_BENCH_VM_PEERS)
	@echo "bench-vm: host load average $$(cut -d' ' -f1-3 /proc/loadavg) (the VM shares the host's CPUs:" \
	  "compare runs made at a similar load)"
	DAT2_VM_TIMEOUT=$${DAT2_VM_TIMEOUT:-3600} tests/vm/run.sh bench/vm/run.sh

$(BENCH_VM_REG): bench/vm/reg.c $(HEADERS) | $(BUILD)/$(REAL)
	@tools/ensure-debs libibverbs-dev
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -Wall -Wextra -Iinclude -o $@ bench/vm/reg.c -L$(BUILD) -ldat2 -libverbs

# reg with a peer's backend: -rdynamic exports its counting ibv_reg_mr/ibv_dereg_mr.
$(BUILD)/bench-vm/reg-fi $(BUILD)/bench-vm/reg-ucx: $(BUILD)/bench-vm/reg-%: bench/vm/reg.c bench/vm/reg_peer.h $(HEADERS) | $(BUILD)/$(REAL)
	@tools/ensure-debs libibverbs-dev $(DEB_BENCH_VM_PEERS)
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -Wall -Wextra -Iinclude -DREG_PEER_$(if $(filter fi,$*),FI,UCX) -rdynamic -o $@ bench/vm/reg.c \
	  -L$(BUILD) -ldat2 -libverbs $(if $(filter fi,$*),-lfabric,-lucp -lucs) -ldl

# Counts instructions under callgrind: its client requests come from valgrind's header.
$(BENCH_VM_OPS): bench/vm/ops.c $(HEADERS) | $(BUILD)/$(REAL)
	@tools/ensure-debs valgrind
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -Wall -Wextra -Iinclude -o $@ bench/vm/ops.c -L$(BUILD) -ldat2 -lpthread

# The quick loop for contributors (docs/testing.md): no root, no VM, no Debian package built or
# installed. The style gates, cargo test, then the C groups of TEST_GROUPS in the plain pass
# only; GROUPS="dataxfer hostile" runs those instead. The groups are the ones that need none of
# Debian's libdapl2/libdapl-dev/dapl2-utils, the plugin build or `make deb`, and take under
# half a minute each, measured alone in a plain pass (2 cores): memory 2.4 s, seeds 0.3,
# info 0.7, example 0.7, ud 4.9, hidelibs 0.6, secure 0.9, dataxfer 15, afterfree 29,
# hostile 19 (hidelibs, secure and part of hostile need root and skip without it; ud and
# hostile use a network namespace as root). Left out: install (builds the plugin: a minute
# cold), fuzz (an instrumented build of the crate, then 65 s of fuzzing) and the groups that
# need Debian's packages. The whole target: 1.3-1.6 min with the builds up to date, 3.6 min from a
# clean tree.
TEST_GROUPS := memory seeds info example ud hidelibs secure dataxfer afterfree hostile
GROUPS ?= $(TEST_GROUPS)

test: lint lib tools
	$(CARGO) test --release --locked --quiet
	DAT2_TEST_PASSES=plain DAT2_TEST_GROUPS="$(GROUPS)" c-tests/run-all.sh

# The whole test suite: the host's tests, then the VM's; ends with the sum of both.
check:
	tools/check-all

# The tests that run on this host (no VM): the style gates, cargo test and the C suite (whose
# group deb installs the packages of `make deb` in an overlay of /).
check-host: deps-check lint lib plugin tools check-symbols lint-man deb
	$(CARGO) test --release --locked --quiet
	c-tests/run-all.sh

# Inside a qemu VM with Soft-RoCE (tests/vm): Debian's programs on real verbs through
# Debian's libdat2 and through ours with Debian's provider, and through our own verbs IA,
# side by side; then the C suite on our verbs IA. Ends with "vm: N passed, N failed, N
# skipped". tests/vm/prepare.sh (run by run.sh) installs qemu and fetches the kernel.
check-vm: deps-check lib plugin
	tests/vm/check.sh

# The exported symbol sets: exactly the names in dat2.map, each @@DAT_2.0 with its man page
# in man/man3 (NAME.3), and the soname; the provider library's, exactly dat2prov.map's two
# (no dat_* API function).
check-symbols: lib plugin
	tools/check-symbols $(BUILD)/$(REAL) src/dat2.map $(SONAME) man/man3
	tools/check-symbols $(BUILD)/$(PLUGIN) src/dat2prov.map $(PLUGIN)

# Style gates: rustfmt (rustfmt.toml), clippy with warnings denied ([lints] in Cargo.toml), and
# the module graph docs/architecture.md's Layout states (tools/check-layers).
# rustup's default profile has both; a toolchain without them gets them from rustup.
lint:
	@$(CARGO) fmt --version >/dev/null 2>&1 && $(CARGO) clippy --version >/dev/null 2>&1 || \
	  rustup component add rustfmt clippy
	$(CARGO) fmt --check
	$(CARGO) fmt --check --manifest-path fuzz/Cargo.toml
	$(CARGO) clippy --release --locked --all-targets --quiet -- -D warnings
	$(CARGO) clippy --release --locked --lib --features plugin --target-dir target/plugin --quiet -- -D warnings
	tools/check-layers

lint-man:
	@for f in $(MANS); do \
	  out=$$(LC_ALL=C.UTF-8 groff -I man -man -ww -z $$f 2>&1); \
	  if [ -n "$$out" ]; then echo "$$f: $$out"; exit 1; fi; \
	done; echo "man pages: $(words $(MANS)) linted"

install: lib plugin tools
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR)/dat2 $(DESTDIR)$(PKGCONFIGDIR) \
	  $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man7
	install -m 0755 $(INFO) $(DESTDIR)$(BINDIR)/dat2-info
	install -m 0755 $(BUILD)/$(REAL) $(DESTDIR)$(LIBDIR)/$(REAL)
	ln -sf $(REAL) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libdat2.so
	install -m 0755 $(BUILD)/$(PLUGIN) $(DESTDIR)$(LIBDIR)/$(PLUGIN)
	install -m 0644 $(HEADERS) $(DESTDIR)$(INCLUDEDIR)/dat2/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	  -e 's|@VERSION@|$(VERSION)|' pkgconfig/dat2.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/dat2.pc
	chmod 0644 $(DESTDIR)$(PKGCONFIGDIR)/dat2.pc
	$(if $(MAN1),install -m 0644 $(MAN1) $(DESTDIR)$(MANDIR)/man1/)
	$(if $(MAN3),install -m 0644 $(MAN3) $(DESTDIR)$(MANDIR)/man3/)
	$(if $(MAN5),install -m 0644 $(MAN5) $(DESTDIR)$(MANDIR)/man5/)
	$(if $(MAN7),install -m 0644 $(MAN7) $(DESTDIR)$(MANDIR)/man7/)

# The Debian packages (tools/make-deb, packaging/deb/): `make install` into a staging tree with
# Debian's paths and build flags, split into three packages built with dpkg-deb.
DEB_DEB := dpkg-dev
DEB_STAGE := $(BUILD)/deb/stage

deb: lib
	@tools/ensure-debs $(DEB_DEB)
	rm -rf $(BUILD)/deb
	mkdir -p $(BUILD)/deb
	$(MAKE) --no-print-directory install DESTDIR=$(CURDIR)/$(DEB_STAGE) PREFIX=/usr \
	  LIBDIR=/usr/lib/$$(dpkg-architecture -qDEB_HOST_MULTIARCH) INFO=$(BUILD)/deb/dat2-info \
	  CFLAGS="$$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get CFLAGS) -Wall -Wextra" \
	  CPPFLAGS="$$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get CPPFLAGS)" \
	  LDFLAGS="$$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get LDFLAGS)"
	tools/make-deb $(BUILD) $(VERSION)

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/dat2-info
	rm -f $(DESTDIR)$(LIBDIR)/$(REAL) $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libdat2.so
	rm -f $(DESTDIR)$(LIBDIR)/$(PLUGIN)
	rm -f $(addprefix $(DESTDIR)$(INCLUDEDIR)/dat2/,$(notdir $(HEADERS)))
	-rmdir $(DESTDIR)$(INCLUDEDIR)/dat2 2>/dev/null
	rm -f $(DESTDIR)$(PKGCONFIGDIR)/dat2.pc
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(MAN1)))
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man3/,$(notdir $(MAN3))) $(addprefix $(DESTDIR)$(MANDIR)/man5/,$(notdir $(MAN5)))
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man7/,$(notdir $(MAN7)))

clean:
	$(CARGO) clean
	rm -rf $(BUILD)
