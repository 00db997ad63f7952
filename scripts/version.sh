#!/usr/bin/env bash
# Prints pgsprint's version for a build: $VERSION if set, else `git
# describe --tags` of a v1.2.3 tag without its v (1.2.3, 1.2.3-5-gHASH,
# -dirty for a changed tree), else 0.0.0-COUNT-gHASH[-dirty] before the
# first tag. Used by make build and make dist (scripts/dist.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${VERSION:-}" ]; then
  echo "$VERSION"
elif v="$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null)"; then
  echo "${v#v}"
elif git rev-parse HEAD >/dev/null 2>&1; then
  v="0.0.0-$(git rev-list --count HEAD)-g$(git rev-parse --short HEAD)"
  if [ -n "$(git status --porcelain 2>/dev/null)" ]; then v="$v-dirty"; fi
  echo "$v"
else
  echo "0.0.0-dev"
fi
