// SPDX-License-Identifier: BSD-3-Clause
// One vhost-user socket and the virtio-net device behind it, shared by net_vqs and vqswitch:
// librte_vhost runs the control plane, this class keeps our virtqueues in step and admits the
// datapath only while a queue's state is complete. Its callbacks run on librte_vhost's thread,
// often under its locks; see docs/architecture.md, "Control plane".
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "datapath/dequeue.h"
#include "datapath/zero_copy_tracker.h"
#include "ring/guest_mapping.h"
#include "ring/guest_memory.h"
#include "ring/notify_policy.h"
#include "ring/placement_probe.h"
#include "ring/virtqueue.h"
#include "vhost/queue_gate.h"
#include "vhost/socket_access.h"
#include "vhost/vhost_port_options.h"
#include "vhost/vhost_user_request.h"
#include "vhost/vring_dirty_log.h"
#include "vhost/vring_index.h"

namespace vqs {

// What the device serves (VhostPortOptions: what its user sets) and how it fits its owner.
struct VhostDeviceOptions : VhostPortOptions {
  std::string path;  // the vhost-user socket
  // Optional: asks whoever holds lent buffers to free those it is done with (the switch has its
  // lcores clean their NIC tx queues). Called on librte_vhost's thread while a stopping guest TX
  // vring waits for its lent chains, again every few ms of the wait; must not block. The PMD
  // leaves it unset: the application owns its tx queues.
  std::function<void()> release_lent;
  // Optional, with zero-copy: registers our mapping of the guest's memory for DMA while it lives
  // (the switch: as external memory, mapped for its NICs, in IOVA-as-VA mode). Without it, or
  // when it refuses a region, lent segments carry RTE_BAD_IOVA. Must outlive the device.
  DmaRegistrar* dma_registrar = nullptr;
  // With zero-copy: lend only from memory the registrar registered, copy everything otherwise.
  // For an owner that cannot copy for the outputs that DMA (the PMD: the application sends
  // wherever it likes); the switch copies for them itself.
  bool lend_only_dma_ready = false;
  // Optional: the clock of the rings' interrupt rechecks (VirtQueue::Setup::clock). The switch
  // gives its lcores' last TSC reading, so that one rdtsc a pass serves every ring's decision;
  // unset, each decision reads the TSC (the PMD: one decision a burst call). Without a TSC
  // (ring/tsc_clock.h) the owner leaves it unset: rechecks are then off.
  SplitRing::Clock decision_clock = nullptr;
};

// The virtio features we offer, and the vhost-user protocol features we handle.
uint64_t offered_virtio_features(bool tso, bool zero_copy);
uint64_t handled_protocol_features();

class VhostDevice {
 public:
  // Told about state changes, on librte_vhost's thread or the thread calling set_datapath_enabled,
  // never while our lock is held.
  class Listener {
   public:
    virtual ~Listener() = default;
    virtual void on_link_change(bool up) = 0;
    virtual void on_vring_state(uint16_t vring, bool enabled) = 0;
  };

  // Registers the socket with librte_vhost and starts it (listening, or connecting in client
  // mode). nullptr with `error` set when librte_vhost refuses.
  static std::unique_ptr<VhostDevice> create(const VhostDeviceOptions& options, Listener* listener,
                                             std::string* error);
  ~VhostDevice();  // unregisters the socket; the datapath must have stopped calling in

  VhostDevice(const VhostDevice&) = delete;
  VhostDevice& operator=(const VhostDevice&) = delete;

  const std::string& path() const { return options_.path; }
  uint16_t queue_pairs() const { return options_.queue_pairs; }
  bool tso() const { return options_.tso; }
  uint16_t vring_count() const { return static_cast<uint16_t>(2 * options_.queue_pairs); }
  // Guest connected and its device running.
  bool link_up() const { return link_up_.load(std::memory_order_acquire); }
  // Frontends connected to the socket now, admitted or not (control plane: takes our mutex).
  size_t frontend_connections();
  uint64_t negotiated_features() const { return features_.load(std::memory_order_acquire); }
  // Live migration: the frontend logs dirty pages (VHOST_F_LOG_ALL), and so do our writes.
  bool dirty_logging() const { return (negotiated_features() >> kVhostFLogAll) & 1; }
  // The NUMA node of the guest's memory (its largest region), from when it connected or last
  // changed its memory table; -1 before, or where the kernel cannot tell.
  int memory_node() const { return memory_node_.load(std::memory_order_acquire); }

