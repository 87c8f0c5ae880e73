// SPDX-License-Identifier: BSD-3-Clause
#include "bridge/mac_table.h"

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_hash_crc.h>
#include <rte_lcore.h>
#include <rte_malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace vqs::app {

namespace {

// rte_hash's multi-writer add and its reclamation of deleted keys index per-lcore caches by
// rte_lcore_id(): a thread without an lcore id (LCORE_ID_ANY) would index out of bounds, so it
// registers for one.
bool ensure_lcore_id() { return rte_lcore_id() != LCORE_ID_ANY || rte_thread_register() == 0; }

// rte_hash's smallest: one bucket of 8 (RTE_HASH_BUCKET_ENTRIES, not in its public header).
constexpr uint32_t kMinTableSize = 8;

std::atomic<uint32_t> table_serial{0};  // rte_hash and its rings need unique names

// rte_hash compares keys of 16 bytes and more with vector code and any other length with
// memcmp(), a library call per candidate: ours are one word. (A function pointer, which DPDK
// says a secondary process cannot follow: no secondary process uses this table.)
int keys_differ(const void* a, const void* b, size_t /*len: always 8*/) {
  uint64_t x, y;
  std::memcpy(&x, a, sizeof(x));
  std::memcpy(&y, b, sizeof(y));
  return x != y;
}

}  // namespace

std::unique_ptr<MacTable> MacTable::create(uint32_t size, uint16_t readers, std::string* error) {
  if (readers == 0) {
    *error = "bridge: no forwarding lcores";
    return nullptr;
  }
  std::unique_ptr<MacTable> t(new MacTable());
  t->reader_count_ = readers;
  t->readers_ = std::make_unique<Reader[]>(readers);
  t->refresh_tsc_ = static_cast<int64_t>(rte_get_tsc_hz());
  t->full_backoff_tsc_ = rte_get_tsc_hz() / 1000;

  const size_t qsbr_size = rte_rcu_qsbr_get_memsize(readers);
  t->qsbr_ = static_cast<rte_rcu_qsbr*>(rte_zmalloc("l2br_qsbr", qsbr_size, RTE_CACHE_LINE_SIZE));
  if (t->qsbr_ == nullptr || rte_rcu_qsbr_init(t->qsbr_, readers) != 0) {
    *error = "bridge: cannot allocate the RCU state";
    return nullptr;
  }
  for (uint16_t i = 0; i < readers; ++i) rte_rcu_qsbr_thread_register(t->qsbr_, i);

  char name[RTE_HASH_NAMESIZE];
  std::snprintf(name, sizeof(name), "l2br%u", table_serial.fetch_add(1));
  rte_hash_parameters params{};
  params.name = name;
  params.entries = std::max(size, kMinTableSize);
  params.key_len = sizeof(uint64_t);
  params.hash_func = rte_hash_crc;
  params.socket_id = static_cast<int>(rte_socket_id());
  params.extra_flag =
      RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF | RTE_HASH_EXTRA_FLAGS_MULTI_WRITER_ADD;
  t->table_ = rte_hash_create(&params);
  if (t->table_ == nullptr) {
    *error = std::string("bridge: MAC table of ") + std::to_string(size) +
             " entries: " + rte_strerror(rte_errno);
    return nullptr;
  }
  rte_hash_set_cmp_func(t->table_, &keys_differ);
  // Deferred reclamation: a delete never waits for the readers (a synchronous wait would hold
  // the hash's writer lock that learning lcores spin on, so they could never report).
  rte_hash_rcu_config rcu{};
  rcu.v = t->qsbr_;
  rcu.mode = RTE_HASH_QSBR_MODE_DQ;
  rcu.free_key_data_func = &MacTable::on_reclaim;
  rcu.key_data_ptr = t.get();
  if (rte_hash_rcu_qsbr_add(t->table_, &rcu) != 0) {
    *error = std::string("bridge: MAC table RCU: ") + rte_strerror(rte_errno);
    return nullptr;
  }
  // Positions go beyond `size`: keys parked in per-lcore free-slot caches count too.
  t->entries_ = std::make_unique<Entry[]>(static_cast<size_t>(rte_hash_max_key_id(t->table_)) + 1);
  return t;
}

