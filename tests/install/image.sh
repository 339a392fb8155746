#!/usr/bin/env bash
# Build the Phalanx image (localhost/phalanx:<version>) from the repository's Dockerfile with
# docker (when its daemon answers) or podman. Prints the image reference on stdout.
#
#   tests/install/image.sh                 # build; base image: $PHALANX_PYTHON_IMAGE, else the
#                                          # public python image if pullable, else a local one
#   tests/install/image.sh --save FILE     # also write a docker-archive (for ctr / kind load)
#   tests/install/image.sh --oci FILE      # also write an OCI archive (the release's image archive)
#
# Where no image registry is reachable the base is made locally: a Debian root file system
# (debootstrap minbase) with Debian's python3, imported as localhost/phalanx-base:<suite>-<date>
# and passed through the Dockerfile's PYTHON_IMAGE build argument. The root file system tarball is
# cached outside the repository (${PHALANX_CACHE:-~/.cache/phalanx}/images), keyed by suite and day.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO/pyproject.toml" | head -n1)
IMAGE="${PHALANX_IMAGE:-localhost/phalanx:$VERSION}"
PUBLIC_BASE="python:3.11-slim"
SUITE="${PHALANX_BASE_SUITE:-bookworm}"
MIRROR="${PHALANX_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CACHE="${PHALANX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/phalanx}"
SAVE=""; OCI=""
[ "${1:-}" = "--save" ] && SAVE="${2:?--save needs a file}"
[ "${1:-}" = "--oci" ] && OCI="${2:?--oci needs a file}"

say() { printf '[image %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# docker when its daemon answers, else podman. This machine's podman needs runc (crun refuses
# hybrid cgroups) and limits no higher than the ones it may set.
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  ENGINE=(docker); BUILD_LIMITS=()
elif command -v podman >/dev/null; then
  ENGINE=(podman)
  command -v runc >/dev/null && ENGINE+=(--runtime "$(command -v runc)")
  BUILD_LIMITS=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
else
  die "neither a working docker nor podman found (Debian: apt-get install podman runc)"
fi

image_exists() { "${ENGINE[@]}" image inspect "$1" >/dev/null 2>&1; }

local_base() {
  local day tag rootfs
  day=$(date -u +%Y%m%d)
  tag="localhost/phalanx-base:$SUITE-$day"
  if image_exists "$tag"; then echo "$tag"; return; fi
  rootfs="$CACHE/images/debian-$SUITE-python3-$day.tar"
  # One debootstrap at a time per cache: builds from several checkouts share the root file system.
  mkdir -p "$CACHE/images"
  exec 9>"$CACHE/images/.lock"
  flock 9
  if [ ! -f "$rootfs" ]; then
    command -v debootstrap >/dev/null || die "no registry reachable and no debootstrap to make a base image (apt-get install debootstrap)"
    [ "$(id -u)" = 0 ] || die "making the local base image with debootstrap needs root"
    # A directory of its own: a build from another checkout (an older copy of this script) may
    # remove the shared one while this one runs.
    local dir
    dir=$(mktemp -d "$CACHE/images/rootfs-$SUITE-$day.XXXXXX")
    say "making base image $tag with debootstrap ($SUITE minbase + python3; ~2-4 minutes)"
    nice -n 10 debootstrap --variant=minbase \
      --include=python3,python3-venv,python3-pip,python-is-python3,ca-certificates \
      "$SUITE" "$dir" "$MIRROR" >"$dir.log" 2>&1 \
      || { tail -n 20 "$dir.log" >&2; rm -rf "$dir"; die "debootstrap failed (log: $dir.log)"; }
    # pip in the build stage must trust what the host trusts (a proxy's CA, for instance).
    cp /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/certs/ca-certificates.crt"
    # The public python image's pip is not "externally managed"; match it for the build stage.
    rm -f "$dir"/usr/lib/python3*/EXTERNALLY-MANAGED
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    tar -C "$dir" -cf "$dir.tar" . && mv "$dir.tar" "$rootfs"
    rm -rf "$dir" "$dir.log"
  fi
  flock -u 9
  "${ENGINE[@]}" import --change 'CMD ["python3"]' --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
    "$rootfs" "$tag" >/dev/null
  echo "$tag"
}

pick_base() {
  if [ -n "${PHALANX_PYTHON_IMAGE:-}" ]; then echo "$PHALANX_PYTHON_IMAGE"; return; fi
  if image_exists "$PUBLIC_BASE" || timeout 30 "${ENGINE[@]}" pull -q "$PUBLIC_BASE" >/dev/null 2>&1; then
    echo "$PUBLIC_BASE"; return
  fi
  say "cannot pull $PUBLIC_BASE (no registry reachable); using a locally made base image"
  local_base
}

start=$(date +%s)
base=$(pick_base)
say "building $IMAGE from $base with ${ENGINE[0]}"
"${ENGINE[@]}" build "${BUILD_LIMITS[@]}" --build-arg "PYTHON_IMAGE=$base" -t "$IMAGE" "$REPO" >&2 \
  || die "image build failed"
if [ -n "$SAVE" ]; then
  mkdir -p "$(dirname "$SAVE")"
  rm -f "$SAVE"  # podman refuses to add to an existing docker-archive
  if [ "${ENGINE[0]}" = podman ]; then
    "${ENGINE[@]}" save --format docker-archive -o "$SAVE" "$IMAGE" >&2
  else
    "${ENGINE[@]}" save -o "$SAVE" "$IMAGE" >&2
  fi
fi
if [ -n "$OCI" ]; then
  mkdir -p "$(dirname "$OCI")"
  rm -f "$OCI"
  if [ "${ENGINE[0]}" = podman ]; then
    "${ENGINE[@]}" save --format oci-archive -o "$OCI" "$IMAGE" >&2
  else  # docker >= 25 writes an OCI image layout (index.json, oci-layout) in its archive
    "${ENGINE[@]}" save -o "$OCI" "$IMAGE" >&2
  fi
fi
say "built $IMAGE in $(( $(date +%s) - start ))s"
echo "$IMAGE"
