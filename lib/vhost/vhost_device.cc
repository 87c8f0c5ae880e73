// SPDX-License-Identifier: BSD-3-Clause
// A vhost port's session: creation and teardown, connections, the device's start and stop, the
// memory table, and each vring started or stopped as the guest and the owner ask.
#include "vhost/vhost_device.h"

#include <rte_cycles.h>
#include <rte_vhost.h>

#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <shared_mutex>

#include "ring/guest_mapping.h"
#include "ring/virtio_net_hdr.h"
#include "ring/vring.h"
#include "vhost/memory_node.h"
#include "vhost/vhost_log.h"
#include "vhost/vhost_message.h"
#include "vhost/vhost_registry.h"
#include "vhost/vhost_user_request.h"

namespace vqs {

uint64_t offered_virtio_features(bool tso, bool zero_copy) {
  uint64_t f = (1ull << kFVersion1) | (1ull << kNetFMrgRxbuf) | (1ull << kRingFIndirectDesc) |
               (1ull << kRingFEventIdx) | (1ull << kNetFMq) | (1ull << kNetFCtrlVq) |
               (1ull << kNetFCsum) | (1ull << kNetFGuestCsum) | (1ull << kFAnyLayout) |
               (1ull << kNetFGuestAnnounce) | (1ull << VHOST_USER_F_PROTOCOL_FEATURES) |
               (1ull << kVhostFLogAll) | (1ull << kFRingPacked);
  // CTRL_VQ, GUEST_ANNOUNCE: the frontend (QEMU, virtio_user) serves the control queue itself.
  // LOG_ALL: live migration; while it is on, every guest page we write is logged.
  // IN_ORDER: both directions use chains in avail order (the mergeable gatherer keeps to it when
  // negotiated); DPDK's virtio driver then takes its cheaper in-order paths, as with net_vhost.
  // Not with zero-copy: lent chains come back in the order their mbufs are freed.
  if (!zero_copy) f |= 1ull << kFInOrder;
  if (tso) {
    f |= (1ull << kNetFHostTso4) | (1ull << kNetFHostTso6) | (1ull << kNetFGuestTso4) |
         (1ull << kNetFGuestTso6);
  }
  return f;
}

uint64_t handled_protocol_features() {
  // LOG_SHMFD: the dirty log of live migration (SET_LOG_BASE). RARP: after a migration, for a
  // guest that cannot announce itself, the frontend has us send its RARP (receive_burst). Not
  // INFLIGHT_SHMFD, nothing vDPA- or postcopy-specific.
  return (1ull << VHOST_USER_PROTOCOL_F_MQ) | (1ull << VHOST_USER_PROTOCOL_F_REPLY_ACK) |
         (1ull << VHOST_USER_PROTOCOL_F_STATUS) | (1ull << VHOST_USER_PROTOCOL_F_LOG_SHMFD) |
         (1ull << VHOST_USER_PROTOCOL_F_RARP);
}

VhostDevice::VhostDevice(const VhostDeviceOptions& options, Listener* listener)
    : options_(options), listener_(listener), vrings_(new Vring[2 * options.queue_pairs]) {
  if (options.zero_copy)
    for (uint16_t q = 0; q < options.queue_pairs; ++q)
      vrings_[guest_tx_vring(q)].zero_copy = ZeroCopyTracker::acquire();
}

std::unique_ptr<VhostDevice> VhostDevice::create(const VhostDeviceOptions& options,
                                                 Listener* listener, std::string* error) {
  const char* path = options.path.c_str();
  std::unique_ptr<VhostDevice> device(new VhostDevice(options, listener));
  if (!registry_add(options.path, device.get())) {
    *error = "socket " + options.path + " is already in use by another port";
    return nullptr;
  }
  auto fail = [&](const std::string& what, bool registered) -> std::unique_ptr<VhostDevice> {
    *error = options.path + ": " + what;
    if (registered) rte_vhost_driver_unregister(path);
    registry_remove(options.path);
    device->registered_ = false;
    return nullptr;
  };
  device->registered_ = true;

  uint64_t flags = 0;
  bool removed_stale = false;
  if (options.client) {
    flags |= RTE_VHOST_USER_CLIENT;
    if (!options.reconnect) flags |= RTE_VHOST_USER_NO_RECONNECT;
  } else if (std::string why; !clear_server_socket_path(options.path, &removed_stale, &why)) {
    return fail(why, false);
  } else if (removed_stale) {
    VQS_LOG(INFO, "%s: stale socket file removed", path);
  }
  if (rte_vhost_driver_register(path, flags) != 0)
    return fail("vhost-user registration failed", false);
  if (rte_vhost_driver_callback_register(path, &vhost_device_ops()) != 0)
    return fail("callback registration failed", true);
  // disable_features, unlike set_features, keeps librte_vhost's builtin net mode, in which a
  // device is ready once its first queue pair is (not every vring it allocated) and queue pairs
  // beyond the negotiated MQ are released: what a virtio-net guest expects.
  uint64_t lib_features = 0;
  if (rte_vhost_driver_get_features(path, &lib_features) != 0 ||
      rte_vhost_driver_disable_features(
          path, lib_features & ~offered_virtio_features(options.tso, options.zero_copy)) != 0)
    return fail("feature set-up failed", true);
  uint64_t protocol = 0;
  if (rte_vhost_driver_get_protocol_features(path, &protocol) != 0 ||
      rte_vhost_driver_set_protocol_features(path, protocol & handled_protocol_features()) != 0)
    return fail("protocol feature set-up failed", true);
  if (rte_vhost_driver_start(path) != 0) return fail("could not start the socket", true);
  // Right after bind(): until then the socket has the umask's mode, so a mode wider than that
  // opens no window (a narrower one does: keep sockets in a directory only the intended users
  // can reach).
  if (std::string why; !options.client && !apply_socket_access(options.path, options.access, &why))
    return fail(why, true);
  return device;
}

VhostDevice::~VhostDevice() {
  if (!registered_) return;
  {
    // Exclusive: no callback runs meanwhile (they hold it shared), so librte_vhost cannot free
    // the device under us while we hand the indices back; then unlisted, callbacks find nothing.
    std::unique_lock registry_lock(registry_mutex());
    std::lock_guard lock(mutex_);
    datapath_enabled_ = false;
    running_ = false;
    apply_locked();
    registry_remove_locked(options_.path);
  }
  rte_vhost_driver_unregister(options_.path.c_str());
  release_trackers_at_teardown();
  if (mapping_ != nullptr) mapping_->release();
}

void VhostDevice::set_datapath_enabled(bool enabled) {
  std::lock_guard lock(mutex_);
  datapath_enabled_ = enabled;
  apply_locked();
}

int VhostDevice::on_new_connection(int vid) {
  {
    std::lock_guard lock(mutex_);
    // Every connection keeps its own vring-enabled flags; which one is served is decided by
    // new_device (the newest device wins). A second frontend while one is connected is refused
    // at its first message (admit()); until then it changes nothing for the device served.
    if (!enabled_by_vid_.empty())
      VQS_LOG(WARNING, "%s: frontend %d connects while another is connected", path().c_str(), vid);
    enabled_by_vid_[vid].assign(vring_count(), false);
  }
  // The hooks bracket every message from now on (no context: they look the device up by path).
  return rte_vhost_extern_callback_register(vid, &vhost_message_hooks(), nullptr) == 0 ? 0 : -1;
}

void VhostDevice::on_destroy_connection(int vid) {
  std::lock_guard lock(mutex_);
  enabled_by_vid_.erase(vid);
  admitted_.erase(vid);
  log_mapped_.erase(vid);
}

size_t VhostDevice::frontend_connections() {
  std::lock_guard lock(mutex_);
  return enabled_by_vid_.size();
}

bool VhostDevice::admit(int vid) {
  std::lock_guard lock(mutex_);
  if (admitted_.count(vid) != 0) return true;
  for (int other : admitted_) {
    if (enabled_by_vid_.count(other) == 0) continue;
    refused_frontends_.fetch_add(1);
    VQS_LOG(WARNING, "%s: frontend %d refused: frontend %d is connected", path().c_str(), vid,
            other);
    return false;
  }
  admitted_.insert(vid);
  return true;
}

int VhostDevice::on_new_device(int vid) {
  {
    std::lock_guard lock(mutex_);
    auto flags = enabled_by_vid_.find(vid);
    if (flags == enabled_by_vid_.end()) return -1;
    if (running_) {  // an older connection's device: it is not served any more
      running_ = false;
      apply_locked();
    }
    vid_ = vid;
    for (uint16_t i = 0; i < vring_count(); ++i) vrings_[i].enabled = flags->second[i];
    uint64_t features = 0;
    rte_vhost_get_negotiated_features(vid, &features);
    features_.store(features, std::memory_order_release);
    suspended_ = false;
    if (!load_memory_locked(true)) {
      link_up_.store(false, std::memory_order_release);
      return -1;
    }
    running_ = true;
    apply_locked();
    link_up_.store(true, std::memory_order_release);
  }
  VQS_LOG(INFO, "%s: guest device %d running (features 0x%" PRIx64 ")", path().c_str(), vid,
          negotiated_features());
  if (listener_) listener_->on_link_change(true);
  return 0;
}

void VhostDevice::on_destroy_device(int vid) {
  {
    std::lock_guard lock(mutex_);
    if (vid != vid_) return;
    running_ = false;
    suspended_ = false;
    apply_locked();  // stops every vring and hands its indices back to librte_vhost
    vrings_[guest_tx_vring(0)].pending_rarp.store(0);  // a RARP owed to this session only
    memory_.clear();
    ring_memory_.clear();
    loaded_table_.clear();
    if (mapping_ != nullptr) {
      mapping_->release();  // chains still lent keep it until they complete
      mapping_ = nullptr;
    }
    link_up_.store(false, std::memory_order_release);
  }
  VQS_LOG(INFO, "%s: guest device %d stopped", path().c_str(), vid);
  if (listener_) listener_->on_link_change(false);
}

void VhostDevice::request_rarp(const uint8_t mac[6]) {
  uint64_t value = 0;
  std::memcpy(&value, mac, 6);  // little-endian: the MAC's bytes in the low 48 bits
  Vring& v = vrings_[guest_tx_vring(0)];
  v.pending_rarp.store(value | kRarpPending, std::memory_order_relaxed);
  {
    // A guest that has just arrived is often silent: wake an owner sleeping on the vring's kicks
    // so that the RARP goes now (a vring not started yet is woken when it starts).
    std::lock_guard lock(mutex_);
    if (v.kickfd >= 0) kick_without_blocking(v.kickfd);
  }
  VQS_LOG(INFO, "%s: RARP requested for %02x:%02x:%02x:%02x:%02x:%02x", path().c_str(), mac[0],
          mac[1], mac[2], mac[3], mac[4], mac[5]);
}

bool VhostDevice::vring_enabled(uint16_t vring) {
  std::lock_guard lock(mutex_);
  return vid_ >= 0 && vrings_[vring].enabled;
}

void VhostDevice::on_vring_state_changed(int vid, uint16_t vring, bool enabled) {
  if (vring >= vring_count()) {
    if (enabled) {
      unserved_vring_enables_.fetch_add(1);
      VQS_LOG(WARNING, "%s: guest enabled vring %u but only %u queue pairs are served",
              path().c_str(), vring, queue_pairs());
    }
    return;
  }
  {
    std::lock_guard lock(mutex_);
    auto flags = enabled_by_vid_.find(vid);
    if (flags != enabled_by_vid_.end()) flags->second[vring] = enabled;
    if (vid != vid_) return;  // not the device being served
    vrings_[vring].enabled = enabled;
    apply_locked();
  }
  if (listener_) listener_->on_vring_state(vring, enabled);
}

bool VhostDevice::on_message(int vid, uint32_t request, bool after, uint64_t* reply) {
  bool link_lost = false;
  {
    std::lock_guard lock(mutex_);
    // Before the vrings restart below: they mark the log only while librte_vhost maps it.
    if (after && request == static_cast<uint32_t>(VhostUserRequest::kSetLogBase))
      log_mapped_.insert(vid);
    if (!after && request == static_cast<uint32_t>(VhostUserRequest::kResetOwner)) {
      log_mapped_.erase(vid);  // destroy_device stops the vrings before librte_vhost unmaps it
      // librte_vhost clears its vrings (enabled, ready) without vring_state_changed(0): a vring
      // counts as enabled again only once the frontend enables it after the reset.
      auto flags = enabled_by_vid_.find(vid);
      if (flags != enabled_by_vid_.end()) flags->second.assign(vring_count(), false);
    }
    if (!after && vid == vid_) {
      if (suspended_) {
        // The previous ring-changing message failed (librte_vhost skips the post-hook then) and
        // left its state half changed: serve nothing until the device is set up again.
        VQS_LOG(ERR, "%s: a vhost-user message failed; device stopped until it is reset",
                path().c_str());
        suspended_ = false;
        running_ = false;
        apply_locked();
        link_lost = link_up_.exchange(false);
      } else if (running_ && changes_ring_state(request)) {
        suspended_ = true;
        apply_locked();
      }
    } else if (after && suspended_ && vid == vid_) {
      suspended_ = false;
      uint64_t features = 0;
      rte_vhost_get_negotiated_features(vid_, &features);
      const bool was_logging = dirty_logging();
      features_.store(features, std::memory_order_release);
      if (dirty_logging() != was_logging)
        VQS_LOG(INFO, "%s: dirty page logging %s", path().c_str(),
                dirty_logging() ? "on (live migration)" : "off");
      if (!load_memory_locked(false)) {
        running_ = false;
        link_lost = link_up_.exchange(false);
      }
      apply_locked();
    }
  }
  if (link_lost && listener_) listener_->on_link_change(false);
  // librte_vhost would announce its own maximum, and a frontend with more queue pairs than we
  // serve would be accepted with the extra ones never polled. Asked before any device exists
  // (QEMU: right after protocol feature negotiation), so for every connection.
  if (after || request != static_cast<uint32_t>(VhostUserRequest::kGetQueueNum)) return false;
  *reply = queue_pairs();
  return true;
}

bool VhostDevice::load_memory_locked(bool force) {
  rte_vhost_memory* table = nullptr;
  if (rte_vhost_get_mem_table(vid_, &table) != 0) {
    VQS_LOG(ERR, "%s: no guest memory table", path().c_str());
    memory_.clear();
    ring_memory_.clear();
    loaded_table_.clear();
    return false;
  }
  std::vector<LoadedRegion> regions_now;
  for (uint32_t i = 0; i < table->nregions; ++i) {
    const rte_vhost_mem_region& r = table->regions[i];
    regions_now.push_back({r.guest_phys_addr, r.size, r.host_user_addr, r.mmap_size, r.fd});
  }
  if (!force && !loaded_table_.empty() && regions_now == loaded_table_) {
    std::free(table);
    return true;
  }
  loaded_table_.clear();
  memory_.clear();
  ring_memory_.clear();
  if (mapping_ != nullptr) {
    mapping_->release();  // trackers with chains lent from it keep it
    mapping_ = nullptr;
  }
  // Where the guest's memory is: its largest region's first page (QEMU's first region is often
  // the small one below 640 KiB).
  const rte_vhost_mem_region* largest = nullptr;
  for (uint32_t i = 0; i < table->nregions; ++i)
    if (largest == nullptr || table->regions[i].size > largest->size) largest = &table->regions[i];
  if (largest != nullptr)
    memory_node_.store(memory_node_of(reinterpret_cast<const void*>(largest->host_user_addr)),
                       std::memory_order_release);
  if (options_.zero_copy) {
    // Our own mapping of the region fds: lent buffers outlive librte_vhost's.
    std::vector<GuestMapping::Region> regions;
    for (uint32_t i = 0; i < table->nregions; ++i) {
      const rte_vhost_mem_region& r = table->regions[i];
      regions.push_back({r.guest_phys_addr, r.size, r.fd, r.mmap_size,
                         r.host_user_addr - reinterpret_cast<uint64_t>(r.mmap_addr)});
      // librte_vhost's ring pointers are in its mapping: a packed ring's writes are logged
      // through this one.
      (void)ring_memory_.add_region(r.guest_phys_addr, r.size,
                                    reinterpret_cast<void*>(r.host_user_addr));
    }
    std::free(table);
    std::string error;
    mapping_ = GuestMapping::create(regions, &memory_, options_.dma_registrar, &error);
    if (mapping_ == nullptr) {
      VQS_LOG(ERR, "%s: guest memory: %s", path().c_str(), error.c_str());
      return false;
    }
    if (options_.dma_registrar != nullptr && !mapping_->dma_ready())
      VQS_LOG(WARNING, "%s: guest memory not registered for DMA: %s", path().c_str(),
              options_.lend_only_dma_ready ? "nothing is lent, every packet is copied"
                                           : "what it lends is copied toward devices that DMA");
    loaded_table_ = std::move(regions_now);
    return true;
  }
  bool ok = true;
  for (uint32_t i = 0; i < table->nregions; ++i) {
    const rte_vhost_mem_region& r = table->regions[i];
    if (!memory_.add_region(r.guest_phys_addr, r.size, reinterpret_cast<void*>(r.host_user_addr))) {
      VQS_LOG(ERR, "%s: guest memory region %u (0x%" PRIx64 "+0x%" PRIx64 ") rejected",
              path().c_str(), i, r.guest_phys_addr, r.size);
      ok = false;
    }
  }
  std::free(table);
  if (ok) loaded_table_ = std::move(regions_now);
  return ok;
}

void VhostDevice::apply_locked() {
  lent_wait_deadline_ = 0;
  for (uint16_t i = 0; i < vring_count(); ++i) {
    Vring& v = vrings_[i];
    const bool want_started = running_ && !suspended_ && v.enabled;
    if (v.started && !want_started) stop_vring_locked(i);
    if (!v.started && want_started) v.started = start_vring_locked(i);
    const bool want_open = v.started && datapath_enabled_;
    if (want_open && !v.gate.is_open()) v.gate.open();
    if (!want_open && v.gate.is_open()) v.gate.close();
    // The session is over: chains lent from a vring stopped earlier in it (disabled, or stopped
    // for a message whose memory table then failed) will not come back to the next session's
    // ring either. The vring is stopped, so this thread is its owner.
    if (!running_ && !v.started && v.zero_copy != nullptr) v.zero_copy->orphan_lent();
  }
}

bool VhostDevice::start_vring_locked(uint16_t index) {
  rte_vhost_vring vr{};
  uint16_t last_avail = 0, last_used = 0;
  if (rte_vhost_get_vhost_vring(vid_, index, &vr) != 0 ||
      rte_vhost_get_vring_base(vid_, index, &last_avail, &last_used) != 0) {
    VQS_LOG(ERR, "%s: vring %u: no ring state", path().c_str(), index);
    return false;
  }
  VirtQueue::Setup setup;
  // librte_vhost's vring holds either format's areas, as negotiated.
  setup.addrs =
      SplitRingAddrs{reinterpret_cast<VringDesc*>(vr.desc), reinterpret_cast<VringAvail*>(vr.avail),
                     reinterpret_cast<VringUsed*>(vr.used), vr.size};
  setup.packed_addrs =
      PackedRingAddrs{reinterpret_cast<VringPackedDesc*>(vr.desc_packed),
                      reinterpret_cast<VringPackedEvent*>(vr.driver_event),
                      reinterpret_cast<VringPackedEvent*>(vr.device_event), vr.size};
  setup.last_avail_idx = last_avail;
  setup.last_used_idx = last_used;
  setup.base_is_ours =
      vrings_[index].handed_base == (int64_t{last_avail} << 16 | int64_t{last_used});
  setup.features = negotiated_features();
  setup.memory = &memory_;
  if (options_.zero_copy) setup.ring_memory = &ring_memory_;
  setup.callfd = vr.callfd;
  Vring& v = vrings_[index];
  if (dirty_logging() && log_mapped_.count(vid_) != 0) {
    v.dirty_log.bind(vid_, index);
    setup.dirty_log = &v.dirty_log;
  }
  if (v.zero_copy != nullptr) {
    v.zero_copy->start(vr.size);
    v.zero_copy->set_mapping(mapping_);
    v.lending.tracker = v.zero_copy.get();
    // No IOVA for what would be lent, and its consumers may DMA: copy all (counted as copied).
    v.lending.min_len = options_.lend_only_dma_ready && !v.zero_copy->dma_ready()
                            ? UINT32_MAX
                            : options_.zero_copy_min_len;
    v.lending.fallback = options_.zero_copy_fallback;
  }
  setup.tsc_hz = rte_get_tsc_hz();
  setup.interrupt_recheck_us = options_.interrupt_recheck_us;
  setup.clock = options_.decision_clock;
  setup.line_release = options_.desc_release;
  if (is_guest_rx_vring(index)) {
    setup.notify = options_.notify;  // we enqueue, the policy applies
    // Timed on this ring, the index's line was mostly in our cache already when it had moved
    // (20-40 ns, far): the queue pair's TX ring, written by every transmit burst, says where the
    // guest is (docs/architecture.md, "Descriptor lines given back"). Guest RX buffers are ours
    // to write next, not the guest's: buffer_release stays off here.
    setup.placement_from = &vrings_[index + 1].queue.placement();
  } else {
    setup.buffer_release = options_.buffer_release;
    // What the guest received on this queue pair tells a forwarder apart (sender_gate.h).
    setup.pair_rx_stats = &vrings_[index - 1].queue.stats();
    setup.pair_rx_sample = &vrings_[index - 1].queue.forward_sample();
  }
  if (!v.queue.start(setup)) {
    VQS_LOG(ERR, "%s: vring %u: unusable ring (size %u)", path().c_str(), index, vr.size);
    return false;
  }
  if (v.queue.resumed_from_ring())
    VQS_LOG(WARNING,
            "%s: vring %u: the frontend's base 0x%04x disagrees with the packed ring; resuming at "
            "0x%04x, where its descriptors say",
            path().c_str(), index, last_avail, v.queue.avail_base());
  // The gate is closed: the ring is ours to set up as the owner last asked.
  if (v.kicks_armed.load()) v.queue.set_kicks_enabled(true);
  v.kickfd = vr.kickfd;
  watch_kickfd_locked(v, true);
  return true;
}

void VhostDevice::stop_vring_locked(uint16_t index) {
  Vring& v = vrings_[index];
  v.gate.close();
  watch_kickfd_locked(v, false);
  v.kickfd = -1;
  if (v.zero_copy != nullptr) return_lent_locked(v);
  // GET_VRING_BASE replies with librte_vhost's copy of the indices: keep it current.
  rte_vhost_set_vring_base(vid_, index, v.queue.avail_base(), v.queue.used_base());
  v.handed_base = int64_t{v.queue.avail_base()} << 16 | int64_t{v.queue.used_base()};
  v.queue.stop();
  v.started = false;
  if (v.zero_copy != nullptr) {
    // The session is over (device stopped or gone): what is still lent never comes back to this
    // ring (apply_locked marks it). Otherwise (a message being handled, the queue disabled) it
    // does, after the restart.
    v.zero_copy->set_mapping(nullptr);
  }
}

}  // namespace vqs