  // The owner's switch for the whole datapath (the ethdev port started / stopped). Disabling
  // returns once no lcore is inside a burst.
  void set_datapath_enabled(bool enabled);

  // With options.zero_copy: whether guest TX lends at all (true at creation). The owner turns it
  // off while every output it sends this guest's packets to would copy them anyway (another
  // guest, a NIC that takes no lent buffers): lending there only adds its bookkeeping to the
  // copy. Packets are then copied (counted as zero_copy_copied); chains lent before go back as
  // their mbufs are freed. Any thread; the next burst follows it.
  void set_lending(bool lend) { lending_on_.store(lend, std::memory_order_relaxed); }
  bool lending() const { return lending_on_.load(std::memory_order_relaxed); }

  // Datapath, one lcore per vring, the bursts both products run (vhost_burst.cc). Each does
  // nothing while the vring may not be used (no guest, or a message being handled).
  // From guest TX queue `queue`: up to max_packets packets (at least one, then up to max_bytes)
  // into mbufs from `pool`, copied or lent as the options say. On queue 0, a RARP the frontend
  // asked for (request_rarp) comes first.
  BurstResult receive_burst(uint16_t queue, rte_mempool* pool, rte_mbuf** pkts,
                            uint16_t max_packets, uint32_t max_bytes);
  // To guest RX queue `queue`: frees the mbufs it consumed (delivered, or dropped and counted)
  // and returns how many; the rest found no guest buffer and stay the caller's. With
  // `flush_deferred`, notifications that coalescing deferred go first if their time has come.
  uint16_t send_burst(uint16_t queue, rte_mbuf** pkts, uint16_t count, bool flush_deferred);
  // Sends guest RX queue `queue`'s deferred notifications whose time has come. Returns whether
  // some are still owed (the caller looks again later); while a message is being handled, whether
  // a guest is there at all.
  bool flush_notifications(uint16_t queue, uint64_t now_tsc);

  // The queue of `vring` to burst on (see vring_index.h), or nullptr when it may not be used now;
  // leave() after. For tests and tools: the products use the bursts above.
  VirtQueue* enter(uint16_t vring) {
    Vring& v = vrings_[vring];
    return v.gate.enter() ? &v.queue : nullptr;
  }
  void leave(uint16_t vring) { vrings_[vring].gate.leave(); }
  // Whether enter() would admit the datapath to `vring` now (a hint: it may change at any time).
  bool vring_ready(uint16_t vring) const { return vrings_[vring].gate.is_open(); }
  // Whether the served guest has enabled `vring`, whatever our datapath's state. Control plane
  // (takes our mutex, which listener calls are made without).
  bool vring_enabled(uint16_t vring);

  // Guest kicks as a wake-up source (rx interrupts). The owner hands us an epoll fd per vring
  // that stays the same for the application; we keep the vring's current kickfd registered in it
  // as guests come, go and change fds (-1: none). With zero-copy, completions of lent chains
  // wake it too (see arm_kicks). Control plane.
  void set_kick_waiter(uint16_t vring, int epoll_fd);
  // Datapath, by the lcore that polls the vring: ask the guest to kick (before sleeping) or not.
  // Arming drains the kickfd and kicks ourselves if the guest posted meanwhile; with zero-copy a
  // lent chain's completion wakes the sleeper too. Kept across reconnects. False when no guest is
  // attached.
  bool arm_kicks(uint16_t vring, bool armed);

