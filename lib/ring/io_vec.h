// SPDX-License-Identifier: BSD-3-Clause
// A scatter list of host-virtual buffers: the guest's view of one packet, after translation.
#pragma once

#include <cstdint>
#include <cstring>

namespace vqs {

struct IoVec {
  uint8_t* base;
  uint32_t len;
};

// Fixed capacity, so walking a chain never allocates. 1024 is Linux's UIO_MAXIOV, which bounds
// vhost-net the same way; a chain that needs more is rejected as invalid.
class IoVecList {
 public:
  static constexpr uint32_t kCapacity = 1024;

  void clear() {
    count_ = 0;
    total_len_ = 0;
  }
  bool push(uint8_t* base, uint32_t len) {
    if (count_ == kCapacity) return false;
    vec_[count_++] = IoVec{base, len};
    total_len_ += len;
    return true;
  }
  // Drops the entries from `count` on (undoes a failed append).
  void truncate(uint32_t count) {
    while (count_ > count) total_len_ -= vec_[--count_].len;
  }
  uint32_t count() const { return count_; }
  // 64-bit: a hostile chain may describe more than 4 GiB before it is rejected.
  uint64_t total_len() const { return total_len_; }
  const IoVec& operator[](uint32_t i) const { return vec_[i]; }

 private:
  uint32_t count_ = 0;
  uint64_t total_len_ = 0;
  IoVec vec_[kCapacity];
};

// Walks an IoVecList as one byte stream, copying in or out.
class IoVecCursor {
 public:
  explicit IoVecCursor(const IoVecList& list) : list_(list) {}

  // Each returns the bytes it moved: fewer than asked only at the end of the list.
  uint32_t skip(uint32_t n) {
    return move(n, [](uint8_t*, uint32_t) {});
  }
  uint32_t read(void* dst, uint32_t n) {
    auto* d = static_cast<uint8_t*>(dst);
    return move(n, [&d](uint8_t* p, uint32_t k) {
      std::memcpy(d, p, k);
      d += k;
    });
  }
  uint32_t write(const void* src, uint32_t n) {
    const auto* s = static_cast<const uint8_t*>(src);
    return move(n, [&s](uint8_t* p, uint32_t k) {
      // memmove: the source may be guest memory too (a lent packet's segments), and a hostile
      // guest may post receive buffers that overlap it (found by the soak test, ASan build).
      std::memmove(p, s, k);
      s += k;
    });
  }

 private:
  template <typename Fn>
  uint32_t move(uint32_t n, Fn&& fn) {
    uint32_t done = 0;
    while (done < n && index_ < list_.count()) {
      const IoVec& v = list_[index_];
      const uint32_t k = v.len - offset_ < n - done ? v.len - offset_ : n - done;
      fn(v.base + offset_, k);
      done += k;
      offset_ += k;
      if (offset_ == v.len) {
        ++index_;
        offset_ = 0;
      }
    }
    return done;
  }

  const IoVecList& list_;
  uint32_t index_ = 0;
  uint32_t offset_ = 0;
};

}  // namespace vqs
