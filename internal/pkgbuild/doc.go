// Package pkgbuild makes ringlog's Linux packages, a .deb and an .rpm,
// with goreleaser's nfpm used as a library: the same code runs under
// scripts/package.sh (through cmd/ringlog-package) and under this
// package's test, which installs the .deb it built with dpkg, runs the
// installed broker as the unit would and removes it again.
//
// What a package installs (the files are embedded from files/):
//
//	/usr/bin/ringlog                     the broker, built by the caller
//	/etc/ringlog/server.properties       conffile: kept on upgrade and remove
//	/lib/systemd/system/ringlog.service  (deb; /usr/lib/... in the rpm)
//
// and what its scripts do: postinstall makes the ringlog system user and
// group and /var/lib/ringlog (ringlog:ringlog, 0750) when missing, and
// reloads systemd; preremove stops and disables the service when the
// package is removed (not when it is upgraded); postremove reloads
// systemd. Nothing enables or starts the service: an operator sets
// node.id, listeners and the quorum first.
//
// Non-obvious invariants:
//   - The data directory is made by a script, never shipped: a directory
//     in a package belongs to it, and dpkg and rpm remove it with the
//     package (when empty; with a warning when not). Neither remove nor
//     purge deletes the data or the user.
//   - The packages are zstd-compressed: dpkg reads that from 1.21.18
//     (Debian 12) and rpm from 4.14; with gzip -9 the test's two
//     packages of the 47 MB binary took 51 s at a load of 11, 6 s with
//     zstd.
//   - The maintainer scripts serve both formats: dpkg passes a word
//     (configure, remove, upgrade, purge), rpm a count of the instances
//     left (0 on erase), so every script is idempotent and branches on
//     both spellings.
//   - nfpm's PrepareForPackager rewrites an Info's contents for one
//     format: every format gets an Info of its own.
package pkgbuild