  // Counters of a vring, kept across guest reconnects. Read from any thread (monitoring): the
  // values may be a burst old.
  const QueueStats& stats(uint16_t vring) const { return vrings_[vring].queue.stats(); }
  // Guest TX vring `vring` with zero-copy: chains lent now and the limit (0 without zero-copy).
  uint16_t zero_copy_in_flight(uint16_t vring) const {
    return vrings_[vring].zero_copy ? vrings_[vring].zero_copy->in_flight() : 0;
  }
  uint16_t zero_copy_limit(uint16_t vring) const {
    return vrings_[vring].zero_copy ? vrings_[vring].zero_copy->limit() : 0;
  }
  bool zero_copy_enabled(uint16_t vring) const { return vrings_[vring].zero_copy != nullptr; }
  // Whether the guest's CPU shares a cache with the lcore polling `vring`'s queue pair, as its
  // guest TX ring's placement probe measured it (desc_release or buffer_release auto, split
  // rings; otherwise not measured). From any thread.
  PlacementProbe::Reading guest_placement(uint16_t vring) const {
    return vrings_[vring | 1].queue.ring().placement().reading();
  }
  // Whether the guest sends frames of its own on `vring`'s queue pair rather than forwarding
  // ours (buffer_release auto's second gate, sender_gate.h; false until a window is seen).
  bool guest_sends_own(uint16_t vring) const {
    return vrings_[vring | 1].queue.sender_gate().sends_own();
  }
  // Times a completion woke the vring's sleeping owner (see arm_kicks).
  uint64_t zero_copy_wakeups(uint16_t vring) const {
    return vrings_[vring].zero_copy ? vrings_[vring].zero_copy->wakes() : 0;
  }
  uint32_t zero_copy_min_len() const { return options_.zero_copy_min_len; }
  // Chains of `vring` completed after their session ended (ZeroCopyTracker::orphans_reaped).
  uint64_t zero_copy_orphans(uint16_t vring) const {
    return vrings_[vring].zero_copy ? vrings_[vring].zero_copy->orphans_reaped() : 0;
  }
  // Control plane, now and then: with the guest gone, frees the slots of lent chains completed
  // since, so that the memory they kept (mapping, DMA registration) goes without waiting for the
  // guest to come back. Returns the chains still lent.
  uint32_t reap_orphans();
  // Vrings the guest enabled beyond the queue pairs we serve (a configuration mismatch that
  // GET_QUEUE_NUM does not prevent with a frontend that does not ask it, e.g. virtio_user).
  uint64_t unserved_vring_enables() const { return unserved_vring_enables_.load(); }
  // SET_MEM_TABLE messages refused before librte_vhost mapped them: a region past the end of its
  // file (its first touch would raise SIGBUS), or fds that do not match the regions.
  uint64_t refused_memory_tables() const { return refused_memory_tables_.load(); }
  void count_refused_memory_table() { refused_memory_tables_.fetch_add(1); }
  // After a live migration, for a guest that does not announce itself (no GUEST_ANNOUNCE), the
  // frontend asks us (SEND_RARP) to send a RARP from its MAC so that switches learn where it is
  // now. Control plane; the next receive burst of queue 0 puts it first (see receive_burst).
  void request_rarp(const uint8_t mac[6]);
  // RARPs put into receive bursts, and attempts that found the mbuf pool empty (each tried
  // again at the next burst).
  uint64_t rarps_sent() const { return rarps_sent_.load(std::memory_order_relaxed); }
  uint64_t rarps_failed() const { return rarps_failed_.load(std::memory_order_relaxed); }
  // vhost-user requests refused as outside what we negotiate (served_request).
  uint64_t refused_messages() const { return refused_messages_.load(); }
  void count_refused_message() { refused_messages_.fetch_add(1); }
  // Frontends refused because another one was connected (see admit()).
  uint64_t refused_frontends() const { return refused_frontends_.load(); }
  // At each message: whether connection `vid` may speak. One frontend per port: the first to send
  // is admitted, a later one refused while it is connected (docs/architecture.md, "Control plane").
  bool admit(int vid);

  // librte_vhost callbacks (static trampolines find the device by socket path).
  int on_new_connection(int vid);
  void on_destroy_connection(int vid);
  int on_new_device(int vid);
  void on_destroy_device(int vid);
  void on_vring_state_changed(int vid, uint16_t vring, bool enabled);
  // Before (`after` false) and after librte_vhost handles a message. True when we answer it
  // ourselves instead (GET_QUEUE_NUM: the queue pairs we serve): *reply is the u64 to send back.
  bool on_message(int vid, uint32_t request, bool after, uint64_t* reply);

