#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds the Linux test guest: Debian's kernel (the package linux-image-amd64 points to, fetched
# with apt-get download) and an initramfs of busybox-static, the kernel's virtio modules and
# scripts/guest/init. Prints the directory holding vmlinuz and initramfs.gz; kept there (per
# kernel version) for the next run.
#   scripts/guest/build.sh [OUT_DIR]   (default /var/cache/vqswitch/guest)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-/var/cache/vqswitch/guest}
die() { printf 'guest/build.sh: error: %s\n' "$*" >&2; exit 1; }

[ -x /bin/busybox ] || die "busybox-static is not installed (scripts/setup.sh installs it)"
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -1)
if [ -z "$kpkg" ]; then
  apt-get update -qq
  kpkg=$(apt-cache depends linux-image-amd64 | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -1)
fi
[ -n "$kpkg" ] || die "no Debian kernel package found for linux-image-amd64"
kver=${kpkg#linux-image-}
dir="$out/$kver"
if [ -s "$dir/vmlinuz" ] && [ -s "$dir/initramfs.gz" ] && [ "$dir/initramfs.gz" -nt "$here/init" ]; then
  echo "$dir"
  exit 0
fi
mkdir -p "$dir"
work=$(mktemp -d /var/tmp/vqs-guest.XXXXXX)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download -qq "$kpkg" >/dev/null 2>&1) ||
  { apt-get update -qq && (cd "$work" && apt-get download -qq "$kpkg" >/dev/null); } ||
  die "apt-get download $kpkg failed"
dpkg-deb -x "$work"/"$kpkg"_*.deb "$work/pkg"
cp "$work/pkg/boot/vmlinuz-$kver" "$dir/vmlinuz"

root="$work/root"
mkdir -p "$root"/{bin,dev,proc,sys,tmp,lib/modules}
cp /bin/busybox "$root/bin/busybox"
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci failover \
         net_failover virtio_net; do
  ko=$(find "$work/pkg/lib/modules/$kver" -name "$m.ko*" | head -1)
  [ -n "$ko" ] || die "module $m not in $kpkg"
  case "$ko" in
    *.xz) xz -dc "$ko" >"$root/lib/modules/$m.ko" ;;
    *.zst) zstd -qdc "$ko" >"$root/lib/modules/$m.ko" ;;
    *) cp "$ko" "$root/lib/modules/$m.ko" ;;
  esac
done
install -m 0755 "$here/init" "$root/init"
(cd "$root" && find . | /bin/busybox cpio -o -H newc 2>/dev/null | gzip -9) >"$dir/initramfs.gz.tmp"
mv "$dir/initramfs.gz.tmp" "$dir/initramfs.gz"
echo "$dir"
