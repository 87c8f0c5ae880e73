#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job: sets up the machine, builds, and runs the switch demo (scripts/demo_run.sh):
# vqswitch bridging two DPDK virtio_user guests from config/demo.yaml, live statistics for a few
# seconds, then the final counters.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
"$top/scripts/setup.sh"
if [ -f build/build.ninja ]; then meson setup --reconfigure build >/dev/null; else meson setup build >/dev/null; fi
ninja -C build
exec "$top/scripts/demo_run.sh" build "${VQS_DEMO_SECONDS:-8}"
