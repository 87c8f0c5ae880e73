// SPDX-License-Identifier: BSD-3-Clause
// net_vqs devargs: `--vdev net_vqs0,iface=/tmp/vm0.sock,queues=2,client=1`. Names follow DPDK's
// net_vhost where the meaning is the same (iface, queues, client, tso); notify_coalesce_* and
// refill_threshold set the guest RX notify policy. docs/pmd.md lists them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "vhost/vhost_device.h"

namespace vqs {

// Parses `args` (may be null or empty). On error returns nullopt and sets `error` to a message
// naming the key: unknown keys, duplicates, bad values and a missing iface are all errors.
std::optional<VhostDeviceOptions> parse_devargs(const char* args, std::string* error);

}  // namespace vqs
