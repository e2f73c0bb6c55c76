#!/usr/bin/env bash
# tools/docker-engine.sh — the container engine and the offline base image
# that `make test-docker` builds on (mk/docker.mk).
#
#   tools/docker-engine.sh engine   start dockerd if no engine answers
#                                   (installs Debian's docker.io when missing)
#   tools/docker-engine.sh base     make the base image $OD_BASE_IMAGE once:
#                                   debootstrap --variant=minbase bookworm from
#                                   Debian's mirror, then `docker import`; the
#                                   rootfs tarball is cached in .setup/
#   tools/docker-engine.sh check    exit 0 when an engine answers, else say why
#
# No container registry is reachable from the test machines, so the official
# debian:bookworm-slim (the Dockerfile's default base) cannot be pulled there;
# the imported minbase image stands in for it, passed as the BASE build arg.
# dockerd started here is left running (its pid in .setup/dockerd.pid, its log
# in .setup/dockerd.log); stop it with `kill "$(cat .setup/dockerd.pid)"`.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE_IMAGE=${OD_BASE_IMAGE:-opdispatch-base:bookworm-minbase}
MIRROR=${OD_DEBIAN_MIRROR:-$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
mkdir -p .setup

engine_up() { timeout 20 docker info >/dev/null 2>&1; }

case "${1:-}" in
check)
  if engine_up; then exit 0; fi
  echo "no container engine answers: $(timeout 20 docker info 2>&1 | grep -m1 -iE 'error|cannot|denied' || echo 'docker not installed')"
  exit 1 ;;
engine)
  engine_up && exit 0
  command -v dockerd >/dev/null || bash tools/setup-debs.sh docker.io
  echo "docker-engine: starting dockerd (log: .setup/dockerd.log)"
  $SUDO bash -c 'nohup dockerd >.setup/dockerd.log 2>&1 & echo $! >.setup/dockerd.pid'
  for _ in $(seq 60); do engine_up && exit 0; sleep 1; done
  echo "docker-engine: dockerd did not come up in 60 s; the end of its log:" >&2
  tail -20 .setup/dockerd.log >&2
  exit 1 ;;
base)
  if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then exit 0; fi
  tarball=.setup/bookworm-minbase.tar
  if [ ! -s "$tarball" ]; then
    command -v debootstrap >/dev/null || bash tools/setup-debs.sh debootstrap
    root=$(mktemp -d /tmp/od-rootfs.XXXXXX)
    echo "docker-engine: debootstrap --variant=minbase bookworm from $MIRROR (about 30 s)"
    $SUDO debootstrap --variant=minbase bookworm "$root" "$MIRROR" >.setup/debootstrap.log 2>&1 ||
      { tail -20 .setup/debootstrap.log >&2; exit 1; }
    # the image's apt uses the same mirror, as `docker build --network host` will
    echo "deb $MIRROR bookworm main" | $SUDO tee "$root/etc/apt/sources.list" >/dev/null
    $SUDO rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    $SUDO tar -C "$root" -c . >"$tarball.tmp" && mv "$tarball.tmp" "$tarball"
    $SUDO rm -rf "$root"
  fi
  docker import "$tarball" "$BASE_IMAGE" >/dev/null
  echo "docker-engine: base image $BASE_IMAGE imported from $tarball" ;;
*)
  echo "usage: $0 engine|base|check" >&2; exit 2 ;;
esac
