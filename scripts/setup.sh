#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Prepares a Debian 12 machine to build and run vqswitch. Idempotent: safe to run again.
#  1. installs the Debian packages the build and tests need;
#  2. extracts the DPDK driver-SDK headers (not shipped in libdpdk-dev) from Debian's own dpdk
#     source package of exactly the installed version, into $VQS_SDK_DIR (outside git);
#  3. reserves hugepages and mounts hugetlbfs, removing files left by killed DPDK processes.
set -euo pipefail

readonly kPackages=(dpdk dpdk-dev libdpdk-dev libnuma-dev libyaml-cpp-dev nlohmann-json3-dev catch2 meson ninja-build iputils-ping
                    pkg-config g++ clang-format dpkg-dev iproute2 procps ethtool
                    clang-14 libclang-rt-14-dev  # the fuzz harnesses (libFuzzer)
                    qemu-system-x86 busybox-static)  # Linux test guests (scripts/guest/build.sh)
readonly kSdkHeaders=(lib/ethdev/ethdev_driver.h lib/ethdev/ethdev_vdev.h
                      drivers/bus/vdev/bus_vdev_driver.h lib/eal/include/dev_driver.h
                      lib/eal/include/bus_driver.h)
# 2 MiB pages: 2 GiB. The largest test needs ~0.8 GiB (a switch and four QEMU guests); the rest
# is headroom for what a killed process left behind.
readonly kHugepagesMin=1024

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sdk_dir=${VQS_SDK_DIR:-/var/cache/vqswitch/dpdk-sdk}

log() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (installs packages, reserves hugepages); try: sudo $0"

install_packages() {
  local missing=()
  for p in "${kPackages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep 'install ok installed' >/dev/null || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && { log "packages present"; return; }
  log "installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Debian's dpdk source package of the installed libdpdk-dev version, fetched through a private
# deb-src list so that the system's apt configuration is left untouched.
extract_sdk_headers() {
  local version stamp work
  version=$(dpkg-query -W -f='${Version}' libdpdk-dev)
  stamp="$sdk_dir/.version"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$version" ]; then
    log "driver-SDK headers for dpdk $version present in $sdk_dir"
    return
  fi
  work=$(mktemp -d /var/tmp/vqs-dpdk-src.XXXXXX)
  trap 'rm -rf "$work"' RETURN
  mkdir -p "$work/lists/partial" "$work/archives/partial"
  local suites="bookworm bookworm-updates"
  {
    for s in $suites; do echo "deb-src http://deb.debian.org/debian $s main"; done
    echo "deb-src http://deb.debian.org/debian-security bookworm-security main"
  } >"$work/sources.list"
  local apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
                  -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::Archives=$work/archives"
                  -o "APT::Get::List-Cleanup=0" -o "APT::Sandbox::User=root")
  log "fetching Debian source package dpdk=$version"
  apt-get "${apt_opts[@]}" update -qq >/dev/null
  (cd "$work" && apt-get "${apt_opts[@]}" source --download-only -qq "dpdk=$version" >/dev/null) ||
    die "Debian's archive has no dpdk source of version $version (installed libdpdk-dev);" \
        "run 'apt-get install --only-upgrade libdpdk-dev dpdk dpdk-dev' so both match, then retry"
  local orig debian_tar
  orig=$(ls "$work"/dpdk_*.orig.tar.* | head -n 1)
  debian_tar=$(ls "$work"/dpdk_*.debian.tar.* 2>/dev/null | head -n 1 || true)
  mkdir -p "$work/src"
  tar -xf "$orig" -C "$work/src" --strip-components=1
  # Debian's patches may touch these headers: apply them so we match the binaries exactly.
  if [ -n "$debian_tar" ]; then
    tar -xf "$debian_tar" -C "$work/src"
    if [ -s "$work/src/debian/patches/series" ]; then
      (cd "$work/src" && while read -r p _; do
         case "$p" in ''|'#'*) continue ;; esac
         patch -s -p1 -N <"debian/patches/$p" >/dev/null || true
       done <debian/patches/series)
    fi
  fi
  local src_version
  src_version=$(cat "$work/src/VERSION")
  case "$version" in
    "$src_version"*) ;;
    *) die "source package VERSION $src_version does not match installed libdpdk-dev $version" ;;
  esac
  rm -rf "$sdk_dir"
  mkdir -p "$sdk_dir"
  for h in "${kSdkHeaders[@]}"; do
    [ -f "$work/src/$h" ] || die "dpdk $version source lacks $h"
    install -m 0644 "$work/src/$h" "$sdk_dir/"
  done
  echo "$version" >"$stamp"
  log "driver-SDK headers for dpdk $version extracted to $sdk_dir"
}

reserve_hugepages() {
  local nr_file=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
  [ -w "$nr_file" ] || nr_file=/proc/sys/vm/nr_hugepages
  local have
  have=$(cat "$nr_file")
  if [ "$have" -lt "$kHugepagesMin" ]; then
    echo "$kHugepagesMin" >"$nr_file" || true
    have=$(cat "$nr_file")
  fi
  [ "$have" -ge "$kHugepagesMin" ] ||
    log "warning: only $have 2 MiB hugepages could be reserved (want $kHugepagesMin); interop tests may fail"
  mkdir -p /dev/hugepages
  mountpoint -q /dev/hugepages || mount -t hugetlbfs nodev /dev/hugepages
  # Files left by DPDK processes that are gone (a killed run): keep only what a live process maps
  # (hugepage files) or holds open (runtime directories).
  local in_use
  in_use=$( (cat /proc/[0-9]*/maps 2>/dev/null || true) | awk '$6 ~ /^\/dev\/hugepages\// {print $6}' | sort -u)
  for f in /dev/hugepages/*; do
    [ -f "$f" ] || continue
    grep -qxF -- "$f" <<<"$in_use" || rm -f -- "$f"
  done
  local open_fds
  open_fds=$( (ls -l /proc/[0-9]*/fd 2>/dev/null || true) | awk '/\/var\/run\/dpdk\// {print $NF}')
  for d in /var/run/dpdk/*/; do
    [ -d "$d" ] || continue
    grep -qF -- "$d" <<<"$open_fds" || rm -rf -- "$d"
  done
  log "hugepages: $have x 2 MiB on /dev/hugepages"
}

install_packages
extract_sdk_headers
reserve_hugepages
log "done (sdk: $sdk_dir)"
