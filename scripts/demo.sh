#!/usr/bin/env bash
# The main job: sets up the machine, builds, and runs the datapath self-check — a simulated guest
# whose transmitted packets go through our dequeue and enqueue paths back into its own receive
# ring, every byte compared, with rates and counters. (Replaced by the switch demo with DPDK
# virtio_user guests once the PMD and vqswitch exist.)
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
"$top/scripts/setup.sh"
if [ -f build/build.ninja ]; then meson setup --reconfigure build >/dev/null; else meson setup build >/dev/null; fi
ninja -C build
exec build/tests/vqs-selfcheck --seconds "${VQS_DEMO_SECONDS:-2}"
