// SPDX-License-Identifier: BSD-3-Clause
// Spare mbufs for one burst's extra segments (the tail of a copied multi-segment packet, the
// payload pieces of a lent one), taken from the pool a chunk at a time instead of one mempool call
// per packet. What the burst did not use goes back when the stash is destroyed.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <cstring>

namespace vqs {

class MbufStash {
 public:
  static constexpr uint32_t kCapacity = 64;  // the most one take() may ask for
  static constexpr uint32_t kChunk = 32;     // allocated at least this many at a time

  explicit MbufStash(rte_mempool* pool) : pool_(pool) {}
  ~MbufStash() {
    if (next_ < count_) rte_pktmbuf_free_bulk(spare_ + next_, count_ - next_);
  }
  MbufStash(const MbufStash&) = delete;
  MbufStash& operator=(const MbufStash&) = delete;

  rte_mempool* pool() const { return pool_; }

  // Fills out[0, n) with fresh mbufs (n <= kCapacity); false, taking none, when the pool cannot
  // give them.
  bool take(rte_mbuf** out, uint32_t n) {
    if (count_ - next_ < n && !refill(n)) return false;
    std::memcpy(out, spare_ + next_, n * sizeof(*out));
    next_ += n;
    return true;
  }

 private:
  bool refill(uint32_t n) {
    const uint32_t left = count_ - next_;
    std::memmove(spare_, spare_ + next_, left * sizeof(*spare_));
    next_ = 0;
    count_ = left;
    const uint32_t need = n - left;
    const uint32_t want = need > kChunk ? need : kChunk;
    if (rte_pktmbuf_alloc_bulk(pool_, spare_ + left, want) == 0) {
      count_ = left + want;
      return true;
    }
    // Nearly empty: exactly what this take needs.
    if (rte_pktmbuf_alloc_bulk(pool_, spare_ + left, need) == 0) {
      count_ = left + need;
      return true;
    }
    return false;
  }

  rte_mempool* pool_;
  uint32_t next_ = 0;  // spare_[next_, count_) are free to take
  uint32_t count_ = 0;
  rte_mbuf* spare_[kCapacity + kChunk];
};

}  // namespace vqs
