// SPDX-License-Identifier: BSD-3-Clause
#include "core/switch.h"

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mbuf.h>

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "datapath/eal_dma_registrar.h"
#include "ports/ethdev_port.h"
#include "ports/guest_port.h"
#include "ports/switch_log.h"

namespace vqs::app {
namespace {

constexpr uint32_t kMinMbufs = 8192;
constexpr uint32_t kMempoolCache = 256;

// Enough mbufs for every ring a NIC keeps full, a burst in flight per guest queue and tx buffer,
// and the per-lcore caches.
uint32_t mbufs_needed(const Config& config, const Plan& plan) {
  uint64_t n = 0;
  const uint64_t lcores = plan.lcores.size();
  for (const PortConfig& p : config.ports) {
    if (p.type == PortType::kEthdev) {
      n += uint64_t{p.queues} * p.rx_descriptors + lcores * p.tx_descriptors;
    } else {
      n += uint64_t{p.queues} * 2 * config.burst;
    }
    n += lcores * config.burst;  // a tx buffer per lcore
  }
  n += (lcores + 1) * kMempoolCache * 3 / 2;
  return static_cast<uint32_t>(std::clamp<uint64_t>(n, kMinMbufs, UINT32_MAX / 2));
}

// Payload references of software-segmented TCP trains: what NIC tx rings hold, plus a train
// per lcore being buffered.
uint32_t indirect_mbufs_needed(const Config& config, const Plan& plan) {
  const uint64_t lcores = plan.lcores.size();
  uint64_t n = lcores * TxBufferSet::kMaxSegments + (lcores + 1) * kMempoolCache * 3 / 2;
  for (const PortConfig& p : config.ports)
    if (p.type == PortType::kEthdev) n += lcores * p.tx_descriptors;
  return static_cast<uint32_t>(std::clamp<uint64_t>(n, kMinMbufs, UINT32_MAX / 2));
}

int run_lcore(void* arg) {
  auto* args = static_cast<std::pair<LcoreLoop*, const std::atomic<bool>*>*>(arg);
  args->first->run(*args->second);
  return 0;
}

}  // namespace

uint64_t PortTotals::total_drops() const {
  // rx_nombuf counts failed mbuf allocations, not packets (those lost show in rx_missed).
  uint64_t sum = rx_missed + rx_errors + tx_errors;
  for (uint64_t d : switch_drops) sum += d;
  for (uint64_t d : guest.drops) sum += d;
  return sum;
}

std::unique_ptr<Switch> Switch::create(const Config& config, const Plan& plan, std::string* error) {
  std::unique_ptr<Switch> sw(new Switch(config, plan));
  if (!sw->build(error)) return nullptr;
  return sw;
}

bool Switch::build(std::string* error) {
  if (!create_pools(error) || !create_ports(error) || !create_forwarding(error)) return false;
  create_lcores();
  return true;
}

bool Switch::create_pools(std::string* error) {
  const uint32_t mbufs = config_.mbufs != 0 ? config_.mbufs : mbufs_needed(config_, plan_);
  pool_ = rte_pktmbuf_pool_create("vqswitch_mbufs", mbufs, kMempoolCache, 0,
                                  RTE_MBUF_DEFAULT_BUF_SIZE, static_cast<int>(rte_socket_id()));
  if (pool_ == nullptr) {
    *error = "cannot create a pool of " + std::to_string(mbufs) +
             " mbufs: " + rte_strerror(rte_errno) + " (eal.memory_mb too small?)";
    return false;
  }
  // TCP segment trains come only from guests with tso: an output that cannot take them whole
  // has them cut by the lcore (rte_gso), payload by reference.
  const bool trains = std::any_of(config_.ports.begin(), config_.ports.end(),
                                  [](const PortConfig& p) { return p.vhost.tso; });
  if (!trains) return true;
  const uint32_t n = indirect_mbufs_needed(config_, plan_);
  gso_pool_ = rte_pktmbuf_pool_create("vqswitch_gso", n, kMempoolCache, 0, 0,
                                      static_cast<int>(rte_socket_id()));
  if (gso_pool_ == nullptr) {
    *error = "cannot create a pool of " + std::to_string(n) +
             " segmentation mbufs: " + rte_strerror(rte_errno) + " (eal.memory_mb too small?)";
    return false;
  }
  return true;
}

// NICs first: whether guest memory can be DMA-mapped for them decides how guests register it.
bool Switch::create_ports(std::string* error) {
  const auto lcore_count = static_cast<uint16_t>(plan_.lcores.size());
  const bool sleeps = std::any_of(plan_.lcores.begin(), plan_.lcores.end(),
                                  [](const PlannedLcore& l) { return l.busy_poll_us.has_value(); });
  ports_.resize(config_.ports.size());
  for (const bool guests : {false, true}) {
    if (guests) plan_lent_buffers();
    for (uint16_t i = 0; i < config_.ports.size(); ++i) {
      const PortConfig& pc = config_.ports[i];
      if ((pc.type == PortType::kVhost) != guests) continue;
      std::string port_error;
      if (guests) {
        GuestPort::ZeroCopyHooks hooks;
        hooks.release_lent = [this] { request_tx_release(); };
        hooks.dma_registrar = dma_registrar_.get();
        ports_[i] = GuestPort::create(pc, i, pool_, std::move(hooks), &port_error);
      } else {
        ports_[i] =
            EthdevPort::create(pc, i, lcore_count, config_.burst, sleeps, pool_, &port_error);
      }
      if (ports_[i] == nullptr) {
        // Named like a config error: the file, where the port is, and what failed.
        *error = config_.error_at("ports[" + std::to_string(i) + "]", pc.name + ": " + port_error);
        return false;
      }
    }
  }
  return true;
}

bool Switch::create_forwarding(std::string* error) {
  forwarding_.mode = config_.forwarding.mode;
  forwarding_.xconnect_peer = plan_.xconnect_peer;
  if (forwarding_.mode != ForwardingMode::kBridge) {
    forwarding_.xconnect_peer.resize(ports_.size(), -1);
    return true;
  }
  std::vector<VlanConfig> vlans;
  for (const PortConfig& pc : config_.ports) vlans.push_back(pc.vlan);
  bridge_ =
      L2Bridge::create(vlans, config_.forwarding.mac_table_size, config_.forwarding.mac_aging_s,
                       static_cast<uint16_t>(plan_.lcores.size()), error);
  if (bridge_ == nullptr) return false;
  forwarding_.bridge = bridge_.get();
  return true;
}

std::vector<TxBufferSet::Output> Switch::tx_outputs(uint16_t slot) const {
  const auto lcore_count = static_cast<uint16_t>(plan_.lcores.size());
  std::vector<TxBufferSet::Output> outputs;
  for (const auto& port : ports_) {
    TxBufferSet::Output out;
    out.port = port.get();
    // The device may have fewer tx queues than asked for: then lcores share them. A guest's are
    // locked as the plan says (it may enable fewer queue pairs).
    const uint16_t txqs = port->tx_queue_count();
    out.queue = static_cast<uint16_t>(slot % txqs);
    out.shared = port->is_guest() ? plan_.tx_shared[port->index()] : lcore_count > txqs;
    const PortConfig& pc = config_.ports[port->index()];
    out.retries_max = pc.tx_retries_max;
    out.housekeeping = pc.type == PortType::kVhost && (pc.vhost.notify.coalesce_packets != 0 ||
                                                       pc.vhost.notify.coalesce_usecs != 0);
    outputs.push_back(out);
  }
  return outputs;
}

void Switch::create_lcores() {
  for (const PlannedLcore& pl : plan_.lcores) {
    std::vector<RxSlot> rx;
    for (const PlannedRxQueue& q : pl.rx) {
      RxSlot slot;
      slot.port = ports_[q.port].get();
      slot.queue = q.queue;
      slot.weight = q.weight;
      rx.push_back(slot);
    }
    lcores_.push_back(std::make_unique<LcoreLoop>(
        pl.lcore, pl.slot, std::move(rx),
        TxBufferSet(tx_outputs(pl.slot), config_.burst, {pool_, gso_pool_}), &forwarding_,
        pl.busy_poll_us, config_.burst, &lcore_signals_));
  }
}

void Switch::plan_lent_buffers() {
  const bool zero_copy = std::any_of(config_.ports.begin(), config_.ports.end(),
                                     [](const PortConfig& p) { return p.vhost.zero_copy; });
  if (!zero_copy) return;
  const bool iova_va = rte_eal_iova_mode() == RTE_IOVA_VA;
  std::vector<rte_device*> devices;
  for (const auto& port : ports_) {
    if (port == nullptr || port->is_guest()) continue;
    auto& nic = static_cast<EthdevPort&>(*port);
    const bool mappable =
        nic.dma() && nic.multi_segs() && iova_va && EalDmaRegistrar::can_map(nic.device());
    nic.set_lent(lent_policy(nic.dma(), nic.multi_segs(), mappable));
    if (mappable) {
      devices.push_back(nic.device());
      SWITCH_LOG(INFO, "port %s: guest memory is DMA-mapped for it (zero-copy)",
                 nic.name().c_str());
    }
    if (nic.lent() != LentPolicy::kCopy) continue;
    const char* why = !nic.multi_segs() ? "it takes no multi-segment mbufs"
                      : !iova_va        ? "IOVA mode is PA, guest memory cannot be DMA-mapped"
                                        : "the device refuses rte_dev_dma_map of guest memory";
    SWITCH_LOG(WARNING, "port %s: zero-copy guest buffers are copied toward it: %s",
               nic.name().c_str(), why);
  }
  if (!devices.empty()) dma_registrar_ = std::make_unique<EalDmaRegistrar>(std::move(devices));
}

Switch::~Switch() {
  {
    // librte_vhost may call a guest's release_lent until its socket is gone: from now on it
    // finds no lcores to wake.
    std::lock_guard lock(release_mutex_);
    lcores_.clear();
  }
  // No lcore runs any more, so this thread may clean the NIC tx queues: lent guest buffers they
  // still hold come back before the guests' teardown waits for them.
  for (const auto& port : ports_)
    if (port != nullptr && !port->is_guest())
      for (uint16_t q = 0; q < port->tx_queue_count(); ++q) (void)port->tx_done_cleanup(q);
  // Guests first: their datapath is disabled before the sockets go, and their memory is
  // DMA-unmapped before the NICs close.
  for (auto& port : ports_)
    if (port != nullptr && port->is_guest()) port.reset();
  ports_.clear();
  bridge_.reset();
  if (pool_ != nullptr) rte_mempool_free(pool_);
  if (gso_pool_ != nullptr) rte_mempool_free(gso_pool_);
}

void Switch::run(const std::atomic<bool>& stop, const std::function<void()>& control) {
  for (const auto& port : ports_)
    if (port->is_guest()) static_cast<GuestPort*>(port.get())->set_enabled(true);

  std::vector<std::pair<LcoreLoop*, const std::atomic<bool>*>> args;
  args.reserve(lcores_.size());
  LcoreLoop* on_main = nullptr;
  for (const auto& loop : lcores_) {
    args.emplace_back(loop.get(), &stop);
    if (loop->lcore() == rte_get_main_lcore()) {
      on_main = loop.get();
    } else {
      rte_eal_remote_launch(run_lcore, &args.back(), loop->lcore());
    }
  }
  if (on_main != nullptr) {
    // An EAL control thread: on the CPUs EAL keeps for control (those of its affinity that no
    // lcore forwards on, where there are any), not beside the main lcore's loop.
    pthread_t control_thread;
    auto* arg = const_cast<std::function<void()>*>(&control);
    const int rc = rte_ctrl_thread_create(
        &control_thread, "vqs-control", nullptr,
        [](void* fn) -> void* {
          (*static_cast<std::function<void()>*>(fn))();
          return nullptr;
        },
        arg);
    if (rc != 0) {
      SWITCH_LOG(ERR, "cannot create the control thread: %s", strerror(rc));
      std::thread fallback(control);
      on_main->run(stop);
      fallback.join();
    } else {
      on_main->run(stop);
      pthread_join(control_thread, nullptr);
    }
  } else {
    control();
  }
  rte_eal_mp_wait_lcore();

  for (const auto& port : ports_)
    if (port->is_guest()) static_cast<GuestPort*>(port.get())->set_enabled(false);
}

void Switch::wake_all() {
  for (const auto& loop : lcores_) loop->wake();
}

void Switch::request_tx_release() {
  std::lock_guard lock(release_mutex_);
  lcore_signals_.release_requests.fetch_add(1, std::memory_order_relaxed);
  lcore_signals_.epoch.fetch_add(1, std::memory_order_release);
  wake_all();
}

void Switch::housekeeping() {
  if (bridge_ != nullptr) bridge_->age(rte_rdtsc());
  // A guest that left with buffers lent: once they are freed, its memory goes (and its DMA
  // registration) without waiting for it to come back.
  for (const auto& port : ports_)
    if (port->is_guest() && static_cast<const GuestPort&>(*port).config().vhost.zero_copy)
      static_cast<GuestPort&>(*port).reap_orphans();
}

PortTotals Switch::totals(uint16_t index) const {
  PortTotals t;
  Port& port = *ports_[index];
  auto add = [&t](const PortQueueCounters& c) {
    t.rx_packets += c.rx_packets;
    t.rx_bytes += c.rx_bytes;
    t.tx_packets += c.tx_packets;
    t.tx_bytes += c.tx_bytes;
    t.tx_retries += c.tx_retries;
    for (int r = 0; r < kSwitchDropCount; ++r) t.switch_drops[r] += c.drops[r];
  };
  for (uint16_t q = 0; q < port.rx_queue_count(); ++q) add(port.rx_counters(q));
  for (uint16_t q = 0; q < port.tx_queue_count(); ++q) add(port.tx_counters(q));
  if (port.is_guest()) {
    const VhostDevice& device = static_cast<GuestPort&>(port).device();
    // Delivered into the guest's buffers, as the datapath counts them: a packet the datapath
    // consumed but dropped (too large, bad offload request) is a drop, not a tx.
    t.tx_packets = 0;
    t.tx_bytes = 0;
    for (uint16_t q = 0; q < device.queue_pairs(); ++q) {
      t.tx_packets += device.stats(guest_rx_vring(q)).packets;
      t.tx_bytes += device.stats(guest_rx_vring(q)).bytes;
    }
    for (uint16_t v = 0; v < device.vring_count(); ++v) {
      t.guest.add(device.stats(v));
      t.zerocopy_in_flight += device.zero_copy_in_flight(v);
      t.zerocopy_wakeups += device.zero_copy_wakeups(v);
      t.zerocopy_orphans += device.zero_copy_orphans(v);
    }
  } else {
    rte_eth_stats s{};
    if (rte_eth_stats_get(static_cast<EthdevPort&>(port).port_id(), &s) == 0) {
      t.rx_missed = s.imissed;
      t.rx_nombuf = s.rx_nombuf;
      t.rx_errors = s.ierrors;
      t.tx_errors = s.oerrors;
    }
  }
  return t;
}

}  // namespace vqs::app
