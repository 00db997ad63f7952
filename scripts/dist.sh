#!/usr/bin/env bash
# Builds pgsprint's release files into OUT_DIR (default dist/; make dist):
#
#   pgsprint_VERSION_linux_amd64.tar.gz  the binary, its man pages and
#                                        completions, README.md and the
#                                        guide (docs/guide/*.md, where
#                                        README's links find it)
#   pgsprint_DEBVERSION_amd64.deb        /usr/bin/pgsprint, the man pages in
#                                        /usr/share/man/man1, bash, zsh and
#                                        fish completions, README.md and the
#                                        guide in /usr/share/doc/pgsprint
#                                        (guide/*.md), the license in
#                                        /usr/share/doc/pgsprint/copyright;
#                                        Depends: postgresql-client
#   SHA256SUMS                           of both
#
#   scripts/dist.sh [OUT_DIR]
#
# VERSION is scripts/version.sh's (git describe --tags, or $VERSION); the
# .deb's version is the same with + and . for Debian's ordering
# (1.2.0-5-gabc: 1.2.0+5.gabc, after 1.2.0). The binary is static (cgo
# with libzstd and libc linked in, pure Go DNS and user lookups), so that
# it runs on any x86-64 Linux and the .deb depends on no libc.
#
# $PGSPRINT_DIST_BINARY packs that binary instead of building one (the
# package test's, which built its own); $PGSPRINT_DIST_GZIP is the gzip
# level of the tarball and the .deb (default 9; the test's 1);
# $PGSPRINT_DIST_LICENSE is the license file the .deb's copyright is made
# from (default LICENSE: Debian policy asks every package for one; a
# named file that is missing is refused, and a tree without LICENSE gets
# a copyright file saying that no license has been published);
# $SOURCE_DATE_EPOCH fixes the build date. arm64 is not built: the cgo
# libzstd needs an aarch64 C cross-compiler, which this machine lacks
# (CGO_ENABLED=1 GOARCH=arm64 fails in runtime/cgo's assembly), and a pure
# Go arm64 binary could not be run here to test it.
set -euo pipefail

cd "$(dirname "$0")/.."
out="${1:-dist}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
level="${PGSPRINT_DIST_GZIP:-9}"

for tool in dpkg-deb sha256sum tar gzip; do
  command -v "$tool" >/dev/null || { echo "dist: $tool not found" >&2; exit 1; }
done

license="${PGSPRINT_DIST_LICENSE:-LICENSE}"
if [ ! -s "$license" ]; then
  if [ -n "${PGSPRINT_DIST_LICENSE:-}" ]; then
    echo "dist: no license file $license: the .deb must carry the project's license in /usr/share/doc/pgsprint/copyright; add LICENSE (or give \$PGSPRINT_DIST_LICENSE)" >&2
    exit 1
  fi
  # The tree has no LICENSE yet: the copyright file says so plainly
  # rather than the build inventing one.
  echo "dist: warning: no LICENSE in the tree: the .deb's copyright file says that no license has been published" >&2
  license=""
fi

version="$(scripts/version.sh)"
case "$version" in
  [0-9]*) ;;
  *) echo "dist: version $version does not start with a digit" >&2; exit 1 ;;
esac
debversion="$(printf '%s' "$version" | sed -e 's/-/+/' -e 's/-/./g')"
commit="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
  date="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
else
  date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
fi

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
arch=amd64
bin="$stage/pgsprint"
if [ -n "${PGSPRINT_DIST_BINARY:-}" ]; then
  cp "$PGSPRINT_DIST_BINARY" "$bin"
else
  ldflags="-s -w -X main.version=$version -X main.commit=$commit -X main.buildDate=$date -linkmode external -extldflags -static"
  CGO_ENABLED=1 GOOS=linux GOARCH="$arch" go build -tags osusergo,netgo -trimpath -ldflags "$ldflags" -o "$bin" ./cmd/pgsprint
  if ldd "$bin" >/dev/null 2>&1; then
    echo "dist: $bin is not static" >&2
    exit 1
  fi
fi
"$bin" gen-docs "$stage/docs"

# The tarball: pgsprint_VERSION_linux_amd64/{pgsprint,README.md,docs/guide,man/man1,completions}.
name="pgsprint_${version}_linux_${arch}"
mkdir -p "$stage/$name/docs/guide"
cp "$bin" README.md "$stage/$name/"
cp docs/guide/*.md "$stage/$name/docs/guide/"
cp -r "$stage/docs/man" "$stage/docs/completions" "$stage/$name/"
tar -C "$stage" --owner=0 --group=0 --numeric-owner --sort=name -cf - "$name" | gzip "-${level}n" > "$out/$name.tar.gz"

# The .deb.
root="$stage/deb"
install -D -m 755 "$bin" "$root/usr/bin/pgsprint"
mkdir -p "$root/usr/share/man/man1"
for page in "$stage"/docs/man/man1/*.1; do
  gzip -9n < "$page" > "$root/usr/share/man/man1/$(basename "$page").gz"
done
install -D -m 644 "$stage/docs/completions/pgsprint.bash" "$root/usr/share/bash-completion/completions/pgsprint"
install -D -m 644 "$stage/docs/completions/_pgsprint" "$root/usr/share/zsh/vendor-completions/_pgsprint"
install -D -m 644 "$stage/docs/completions/pgsprint.fish" "$root/usr/share/fish/vendor_completions.d/pgsprint.fish"
install -D -m 644 README.md "$root/usr/share/doc/pgsprint/README.md"
for page in docs/guide/*.md; do
  install -D -m 644 "$page" "$root/usr/share/doc/pgsprint/guide/$(basename "$page")"
done
# Debian policy's copyright file (free-form): where it comes from, then
# the project's license as it is.
{
  printf 'pgsprint, from https://github.com/pgsprint/pgsprint\n\n'
  if [ -n "$license" ]; then
    cat "$license"
  else
    printf 'Copyright: the pgsprint developers.\nLicense: none published yet: this build carries no license grant.\n'
  fi
} > "$root/usr/share/doc/pgsprint/copyright"
chmod 644 "$root/usr/share/doc/pgsprint/copyright"
mkdir -p "$root/DEBIAN"
size="$(du -sk --exclude=DEBIAN "$root" | cut -f1)"
cat > "$root/DEBIAN/control" <<CONTROL
Package: pgsprint
Version: $debversion
Architecture: $arch
Maintainer: pgsprint developers <pgsprint@users.noreply.github.com>
Installed-Size: $size
Depends: postgresql-client
Section: database
Priority: optional
Homepage: https://github.com/pgsprint/pgsprint
Description: fast, safe, parallel dump and restore of PostgreSQL databases
 pgsprint dumps a database into one archive from one snapshot with N
 workers, and restores, clones and verifies it in parallel; pg_dump and
 pg_restore (from postgresql-client) handle the schema.
CONTROL
deb="$out/pgsprint_${debversion}_${arch}.deb"
if command -v fakeroot >/dev/null; then
  fakeroot dpkg-deb -Zgzip "-z$level" --build "$root" "$deb" >/dev/null
else
  dpkg-deb -Zgzip "-z$level" --root-owner-group --build "$root" "$deb" >/dev/null
fi

(cd "$out" && sha256sum "$name.tar.gz" "$(basename "$deb")" > SHA256SUMS)
echo "dist: $out/$name.tar.gz"
echo "dist: $deb"
echo "dist: $out/SHA256SUMS"
