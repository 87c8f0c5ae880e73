// SPDX-License-Identifier: BSD-3-Clause
// librte_vhost calls back by vid; we find the device by its socket path. The registry lists each
// device under its path, and the trampolines librte_vhost calls run under its lock, held shared
// for the whole callback, so a device is never destroyed under a running callback (its
// destructor takes the lock exclusively to unlist it).
#pragma once

#include <rte_vhost.h>

#include <climits>
#include <shared_mutex>
#include <string>

namespace vqs {

class VhostDevice;

std::shared_mutex& registry_mutex();
// Lists `device` under `path`; false if a device is listed there already.
bool registry_add(const std::string& path, VhostDevice* device);
void registry_remove(const std::string& path);
// With registry_mutex() held (exclusively to remove).
void registry_remove_locked(const std::string& path);
VhostDevice* registry_find_locked(const std::string& path);

// Runs fn(device) with the device of connection `vid` (nullptr if none is listed), the registry
// held shared meanwhile.
template <typename Fn>
auto with_device(int vid, Fn&& fn) {
  char path[PATH_MAX];
  std::shared_lock lock(registry_mutex());
  VhostDevice* device = nullptr;
  if (rte_vhost_get_ifname(vid, path, sizeof(path)) == 0) device = registry_find_locked(path);
  return fn(device);
}

// The device callbacks every socket registers: trampolines to the VhostDevice's on_* methods.
const rte_vhost_device_ops& vhost_device_ops();

}  // namespace vqs
