// SPDX-License-Identifier: BSD-3-Clause
#include "vhost/vhost_registry.h"

#include <map>

#include "vhost/vhost_device.h"

namespace vqs {
namespace {

std::map<std::string, VhostDevice*>& registry() {
  static std::map<std::string, VhostDevice*> devices;
  return devices;
}

const rte_vhost_device_ops kDeviceOps = {
    .new_device =
        [](int vid) {
          return with_device(vid, [vid](VhostDevice* d) { return d ? d->on_new_device(vid) : -1; });
        },
    .destroy_device =
        [](int vid) {
          with_device(vid, [vid](VhostDevice* d) {
            if (d) d->on_destroy_device(vid);
            return 0;
          });
        },
    .vring_state_changed =
        [](int vid, uint16_t vring, int enable) {
          return with_device(vid, [&](VhostDevice* d) {
            if (d) d->on_vring_state_changed(vid, vring, enable != 0);
            return 0;
          });
        },
    .features_changed = nullptr,
    .new_connection =
        [](int vid) {
          return with_device(vid,
                             [vid](VhostDevice* d) { return d ? d->on_new_connection(vid) : -1; });
        },
    .destroy_connection =
        [](int vid) {
          with_device(vid, [vid](VhostDevice* d) {
            if (d) d->on_destroy_connection(vid);
            return 0;
          });
        },
    .guest_notified = nullptr,
    .reserved = {nullptr},
};

}  // namespace

std::shared_mutex& registry_mutex() {
  static std::shared_mutex mutex;
  return mutex;
}

bool registry_add(const std::string& path, VhostDevice* device) {
  std::unique_lock lock(registry_mutex());
  return registry().emplace(path, device).second;
}

void registry_remove(const std::string& path) {
  std::unique_lock lock(registry_mutex());
  registry_remove_locked(path);
}

void registry_remove_locked(const std::string& path) { registry().erase(path); }

VhostDevice* registry_find_locked(const std::string& path) {
  auto it = registry().find(path);
  return it == registry().end() ? nullptr : it->second;
}

const rte_vhost_device_ops& vhost_device_ops() { return kDeviceOps; }

}  // namespace vqs