MacTable::~MacTable() {
  if (qsbr_ != nullptr) {
    for (uint16_t i = 0; i < reader_count_; ++i) rte_rcu_qsbr_thread_offline(qsbr_, i);
  }
  // Freeing reclaims the deferred keys into this thread's free-slot cache.
  if (table_ != nullptr && ensure_lcore_id()) rte_hash_free(table_);
  rte_free(qsbr_);
}

void MacTable::go_online(uint16_t slot) {
  Reader& r = readers_[slot];
  r.can_add = ensure_lcore_id();
  rte_rcu_qsbr_thread_online(qsbr_, slot);
  r.online = true;
}

void MacTable::offline(uint16_t slot) {
  Reader& r = readers_[slot];
  if (!r.online) return;
  rte_rcu_qsbr_thread_offline(qsbr_, slot);
  r.online = false;
}

void MacTable::on_reclaim(void* table, void* /*key_data*/) {
  static_cast<MacTable*>(table)->reclaimed_.fetch_add(1, std::memory_order_relaxed);
}

uint64_t MacTable::age(uint64_t now_tsc, uint64_t max_idle_tsc) {
  return remove_if([&](const Entry& e) {
    const int64_t idle = static_cast<int64_t>(now_tsc - e.seen.load(std::memory_order_relaxed));
    return idle > static_cast<int64_t>(max_idle_tsc);
  });
}

uint64_t MacTable::flush() {
  return remove_if([](const Entry&) { return true; });
}

uint64_t MacTable::remove_port(uint16_t port) {
  return remove_if(
      [port](const Entry& e) { return e.port.load(std::memory_order_relaxed) == port; });
}

void MacTable::for_each_filled(const std::function<void(uint64_t, Entry&)>& visit) const {
  const void* key_ptr;
  void* data;
  uint32_t next = 0;
  int32_t position;
  // Deleting while iterating is safe without extendable buckets (no entry moves on delete).
  while ((position = rte_hash_iterate(table_, &key_ptr, &data, &next)) >= 0) {
    uint64_t key;
    std::memcpy(&key, key_ptr, sizeof(key));
    Entry& e = entries_[position];
    if (e.key.load(std::memory_order_acquire) != key) continue;  // a learner is filling it in
    visit(key, e);
  }
}

void MacTable::for_each(const std::function<void(uint64_t, uint16_t, uint64_t)>& visit) const {
  for_each_filled([&](uint64_t key, Entry& e) {
    visit(key, e.port.load(std::memory_order_relaxed), e.seen.load(std::memory_order_relaxed));
  });
}

uint64_t MacTable::remove_if(const std::function<bool(const Entry&)>& doomed) {
  if (!ensure_lcore_id()) return 0;
  uint64_t removed = 0;
  for_each_filled([&](uint64_t key, Entry& e) {
    if (!doomed(e)) return;
    if (rte_hash_del_key(table_, &key) < 0) return;
    // Before any later delete can reclaim it (size() subtracts the difference).
    deleted_.fetch_add(1, std::memory_order_relaxed);
    // So the key, if it comes back to this position, counts as learned. Only if nobody has
    // claimed the position again meanwhile.
    e.key.compare_exchange_strong(key, kNoKey, std::memory_order_relaxed);
    ++removed;
  });
  return removed;
}

uint64_t MacTable::size() const {
  // rte_hash_count() still counts deleted keys until they are reclaimed.
  const int32_t count = rte_hash_count(table_);
  const uint64_t used = count > 0 ? static_cast<uint64_t>(count) : 0;
  const uint64_t reclaimed = reclaimed_.load(std::memory_order_relaxed);
  const uint64_t deleted = deleted_.load(std::memory_order_relaxed);
  const uint64_t pending = deleted > reclaimed ? deleted - reclaimed : 0;
  return used > pending ? used - pending : 0;
}

}  // namespace vqs::app
