#!/usr/bin/env bash
# Builds ringlog's .deb and .rpm into dist/ (or $OUT): a static binary
# (CGO_ENABLED=0, so that one build runs on any glibc or none), then the
# packages through internal/pkgbuild, the code its test installs with
# dpkg. Install with: dpkg -i dist/ringlog_*.deb (or rpm -i / dnf install).
#
#   scripts/package.sh                 version from git: 0.0.0~git<commit time>.<commit>
#   VERSION=1.2.0 scripts/package.sh   a release
#   GOARCH=arm64 scripts/package.sh    another architecture
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

out=${OUT:-dist}
arch=${GOARCH:-$(go env GOARCH)}
# Debian and RPM both sort ~ before anything, so a snapshot sorts below
# the release it leads to; the commit time orders snapshots.
version=${VERSION:-0.0.0~git$(git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S).$(git rev-parse --short=12 HEAD)}

# Files in the packages carry the commit's time: a commit packages to the
# same bytes (reproducible builds' convention), given the same toolchain.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}

mkdir -p "$out"
bin="$out/ringlog-linux-$arch"
CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -trimpath -o "$bin" ./cmd/ringlog
go run ./cmd/ringlog-package -binary "$bin" -version "$version" -arch "$arch" -out "$out"
