// SPDX-License-Identifier: BSD-3-Clause
// The bridge's MAC table: (MAC, VLAN) -> output port and last-seen time, shared by every
// forwarding lcore. Keys in an rte_hash (lock-free readers), port and time in an array indexed by
// key position, reused only once every reader was quiescent (rte_rcu_qsbr).
// See docs/architecture.md, "The switch".
#pragma once

#include <rte_branch_prediction.h>
#include <rte_hash.h>
#include <rte_rcu_qsbr.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

namespace vqs::app {

class MacTable {
 public:
  // `size`: keys the table holds (at least 8; DPDK rounds up to a power of two);
  // `readers`: slots 0..readers-1 of the threads that look up and learn.
  // nullptr with `error` when DPDK refuses.
  static std::unique_ptr<MacTable> create(uint32_t size, uint16_t readers, std::string* error);
  // Readers must have stopped (or be offline): their slots are put offline here.
  ~MacTable();
  MacTable(const MacTable&) = delete;
  MacTable& operator=(const MacTable&) = delete;

  // A key: the MAC's 6 bytes (byte i at bits 8i) and the VLAN, in 8 bytes.
  static uint64_t key(const uint8_t* mac, uint16_t vlan) {
    uint64_t k = 0;
    if constexpr (std::endian::native == std::endian::little) {
      // Two loads joined in a register: a 6-byte memcpy into `k` went through the stack, and
      // reading the 8 bytes back from two smaller stores stalls store forwarding (a third of
      // the bridge's cycles in VM-to-VM).
      uint32_t low;
      uint16_t high;
      std::memcpy(&low, mac, sizeof(low));
      std::memcpy(&high, mac + sizeof(low), sizeof(high));
      k = low | static_cast<uint64_t>(high) << 32;
    } else {
      for (int i = 0; i < 6; ++i) k |= static_cast<uint64_t>(mac[i]) << (8 * i);
    }
    return k | static_cast<uint64_t>(vlan) << 48;
  }

  // --- Reader side (forwarding lcore `slot`) ---
  // Before the first lookup of a batch: the slot goes online if it is not.
  void enter(uint16_t slot) {
    if (unlikely(!readers_[slot].online)) go_online(slot);
  }
  // The thread holds no position it looked up: call once per loop iteration.
  void quiescent(uint16_t slot) {
    if (readers_[slot].online) rte_rcu_qsbr_quiescent(qsbr_, slot);
  }
  // Before the thread sleeps or stops, so deletions are not held back by it.
  void offline(uint16_t slot);

  // Up to RTE_HASH_LOOKUP_BULK_MAX keys; positions[i] < 0 when keys[i] is absent.
  void lookup(const void** keys, uint32_t n, int32_t* positions) const {
    rte_hash_lookup_bulk(table_, keys, n, positions);
  }
  // The port of `key` found at `position`, or -1 while its learner has not filled it in.
  int32_t port(int32_t position, uint64_t key) const {
    const Entry& e = entries_[position];
    // Acquire pairs with the learner's release of the key after the port.
    if (e.key.load(std::memory_order_acquire) != key) return -1;
    return e.port.load(std::memory_order_relaxed);
  }

  enum class Learn : uint8_t { kKnown, kLearned, kMoved, kFull };
  // `key` seen on `port` at `now_tsc`; `position` from lookup() (negative: absent, added now and
  // set). Writes the shared entry only when it is new, moved, or its time is stale by a second.
  Learn learn(uint16_t slot, int32_t& position, uint64_t key, uint16_t port, uint64_t now_tsc) {
    if (position < 0) {
      Reader& r = readers_[slot];
      if (unlikely(!r.can_add || now_tsc < r.no_add_until_tsc)) return Learn::kFull;
      position = rte_hash_add_key(table_, &key);
      if (position < 0) {
        // Full: a flood of unknown sources would otherwise take the table's writer lock per
        // packet on every lcore. Try again a little later.
        r.no_add_until_tsc = now_tsc + full_backoff_tsc_;
        return Learn::kFull;
      }
    }
    Entry& e = entries_[position];
    if (e.key.load(std::memory_order_acquire) != key) {
      // New here (or another lcore is filling it in right now: either's values will do).
      e.port.store(port, std::memory_order_relaxed);
      e.seen.store(now_tsc, std::memory_order_relaxed);
      e.key.store(key, std::memory_order_release);
      return Learn::kLearned;
    }
    if (e.port.load(std::memory_order_relaxed) != port) {
      e.port.store(port, std::memory_order_relaxed);
      e.seen.store(now_tsc, std::memory_order_relaxed);
      return Learn::kMoved;
    }
    if (static_cast<int64_t>(now_tsc - e.seen.load(std::memory_order_relaxed)) > refresh_tsc_)
      e.seen.store(now_tsc, std::memory_order_relaxed);
    return Learn::kKnown;
  }

  // --- Control thread ---
  // Deletes the keys not seen for more than `max_idle_tsc`; returns how many.
  uint64_t age(uint64_t now_tsc, uint64_t max_idle_tsc);
  // Deletes every key; returns how many.
  uint64_t flush();
  // Deletes the keys whose port is `port`; returns how many.
  uint64_t remove_port(uint16_t port);
  // Calls `visit(key, port, seen_tsc)` for each key filled in.
  void for_each(const std::function<void(uint64_t, uint16_t, uint64_t)>& visit) const;
  // Keys in the table now (deleted ones awaiting their grace period not included).
  uint64_t size() const;

 private:
  MacTable() = default;
  static void on_reclaim(void* table, void* key_data);

  struct alignas(32) Entry {
    std::atomic<uint64_t> key{kNoKey};  // whose port and time these are
    std::atomic<uint64_t> seen{0};      // TSC
    std::atomic<uint16_t> port{0};
  };
  static constexpr uint64_t kNoKey = UINT64_MAX;  // VLAN bits 0xffff: never a key

  struct alignas(RTE_CACHE_LINE_SIZE) Reader {
    bool online = false;
    bool can_add = true;            // has an lcore id (rte_hash's add needs one)
    uint64_t no_add_until_tsc = 0;  // the table was full
  };

  void go_online(uint16_t slot);
  // `visit(key, entry)` for each key whose entry is filled in (control thread).
  void for_each_filled(const std::function<void(uint64_t, Entry&)>& visit) const;
  // Deletes the keys `doomed` picks (control thread); returns how many.
  uint64_t remove_if(const std::function<bool(const Entry&)>& doomed);

  rte_hash* table_ = nullptr;
  rte_rcu_qsbr* qsbr_ = nullptr;
  std::unique_ptr<Entry[]> entries_;  // by position, rte_hash_max_key_id() + 1
  std::unique_ptr<Reader[]> readers_;
  uint16_t reader_count_ = 0;
  int64_t refresh_tsc_ = 0;             // a second: how stale a last-seen time may get
  uint64_t full_backoff_tsc_ = 0;       // a millisecond
  std::atomic<uint64_t> deleted_{0};    // by age() and flush()
  std::atomic<uint64_t> reclaimed_{0};  // deleted and past their grace period
};

}  // namespace vqs::app