 private:
  struct alignas(64) Vring {
    QueueGate gate;
    VirtQueue queue;
    bool enabled = false;  // by the guest (SET_VRING_ENABLE / ready)
    bool started = false;  // our VirtQueue attached to the guest's ring
    int kickfd = -1;       // the guest's, while started
    int waiter_epfd = -1;  // the owner's epoll fd that kickfd is registered in
    std::atomic<bool> kicks_armed{false};
    ZeroCopyTracker::Handle zero_copy;  // guest TX vrings, with options.zero_copy
    LendPolicy lending;                 // guest TX vrings: how queue lends, set at each start
    VringDirtyLog dirty_log;            // given to queue while the frontend logs
    // Guest TX vring 0: a RARP owed on the guest's behalf (SEND_RARP), its MAC in the low 48
    // bits with kRarpPending set; 0: none.
    std::atomic<uint64_t> pending_rarp{0};
    // The vring base handed back to librte_vhost at the last stop (avail in the high half, used
    // in the low one; -1: none yet): a frontend that gives it back is not second-guessed.
    int64_t handed_base = -1;
  };
  static constexpr uint64_t kRarpPending = 1ull << 48;
  // Stopping a guest TX vring with chains lent: waits (bounded) for their completions and returns
  // them to the guest before the ring's indices are handed back.
  void return_lent_locked(Vring& v);
  // At teardown, after unregistering: frees each tracker once its lent chains completed (waited
  // for, bounded); one still lending is left allocated, with its mappings, not freed under a
  // consumer.
  void release_trackers_at_teardown();

  explicit VhostDevice(const VhostDeviceOptions& options, Listener* listener);
  // Brings every vring to the state the flags below ask for. Called with mutex_ held.
  void apply_locked();
  bool start_vring_locked(uint16_t index);
  void stop_vring_locked(uint16_t index);
  // Reads librte_vhost's memory table into memory_ (and, with zero-copy, our own mapping of it).
  // Unless `force`, a table that did not change since the last load is kept as it is: a message
  // that does not change memory must not remap it (with zero-copy, an mmap and a DMA
  // registration of every region).
  bool load_memory_locked(bool force);
  void watch_kickfd_locked(Vring& v, bool watch);
  // Wakes whoever sleeps on a guest's kickfd (the vring's owner), without ever blocking.
  static void kick_without_blocking(int kickfd);
  // With zero-copy: the tracker's completion eventfd in the owner's epoll fd as well.
  void watch_completions_locked(Vring& v, bool watch);

  const VhostDeviceOptions options_;
  Listener* const listener_;
  std::unique_ptr<Vring[]> vrings_;

  bool registered_ = false;  // listed and registered with librte_vhost

  std::mutex mutex_;  // control plane only: librte_vhost's thread vs the owner's thread
  std::map<int, std::vector<bool>> enabled_by_vid_;  // per connection: vrings the guest enabled
  std::set<int> admitted_;                           // connections that passed admit()
  // Connections whose dirty log librte_vhost has mapped: a SET_LOG_BASE it took, no RESET_OWNER
  // since. RESET_OWNER unmaps the log but leaves librte_vhost's pointer to it, which its
  // rte_vhost_log_* calls would then mark.
  std::set<int> log_mapped_;
  int vid_ = -1;                        // the device being served
  bool running_ = false;                // between new_device and destroy_device
  bool suspended_ = false;              // inside a message that changes what the rings point to
  bool datapath_enabled_ = false;       // the owner's switch
  std::atomic<bool> lending_on_{true};  // set_lending()
  GuestMemory memory_;
  GuestMapping* mapping_ = nullptr;  // with zero-copy: our own mapping behind memory_
  // With zero-copy, librte_vhost's own mapping, which its ring pointers point into.
  GuestMemory ring_memory_;
  // The table memory_ was loaded from, to tell whether a reload would change anything (the fd
  // too: librte_vhost may map a new file where it unmapped the old one).
  struct LoadedRegion {
    uint64_t guest_phys_addr, size, host_user_addr, mmap_size;
    int fd;
    bool operator==(const LoadedRegion&) const = default;
  };
  std::vector<LoadedRegion> loaded_table_;
  // While vrings stop together (one apply_locked), their waits for lent chains share one
  // deadline: a device stop costs librte_vhost's thread kLentStopWaitMs at most, not that per
  // vring. 0: no wait started yet.
  uint64_t lent_wait_deadline_ = 0;
  std::atomic<uint64_t> features_{0};
  std::atomic<int> memory_node_{-1};
  std::atomic<bool> link_up_{false};
  std::atomic<uint64_t> unserved_vring_enables_{0};
  std::atomic<uint64_t> refused_memory_tables_{0};
  std::atomic<uint64_t> refused_messages_{0};
  std::atomic<uint64_t> refused_frontends_{0};
  std::atomic<uint64_t> rarps_sent_{0};
  std::atomic<uint64_t> rarps_failed_{0};
};

}  // namespace vqs
