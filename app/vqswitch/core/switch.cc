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

#include "core/loop_clock.h"
#include "core/rxq_balance.h"
#include "datapath/eal_dma_registrar.h"
#include "ports/ethdev_port.h"
#include "ports/guest_port.h"
#include "ports/switch_log.h"

namespace vqs::app {
namespace {

// How long add_port and del_port wait for an lcore to take a change (it is woken if asleep).
constexpr int kApplyTimeoutMs = 2000;

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
  port_configs_ = config_.ports;
  for (const PlannedLcore& pl : plan_.lcores) {
    bool takes = config_.lcores.empty();
    for (const LcoreConfig& lc : config_.lcores)
      if (lc.lcore == pl.lcore) takes = lc.auto_rx;
    auto_rx_.push_back(takes);
  }
  if (!create_pools(error) || !create_ports(error) || !create_forwarding(error)) return false;
  update_lending();
  create_lcores();
  return true;
}

bool Switch::create_pools(std::string* error) {
  for (const Plan::Pool& planned : plan_.pools) {
    const std::string name = "vqswitch_mbufs_n" + std::to_string(planned.node);
    rte_mempool* pool = rte_pktmbuf_pool_create(name.c_str(), planned.mbufs, kMempoolCache, 0,
                                                RTE_MBUF_DEFAULT_BUF_SIZE, planned.node);
    if (pool == nullptr && rte_errno == ENOMEM) {
      // No (hugepage) memory on that node: the pool still serves its ports, from elsewhere.
      pool = rte_pktmbuf_pool_create(name.c_str(), planned.mbufs, kMempoolCache, 0,
                                     RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
      if (pool != nullptr)
        SWITCH_LOG(WARNING,
                   "NUMA node %d has no memory for its mbuf pool: it comes from another node "
                   "(reserve hugepages on every node with lcores or ports)",
                   planned.node);
    }
    if (pool == nullptr) {
      *error = "cannot create a pool of " + std::to_string(planned.mbufs) + " mbufs on node " +
               std::to_string(planned.node) + ": " + rte_strerror(rte_errno) +
               " (eal.memory_mb too small?)";
      return false;
    }
    pools_.push_back({planned.node, pool});
  }
  // TCP segment trains come only from guests with tso: an output that cannot take them whole
  // has them cut by the lcore (rte_gso), payload by reference.
  const bool trains = std::any_of(config_.ports.begin(), config_.ports.end(),
                                  [](const PortConfig& p) { return p.vhost.tso; });
  if (!trains) return true;
  const uint32_t n = indirect_mbufs_needed(config_, plan_);
  gso_pool_ = rte_pktmbuf_pool_create("vqswitch_gso", n, kMempoolCache, 0, 0, SOCKET_ID_ANY);
  if (gso_pool_ == nullptr) {
    *error = "cannot create a pool of " + std::to_string(n) +
             " segmentation mbufs: " + rte_strerror(rte_errno) + " (eal.memory_mb too small?)";
    return false;
  }
  return true;
}

// NICs first: whether guest memory can be DMA-mapped for them decides how guests register it.
bool Switch::create_ports(std::string* error) {
  ports_.resize(config_.ports.size());
  for (const bool guests : {false, true}) {
    if (guests) plan_lent_buffers();
    for (uint16_t i = 0; i < config_.ports.size(); ++i) {
      if ((config_.ports[i].type == PortType::kVhost) != guests) continue;
      std::string port_error;
      if (!create_port(i, pool_for_node(plan_.port_pool_nodes[i]), &port_error)) {
        // Named like a config error: the file, where the port is, and what failed.
        *error = config_.error_at("ports[" + std::to_string(i) + "]",
                                  config_.ports[i].name + ": " + port_error);
        return false;
      }
    }
  }
  return true;
}

bool Switch::create_port(uint16_t index, rte_mempool* pool, std::string* error) {
  const PortConfig& pc = port_configs_[index];
  if (pc.type == PortType::kVhost) {
    GuestPort::SwitchHooks hooks;
    hooks.release_lent = [this] { request_tx_release(); };
    hooks.dma_registrar = dma_registrar_.get();
    hooks.pool_for_node = [this](int node) { return pool_for_node(node); };
    // Without a TSC (tsc_clock.h) the rings' rechecks stay off, as in the PMD.
    hooks.decision_clock = kTscClock ? &loop_clock : nullptr;
    ports_[index] = GuestPort::create(pc, index, pool, std::move(hooks), error);
  } else {
    const bool sleeps =
        std::any_of(plan_.lcores.begin(), plan_.lcores.end(),
                    [](const PlannedLcore& l) { return l.busy_poll_us.has_value(); });
    ports_[index] = EthdevPort::create(pc, index, static_cast<uint16_t>(plan_.lcores.size()),
                                       config_.burst, sleeps, pool, error);
  }
  return ports_[index] != nullptr;
}

bool Switch::create_forwarding(std::string* error) {
  forwarding_ = std::make_unique<Forwarding>();
  forwarding_->mode = config_.forwarding.mode;
  forwarding_->xconnect_peer = plan_.xconnect_peer;
  if (forwarding_->mode != ForwardingMode::kBridge) {
    forwarding_->xconnect_peer.resize(ports_.size(), -1);
    return true;
  }
  std::vector<VlanConfig> vlans;
  for (const PortConfig& pc : config_.ports) vlans.push_back(pc.vlan);
  bridge_ =
      L2Bridge::create(vlans, config_.forwarding.mac_table_size, config_.forwarding.mac_aging_s,
                       static_cast<uint16_t>(plan_.lcores.size()), error);
  if (bridge_ == nullptr) return false;
  forwarding_->bridge = bridge_.get();
  return true;
}

TxBufferSet::Output Switch::tx_output(const Port& port, uint16_t slot) const {
  const auto lcore_count = static_cast<uint16_t>(plan_.lcores.size());
  TxBufferSet::Output out;
  out.port = const_cast<Port*>(&port);
  // The device may have fewer tx queues than asked for: then lcores share them. A guest may
  // enable fewer queue pairs than it has: with several lcores its queues are always locked.
  const uint16_t txqs = port.tx_queue_count();
  out.queue = static_cast<uint16_t>(slot % txqs);
  out.shared = lcore_count > txqs || (port.is_guest() && lcore_count > 1);
  const PortConfig& pc = port_configs_[port.index()];
  out.retries_max = pc.tx_retries_max;
  // Coalesced notifications and owed interrupt decisions are settled between bursts.
  out.housekeeping = pc.type == PortType::kVhost &&
                     (pc.vhost.notify.coalesce_packets != 0 ||
                      pc.vhost.notify.coalesce_usecs != 0 || pc.vhost.interrupt_recheck_us != 0);
  return out;
}

std::vector<TxBufferSet::Output> Switch::tx_outputs(uint16_t slot) const {
  std::vector<TxBufferSet::Output> outputs;
  for (const auto& port : ports_) outputs.push_back(tx_output(*port, slot));
  return outputs;
}

void Switch::create_lcores() {
  for (const PlannedLcore& pl : plan_.lcores) {
    // Copies an lcore makes (lent buffers toward NICs that cannot take them) from its node.
    rte_mempool* lcore_pool = pool_for_node(pl.node);
    if (lcore_pool == nullptr) lcore_pool = pools_.front().pool;
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
        TxBufferSet(tx_outputs(pl.slot), config_.burst, {lcore_pool, gso_pool_}, kMaxPorts),
        forwarding_.get(), pl.busy_poll_us, config_.burst, &lcore_signals_));
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

bool Switch::takes_lent(int to) const {
  if (to < 0 || static_cast<size_t>(to) >= ports_.size() || ports_[to] == nullptr ||
      ports_[to]->is_guest())
    return false;
  return static_cast<const EthdevPort&>(*ports_[to]).lent() != LentPolicy::kCopy;
}

void Switch::update_lending() {
  for (size_t i = 0; i < ports_.size(); ++i) {
    if (ports_[i] == nullptr || !ports_[i]->is_guest()) continue;
    auto& guest = static_cast<GuestPort&>(*ports_[i]);
    if (!guest.config().vhost.zero_copy) continue;
    bool lend = false;
    if (forwarding_->mode == ForwardingMode::kBridge) {
      for (size_t to = 0; to < ports_.size() && !lend; ++to) lend = to != i && takes_lent(to);
    } else {
      lend = takes_lent(forwarding_->xconnect_peer[i]);
    }
    if (lend == guest.device().lending()) continue;
    guest.set_lending(lend);
    if (lend)
      SWITCH_LOG(INFO, "port %s: zero-copy: lending, an output takes lent buffers as they are",
                 guest.name().c_str());
    else
      SWITCH_LOG(WARNING,
                 "port %s: zero-copy: copying, no output takes lent buffers as they are (guests "
                 "and copying NICs copy them anyway)",
                 guest.name().c_str());
  }
}

Switch::~Switch() {
  {
    // librte_vhost may call a guest's release_lent until its socket is gone: from now on it
    // finds no lcores to wake.
    std::lock_guard lock(release_mutex_);
    lcores_.clear();
  }
  for (auto& port : detached_) ports_.push_back(std::move(port));
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
  for (const NodePool& p : pools_) rte_mempool_free(p.pool);
  if (gso_pool_ != nullptr) rte_mempool_free(gso_pool_);
}

void Switch::run(const std::atomic<bool>& stop, const std::function<void()>& control) {
  for (const auto& port : ports_)
    if (port != nullptr && port->is_guest()) static_cast<GuestPort*>(port.get())->set_enabled(true);

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
    if (port != nullptr && port->is_guest())
      static_cast<GuestPort*>(port.get())->set_enabled(false);
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
    if (port != nullptr && port->is_guest() &&
        static_cast<const GuestPort&>(*port).config().vhost.zero_copy)
      static_cast<GuestPort&>(*port).reap_orphans();
  place_by_node();
}

void Switch::place_by_node() {
  std::vector<QueueLoad> queues;
  std::vector<const RxSlot*> slots;
  std::vector<bool> takes(lcores_.size());
  std::vector<int> nodes(lcores_.size());
  for (size_t i = 0; i < lcores_.size(); ++i) {
    takes[i] = takes_auto_rx(i);
    nodes[i] = lcore_node(i);
    for (const RxSlot& s : lcores_[i]->poller().slots()) {
      QueueLoad q;
      q.lcore = i;
      q.pinned = !takes[i];
      q.node = port_node(s.port->index());
      queues.push_back(q);
      slots.push_back(&s);
    }
  }
  const std::vector<size_t> placement = assign_to_nodes(queues, takes, nodes);
  std::vector<RxMove> moves;
  for (size_t q = 0; q < queues.size(); ++q) {
    const RxSlot& s = *slots[q];
    const size_t from = queues[q].lcore;
    const int node = queues[q].node;
    if (placement[q] != from) {
      moves.push_back({s.port->index(), s.queue, from, placement[q]});
      SWITCH_LOG(INFO, "port %s queue %u is on NUMA node %d: moved from lcore %u to lcore %u",
                 s.port->name().c_str(), s.queue, node, lcores_[from]->lcore(),
                 lcores_[placement[q]]->lcore());
    } else if (node != kAnyNode && nodes[from] != kAnyNode && node != nodes[from] &&
               cross_node_warned_
                   .insert(s.port->name() + ":" + std::to_string(s.queue) + ":" +
                           std::to_string(node))
                   .second) {
      SWITCH_LOG(WARNING, "port %s queue %u is on NUMA node %d but polled by lcore %u on node %d%s",
                 s.port->name().c_str(), s.queue, node, lcores_[from]->lcore(), nodes[from],
                 queues[q].pinned ? " (placed there by the file)"
                                  : ": no lcore with rx: auto on its node");
    }
  }
  std::string error;
  if (!moves.empty() && !move_rx(moves, &error))
    SWITCH_LOG(ERR, "rx queues not moved to their NUMA node: %s", error.c_str());
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

int Switch::port_index(const std::string& name) const {
  for (size_t i = 0; i < ports_.size(); ++i)
    if (ports_[i] != nullptr && ports_[i]->name() == name) return static_cast<int>(i);
  return -1;
}

Config Switch::running_config() const {
  Config running = config_;
  running.ports.clear();
  running.forwarding.pairs.clear();
  for (size_t i = 0; i < ports_.size(); ++i) {
    if (ports_[i] == nullptr) continue;
    running.ports.push_back(port_configs_[i]);
    const int peer = forwarding_->xconnect_peer[i];
    if (forwarding_->mode == ForwardingMode::kXconnect && peer > static_cast<int>(i))
      running.forwarding.pairs.emplace_back(ports_[i]->name(), ports_[peer]->name());
  }
  return running;
}

bool Switch::apply_to_lcores(const std::function<LcoreChange(const LcoreLoop&)>& change_for,
                             std::string* error) {
  bool all = true;
  std::vector<LcoreLoop*> posted;
  for (const auto& loop : lcores_) {
    if (loop->post(change_for(*loop), kApplyTimeoutMs)) {
      posted.push_back(loop.get());
    } else {
      all = false;
      *error = "lcore " + std::to_string(loop->lcore()) + " did not take the previous change";
    }
  }
  for (LcoreLoop* loop : posted) {
    if (!loop->wait_applied(kApplyTimeoutMs)) {
      all = false;
      *error = "lcore " + std::to_string(loop->lcore()) + " did not take the change in " +
               std::to_string(kApplyTimeoutMs) + " ms";
    }
  }
  return all;
}

const Forwarding* Switch::next_forwarding(const std::function<void(Forwarding&)>& edit, int leaving,
                                          const VlanMap** vlans, std::string* error) {
  auto next = std::make_unique<Forwarding>(*forwarding_);
  next->xconnect_peer.resize(ports_.size(), -1);
  edit(*next);
  *vlans = nullptr;
  if (bridge_ != nullptr) {
    std::vector<const VlanConfig*> present;
    for (size_t i = 0; i < ports_.size(); ++i)
      present.push_back(ports_[i] != nullptr && static_cast<int>(i) != leaving
                            ? &port_configs_[i].vlan
                            : nullptr);
    std::optional<VlanMap> map = VlanMap::create(present, error);
    if (!map) return nullptr;
    *vlans = bridge_->publish_vlans(std::move(*map));
  }
  retired_forwarding_.push_back(std::move(forwarding_));
  forwarding_ = std::move(next);
  return forwarding_.get();
}

void Switch::retire_forwarding() {
  retired_forwarding_.clear();
  if (bridge_ != nullptr) bridge_->retire_vlans();
}

bool Switch::mbufs_for(const PortConfig& port, rte_mempool* pool, std::string* error) const {
  const uint64_t lcores = plan_.lcores.size();
  const uint64_t needed = port.type == PortType::kEthdev
                              ? uint64_t{port.queues} * port.rx_descriptors +
                                    lcores * (port.tx_descriptors + config_.burst)
                              : uint64_t{port.queues} * 2 * config_.burst + lcores * config_.burst;
  // What the lcores' caches may hold besides, as the plan sizes pools.
  const uint64_t spare = (lcores + 1) * kMempoolCache * 3 / 2;
  const uint64_t available = rte_mempool_avail_count(pool);
  if (available >= needed + spare) return true;
  *error = std::string("the mbuf pool ") + pool->name + " has " + std::to_string(available) +
           " mbufs free, the port needs " + std::to_string(needed) + " and " +
           std::to_string(spare) +
           " are kept for the lcores' caches (set mbufs: in the configuration)";
  return false;
}

rte_mempool* Switch::pool_for_node(int node) const {
  for (const NodePool& p : pools_)
    if (p.node == node) return p.pool;
  return nullptr;
}

rte_mempool* Switch::pool_for_added(const PortConfig& port) const {
  rte_mempool* pool = nullptr;
  if (port.type == PortType::kEthdev)
    pool = pool_for_node(system_numa_topology().node_of_device(port.device));
  return pool != nullptr ? pool : pools_.front().pool;
}

int Switch::port_node(uint16_t index) const {
  const Port* port = ports_[index].get();
  if (port == nullptr) return kAnyNode;
  if (port->is_guest()) return static_cast<const GuestPort*>(port)->numa_node();
  const int node = rte_eth_dev_socket_id(static_cast<const EthdevPort*>(port)->port_id());
  return node >= 0 ? node : kAnyNode;
}

std::optional<uint16_t> Switch::add_port(const PortConfig& port, const std::string& peer,
                                         std::string* error,
                                         const std::vector<std::optional<unsigned>>* rx_lcores) {
  std::unique_lock lock(topology_mutex_);
  int peer_index = -1;
  if (!peer.empty()) {
    if (forwarding_->mode != ForwardingMode::kXconnect) {
      *error = "--peer: only in xconnect mode (forwarding.mode is bridge)";
      return std::nullopt;
    }
    peer_index = port_index(peer);
    if (peer_index < 0) {
      *error = "--peer: no port named " + peer;
      return std::nullopt;
    }
    if (forwarding_->xconnect_peer[peer_index] >= 0) {
      *error = "--peer: " + peer + " is paired with " +
               ports_[forwarding_->xconnect_peer[peer_index]]->name();
      return std::nullopt;
    }
  }
  rte_mempool* pool = pool_for_added(port);
  if (!mbufs_for(port, pool, error)) return std::nullopt;
  // The first free index: a deleted port's, or a new one.
  uint16_t index = 0;
  while (index < ports_.size() && ports_[index] != nullptr) ++index;
  if (index == ports_.size()) {
    ports_.emplace_back();
    port_configs_.emplace_back();
  }
  port_configs_[index] = port;
  if (!create_port(index, pool, error)) {
    port_configs_[index] = PortConfig{};
    *error = port.name + ": " + *error;
    return std::nullopt;
  }
  Port& created = *ports_[index];
  if (!created.is_guest()) {
    // Guest memory is DMA-mapped at start for the NICs there were: lent buffers are copied
    // toward a NIC added later if it DMAs.
    auto& nic = static_cast<EthdevPort&>(created);
    nic.set_lent(lent_policy(nic.dma(), nic.multi_segs(), false));
  }

  // Every lcore gets an output to the port (and the forwarding table that names it) before any
  // lcore receives from it.
  const VlanMap* vlans = nullptr;
  const Forwarding* next = next_forwarding(
      [&](Forwarding& f) {
        if (peer_index < 0) return;
        f.xconnect_peer[index] = peer_index;
        f.xconnect_peer[peer_index] = index;
      },
      -1, &vlans, error);
  if (next == nullptr) {
    ports_[index].reset();
    port_configs_[index] = PortConfig{};
    return std::nullopt;
  }
  bool applied = apply_to_lcores(
      [&](const LcoreLoop& loop) {
        LcoreChange change;
        change.add_outputs.emplace_back(index, tx_output(created, loop.slot()));
        change.forwarding = next;
        change.vlans = vlans;
        return change;
      },
      error);
  // Its rx queues, each to the lcore (with rx: auto) polling the fewest, among those on its NUMA
  // node where there are any (a guest's node is known once it connects: place_by_node).
  std::vector<std::vector<RxSlot>> rx(lcores_.size());
  std::vector<size_t> load(lcores_.size());
  for (size_t i = 0; i < lcores_.size(); ++i) load[i] = lcores_[i]->poller().slots().size();
  const bool none_auto = std::none_of(auto_rx_.begin(), auto_rx_.end(), [](bool b) { return b; });
  const int node = port_node(index);
  bool local = false;
  for (size_t i = 0; i < lcores_.size(); ++i)
    local = local || ((auto_rx_[lcores_[i]->slot()] || none_auto) && node != kAnyNode &&
                      lcore_node(i) == node);
  for (uint16_t q = 0; q < created.rx_queue_count(); ++q) {
    // The lcore id the file lists it on, or -1.
    const int64_t listed = rx_lcores != nullptr && q < rx_lcores->size() && (*rx_lcores)[q]
                               ? static_cast<int64_t>(*(*rx_lcores)[q])
                               : -1;
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < lcores_.size(); ++i) {
      const bool takes = listed >= 0 ? lcores_[i]->lcore() == static_cast<unsigned>(listed)
                                     : (auto_rx_[lcores_[i]->slot()] || none_auto) &&
                                           (!local || lcore_node(i) == node);
      if (takes && (best == SIZE_MAX || load[i] < load[best])) best = i;
    }
    if (best == SIZE_MAX) best = 0;  // a listed lcore is a forwarding lcore (plan_reload)
    RxSlot slot;
    slot.port = &created;
    slot.queue = q;
    slot.weight = port.weight;
    rx[best].push_back(slot);
    ++load[best];
  }
  applied = applied && apply_to_lcores(
                           [&](const LcoreLoop& loop) {
                             LcoreChange change;
                             for (size_t i = 0; i < lcores_.size(); ++i)
                               if (lcores_[i].get() == &loop) change.add_rx = rx[i];
                             return change;
                           },
                           error);
  if (applied) retire_forwarding();
  update_lending();
  if (created.is_guest()) static_cast<GuestPort&>(created).set_enabled(true);
  topology_generation_.fetch_add(1, std::memory_order_release);
  SWITCH_LOG(INFO, "port %s added (index %u)%s", port.name.c_str(), index,
             applied ? "" : ", but an lcore has not taken it yet");
  if (!applied) *error = "added, but " + *error;
  return applied ? std::optional<uint16_t>(index) : std::nullopt;
}

bool Switch::del_port(const std::string& name, const std::function<void(uint16_t)>& last_look,
                      std::string* error) {
  std::unique_lock lock(topology_mutex_);
  const int found = port_index(name);
  if (found < 0) {
    *error = "no port named " + name;
    return false;
  }
  const auto index = static_cast<uint16_t>(found);
  // 1. No lcore polls it: nothing from it is forwarded or learned any more.
  if (!apply_to_lcores(
          [&](const LcoreLoop&) {
            LcoreChange change;
            change.stop_polling = index;
            return change;
          },
          error)) {
    return false;
  }
  // 2. Its MAC entries go: lookups from the next pass on do not find it.
  if (bridge_ != nullptr) bridge_->flush_port(index);
  // 3. Then its outputs and the tables that name it.
  const VlanMap* vlans = nullptr;
  const Forwarding* next = next_forwarding(
      [&](Forwarding& f) {
        const int peer = f.xconnect_peer[index];
        if (peer >= 0) f.xconnect_peer[peer] = -1;
        f.xconnect_peer[index] = -1;
      },
      index, &vlans, error);
  if (next == nullptr) return false;  // a map that only loses a port is valid: not seen
  const bool applied = apply_to_lcores(
      [&](const LcoreLoop&) {
        LcoreChange change;
        change.drop_output = index;
        change.forwarding = next;
        change.vlans = vlans;
        return change;
      },
      error);
  if (applied) last_look(index);  // no lcore counts for it any more
  std::unique_ptr<Port> port = std::move(ports_[index]);
  port_configs_[index] = PortConfig{};
  update_lending();
  topology_generation_.fetch_add(1, std::memory_order_release);
  if (!applied) {
    detached_.push_back(std::move(port));
    return false;
  }
  retire_forwarding();
  if (!port->is_guest())
    for (uint16_t q = 0; q < port->tx_queue_count(); ++q) (void)port->tx_done_cleanup(q);
  port.reset();  // a guest's socket is unregistered; a NIC stopped and closed
  SWITCH_LOG(INFO, "port %s deleted", name.c_str());
  return true;
}

bool Switch::add_pair(const std::string& a, const std::string& b, std::string* error) {
  if (forwarding_->mode != ForwardingMode::kXconnect) {
    *error = "only in xconnect mode (forwarding.mode is bridge)";
    return false;
  }
  for (const std::string& n : {a, b}) {
    const int i = port_index(n);
    if (i < 0) {
      *error = "no port named " + n;
      return false;
    }
    if (forwarding_->xconnect_peer[i] >= 0) {
      *error = n + " is paired with " + ports_[forwarding_->xconnect_peer[i]]->name();
      return false;
    }
  }
  std::vector<std::pair<std::string, std::string>> pairs = running_config().forwarding.pairs;
  pairs.emplace_back(a, b);
  return set_pairs(pairs, error);
}

bool Switch::set_pairs(const std::vector<std::pair<std::string, std::string>>& pairs,
                       std::string* error) {
  std::unique_lock lock(topology_mutex_);
  std::vector<int> peer(ports_.size(), -1);
  for (const auto& [a, b] : pairs) {
    const int ia = port_index(a);
    const int ib = port_index(b);
    if (ia < 0 || ib < 0) {
      *error = "no port named " + (ia < 0 ? a : b);
      return false;
    }
    if (ia == ib || peer[ia] >= 0 || peer[ib] >= 0) {
      *error = "a port may be in one pair only, and not with itself: " + a + ", " + b;
      return false;
    }
    peer[ia] = ib;
    peer[ib] = ia;
  }
  const VlanMap* vlans = nullptr;
  const Forwarding* next =
      next_forwarding([&](Forwarding& f) { f.xconnect_peer = peer; }, -1, &vlans, error);
  if (next == nullptr) return false;
  const bool applied = apply_to_lcores(
      [&](const LcoreLoop&) {
        LcoreChange change;
        change.forwarding = next;
        return change;
      },
      error);
  if (applied) retire_forwarding();
  update_lending();
  return applied;
}

bool Switch::move_rx(const std::vector<RxMove>& moves, std::string* error) {
  std::unique_lock lock(topology_mutex_);
  std::vector<std::vector<RxSlot>> released(lcores_.size());
  for (std::vector<RxSlot>& r : released) r.reserve(moves.size());
  bool applied = apply_to_lcores(
      [&](const LcoreLoop& loop) {
        LcoreChange change;
        for (const RxMove& m : moves)
          if (lcores_[m.from].get() == &loop) change.release_rx.emplace_back(m.port, m.queue);
        for (size_t i = 0; i < lcores_.size(); ++i)
          if (lcores_[i].get() == &loop) change.released = &released[i];
        return change;
      },
      error);
  if (!applied) return false;
  std::vector<std::vector<RxSlot>> joining(lcores_.size());
  for (const RxMove& m : moves)
    for (const RxSlot& s : released[m.from])
      if (s.port->index() == m.port && s.queue == m.queue) joining[m.to].push_back(s);
  applied = apply_to_lcores(
      [&](const LcoreLoop& loop) {
        LcoreChange change;
        for (size_t i = 0; i < lcores_.size(); ++i)
          if (lcores_[i].get() == &loop) change.add_rx = joining[i];
        return change;
      },
      error);
  topology_generation_.fetch_add(1, std::memory_order_release);
  return applied;
}

RunningSwitch Switch::running_state() const {
  RunningSwitch state;
  state.config = running_config();
  for (const auto& loop : lcores_) {
    state.busy_poll.emplace_back(loop->lcore(), loop->busy_poll_us());
    for (const RxSlot& s : loop->poller().slots())
      state.queues.push_back({s.port->name(), s.queue, loop->lcore(), s.weight});
  }
  return state;
}

}  // namespace vqs::app
