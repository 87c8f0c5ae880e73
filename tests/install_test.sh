#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `meson install` into a DESTDIR: vqswitch and vqswitchctl, the PMD in DPDK's PMD directory (a
# testpmd given that directory finds net_vqs in it, as an installed testpmd would with no -d), the
# pkg-config file naming where it went, the systemd unit, the docs.
#   install_test.sh BUILD_DIR
set -uo pipefail

build=$1
dest=$(mktemp -d /run/vqs-install.XXXXXX)  # EAL refuses plugins below world-writable directories
tag=$(basename "$dest")
trap 'rm -rf "$dest" /var/run/dpdk/"$tag"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >"$dest.log" 2>&1 ||
  { cat "$dest.log"; rm -f "$dest.log"; echo "FAIL: meson install"; exit 1; }
rm -f "$dest.log"
prefix=$(meson introspect "$build" --buildoptions |
  python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')

for program in vqswitch vqswitchctl; do
  [ -x "$dest$prefix/bin/$program" ] || fail "$prefix/bin/$program not installed"
done
"$dest$prefix/bin/vqswitchctl" --version | grep '^vqswitchctl ' >/dev/null || fail "installed vqswitchctl --version"

pc=$(find "$dest" -name vqswitch.pc | head -n 1)
[ -n "$pc" ] || fail "no vqswitch.pc installed"
pmd_dir=$(pkg-config --variable=pmd_dir "$pc")
case $pmd_dir in
  */dpdk/pmds-*) ;;
  *) fail "pkg-config pmd_dir is '$pmd_dir', not DPDK's PMD directory" ;;
esac
[ -d "$pmd_dir" ] || fail "pmd_dir $pmd_dir is not DPDK's (no such directory on this host)"
plugin=$dest$pmd_dir/librte_net_vqs.so
[ -f "$plugin" ] || fail "the PMD is not in $pmd_dir"
[ "$(pkg-config --variable=plugin "$pc")" = "$pmd_dir/librte_net_vqs.so" ] || fail "pkg-config plugin"

[ -f "$dest$prefix/lib/systemd/system/vqswitch.service" ] || fail "no systemd unit installed"
grep -q '^ExecStart=.*vqswitch --config /etc/vqswitch/vqswitch.yaml' \
  "$dest$prefix/lib/systemd/system/vqswitch.service" || fail "the unit does not run vqswitch --config"
for doc in operations.md configuration.md pmd.md; do
  [ -f "$dest$prefix/share/doc/vqswitch/$doc" ] || fail "doc $doc not installed"
done

# EAL loads every plugin of a directory given to -d, as it does DPDK's PMD directory at start. A
# sanitizer build's plugin needs its runtimes loaded first in the uninstrumented testpmd.
preload=$(ldd "$plugin" | awk '/lib(asan|ubsan)\.so/ {print $3}' | sort | tr '\n' ' ')
env_args=()
[ -n "$preload" ] && env_args=(LD_PRELOAD="$preload" ASAN_OPTIONS="detect_leaks=0:abort_on_error=1")
printf 'show port info 0\nquit\n' |
  env "${env_args[@]}" timeout 30 dpdk-testpmd --no-huge -m 256 --no-pci --file-prefix "$tag" -d "$dest$pmd_dir" \
    --vdev "net_vqs0,iface=$dest/vhost.sock" --log-level '*:notice' -- -i --total-num-mbufs=2048 >"$dest/testpmd.log" 2>&1
grep -q 'Driver name: net_vqs' "$dest/testpmd.log" ||
  fail "testpmd did not load net_vqs from the installed directory: $(tail -n 5 "$dest/testpmd.log")"

echo "install_test: $failures failures"
[ "$failures" -eq 0 ]
