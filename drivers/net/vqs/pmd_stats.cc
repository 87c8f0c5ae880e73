// SPDX-License-Identifier: BSD-3-Clause
// Basic stats and xstats: per-queue counters of the datapath, less the snapshot at the last reset.
#include <cstdio>
#include <iterator>

#include "pmd_port.h"

namespace vqs {
namespace {

// Per-queue values not subject to resets: guest TX zero-copy's settings and state (0 with
// zero-copy off), and where the guest's CPU is (0 while not measured).
struct Gauge {
  const char* name;
  uint64_t (*read)(const VhostDevice&, uint16_t vring);
};
constexpr Gauge kGauges[] = {
    {"zerocopy_in_flight",
     [](const VhostDevice& d, uint16_t v) -> uint64_t { return d.zero_copy_in_flight(v); }},
    {"zerocopy_limit",
     [](const VhostDevice& d, uint16_t v) -> uint64_t { return d.zero_copy_limit(v); }},
    {"zerocopy_min_len",
     [](const VhostDevice& d, uint16_t v) -> uint64_t {
       return d.zero_copy_enabled(v) ? d.zero_copy_min_len() : 0;
     }},
    // Counts since the port was created: lent chains that completed after their guest session
    // ended, so their descriptors went back to no ring.
    {"zerocopy_orphans",
     [](const VhostDevice& d, uint16_t v) -> uint64_t { return d.zero_copy_orphans(v); }},
    // The queue pair's placement probe (a release at auto, split rings): 1 when the guest's CPU
    // shares no cache with the polling lcore's; the time a line the guest wrote took to reach
    // us, averaged.
    {"guest_cache_far",
     [](const VhostDevice& d, uint16_t v) -> uint64_t { return d.guest_placement(v).far; }},
    {"guest_line_ns",
     [](const VhostDevice& d, uint16_t v) -> uint64_t { return d.guest_placement(v).line_ns; }},
    // 1 when the guest sent mostly frames of its own in the last window (buffer_release auto).
    {"guest_sends_own",
     [](const VhostDevice& d, uint16_t v) -> uint64_t { return d.guest_sends_own(v); }},
};
// Drops by every reason but kNoGuestBuffer: the PMD's tx burst hands such packets back to the
// caller instead of dropping them, so that counter would always read 0.
constexpr int kDropXstats = kDropReasonCount - 1;
constexpr unsigned kPerQueue =
    std::size(kQueueCounters) + std::size(kGauges) + kDropXstats + kSizeBucketCount;

// Port-level xstats, listed before the per-queue ones. Not subject to resets: they count
// configuration problems, which should stay visible until the port is closed.
struct PortCounter {
  const char* name;
  uint64_t (*read)(const VhostDevice&);
};

constexpr PortCounter kPortCounters[] = {
    // A frontend that never asks GET_QUEUE_NUM (or ignores the answer) enabled more queue pairs
    // than `queues`: their traffic is never served.
    {"unserved_vring_enables", [](const VhostDevice& d) { return d.unserved_vring_enables(); }},
    // A frontend sent a memory table whose regions reach past the end of their files.
    {"refused_memory_tables", [](const VhostDevice& d) { return d.refused_memory_tables(); }},
    // A frontend sent a request outside what we negotiate (GET_INFLIGHT_FD, ...), or a dirty log
    // that does not fit its file.
    {"refused_messages", [](const VhostDevice& d) { return d.refused_messages(); }},
    // A second frontend tried the port while one was connected.
    {"refused_frontends", [](const VhostDevice& d) { return d.refused_frontends(); }},
    // After a live migration, RARPs sent for the guest at its frontend's request (SEND_RARP),
    // and attempts that found the mbuf pool empty (tried again at the next burst).
    {"rarps_sent", [](const VhostDevice& d) { return d.rarps_sent(); }},
    {"rarps_failed", [](const VhostDevice& d) { return d.rarps_failed(); }},
    // A gauge: 1 while a live migration copies the guest's memory (its frontend logs dirty pages
    // and the device runs), as vqswitch's `show` marks a port migrating.
    {"migrating", [](const VhostDevice& d) { return uint64_t{d.link_up() && d.dirty_logging()}; }},
};

// Calls fn(name, value) for every port-level xstat, then fn(direction, ethdev queue, counter
// name, value since the last reset) for every per-queue one, in a fixed order.
template <typename PortFn, typename Fn>
void for_each_xstat(rte_eth_dev* dev, PortFn&& port_fn, Fn&& fn) {
  PmdPort* port = pmd_port(dev);
  for (const PortCounter& c : kPortCounters) port_fn(c.name, c.read(*port->device()));
  auto queue = [&](const char* dir, uint16_t q, uint16_t vring) {
    const QueueStats& now = port->device()->stats(vring);
    const QueueStats& base = port->reset_base(vring);
    for (const QueueCounter& c : kQueueCounters) fn(dir, q, c.name, now.*c.field - base.*c.field);
    for (const Gauge& g : kGauges) fn(dir, q, g.name, g.read(*port->device(), vring));
    char drop_name[32];  // "bad_offload_request_drops" is the longest
    for (int r = 0; r < kDropReasonCount; ++r) {
      const auto reason = static_cast<DropReason>(r);
      if (reason == DropReason::kNoGuestBuffer) continue;
      std::snprintf(drop_name, sizeof(drop_name), "%s_drops", drop_reason_name(reason));
      fn(dir, q, drop_name, now.dropped(reason) - base.dropped(reason));
    }
    for (int b = 0; b < kSizeBucketCount; ++b)
      fn(dir, q, size_bucket_name(static_cast<SizeBucket>(b)), now.sizes[b] - base.sizes[b]);
  };
  for (uint16_t q = 0; q < dev->data->nb_rx_queues; ++q) queue("rx", q, rx_vring(q));
  for (uint16_t q = 0; q < dev->data->nb_tx_queues; ++q) queue("tx", q, tx_vring(q));
}

unsigned xstat_count(rte_eth_dev* dev) {
  return std::size(kPortCounters) + (dev->data->nb_rx_queues + dev->data->nb_tx_queues) * kPerQueue;
}

}  // namespace

int pmd_stats_get(rte_eth_dev* dev, rte_eth_stats* stats) {
  PmdPort* port = pmd_port(dev);
  // What a vring counted since the last reset.
  struct Delta {
    uint64_t packets, bytes, drops, nombuf;
  };
  auto delta = [port](uint16_t vring) {
    const QueueStats& now = port->device()->stats(vring);
    const QueueStats& base = port->reset_base(vring);
    return Delta{now.packets - base.packets, now.bytes - base.bytes,
                 now.total_drops() - base.total_drops(),
                 now.mbuf_alloc_failures - base.mbuf_alloc_failures};
  };
  for (uint16_t q = 0; q < dev->data->nb_rx_queues; ++q) {
    const Delta d = delta(rx_vring(q));
    stats->ipackets += d.packets;
    stats->ibytes += d.bytes;
    stats->ierrors += d.drops;
    stats->rx_nombuf += d.nombuf;
    if (q < RTE_ETHDEV_QUEUE_STAT_CNTRS) {
      stats->q_ipackets[q] = d.packets;
      stats->q_ibytes[q] = d.bytes;
      stats->q_errors[q] = d.drops;
    }
  }
  for (uint16_t q = 0; q < dev->data->nb_tx_queues; ++q) {
    const Delta d = delta(tx_vring(q));
    stats->opackets += d.packets;
    stats->obytes += d.bytes;
    stats->oerrors += d.drops;
    if (q < RTE_ETHDEV_QUEUE_STAT_CNTRS) {
      stats->q_opackets[q] = d.packets;
      stats->q_obytes[q] = d.bytes;
    }
  }
  return 0;
}

int pmd_stats_reset(rte_eth_dev* dev) {
  PmdPort* port = pmd_port(dev);
  for (uint16_t v = 0; v < port->device()->vring_count(); ++v)
    port->reset_base(v) = port->device()->stats(v);
  return 0;
}

int pmd_xstats_reset(rte_eth_dev* dev) { return pmd_stats_reset(dev); }

int pmd_xstats_get_names(rte_eth_dev* dev, rte_eth_xstat_name* names, unsigned size) {
  const unsigned count = xstat_count(dev);
  if (names == nullptr || size < count) return static_cast<int>(count);
  unsigned i = 0;
  for_each_xstat(
      dev,
      [&](const char* name, uint64_t) {
        std::snprintf(names[i++].name, RTE_ETH_XSTATS_NAME_SIZE, "%s", name);
      },
      [&](const char* dir, uint16_t q, const char* name, uint64_t) {
        std::snprintf(names[i++].name, RTE_ETH_XSTATS_NAME_SIZE, "%s_q%u_%s", dir, q, name);
      });
  return static_cast<int>(count);
}

int pmd_xstats_get(rte_eth_dev* dev, rte_eth_xstat* xstats, unsigned size) {
  const unsigned count = xstat_count(dev);
  if (xstats == nullptr || size < count) return static_cast<int>(count);
  unsigned i = 0;
  auto put = [&](uint64_t value) {
    xstats[i].id = i;
    xstats[i].value = value;
    ++i;
  };
  for_each_xstat(
      dev, [&](const char*, uint64_t value) { put(value); },
      [&](const char*, uint16_t, const char*, uint64_t value) { put(value); });
  return static_cast<int>(count);
}

}  // namespace vqs
