// SPDX-License-Identifier: BSD-3-Clause
#include "sim_guest.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

namespace vqs::test {
namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(what);
}

}  // namespace

SimMemory::SimMemory(const std::vector<uint64_t>& region_sizes) {
  check(region_sizes.size() >= 3, "SimMemory needs at least 3 regions");
  uint64_t gpa = kBase;
  for (size_t i = 0; i < region_sizes.size(); ++i) {
    // Untouched until used: cheap (unless MALLOC_PERTURB_ has glibc fill it; tests/meson.build).
    storage_.emplace_back(new uint8_t[region_sizes[i]]);
    check(table_.add_region(gpa, region_sizes[i], storage_.back().get()), "add_region");
    gpa += region_sizes[i];
    if (i >= 1) gpa += kGap;  // regions 0 and 1 touch; the rest do not
  }
  buffer_cursor_ = region_start(0);
  ring_cursor_ = region_start(table_.region_count() - 1);
}

uint64_t SimMemory::alloc(uint64_t len, uint64_t align) {
  uint64_t at = align_up(buffer_cursor_, align);
  if (at + len > region_end(1)) at = align_up(region_start(0), align);
  check(at + len <= region_end(1), "SimMemory buffer space exhausted");
  buffer_cursor_ = at + len;
  return at;
}

uint64_t SimMemory::alloc_ring_memory(uint64_t len, uint64_t align) {
  const uint32_t last = table_.region_count() - 1;
  const uint64_t at = align_up(ring_cursor_, align);
  check(at + len <= region_end(last), "SimMemory ring space exhausted");
  ring_cursor_ = at + len;
  return at;
}

uint64_t SimMemory::alloc_across_boundary(uint64_t len, uint64_t before_end) {
  check(before_end < len, "buffer would not cross");
  return region_end(0) - before_end;
}

void SimMemory::write(uint64_t gpa, const void* src, uint64_t len) {
  IoVecList iov;
  check(table_.map(gpa, static_cast<uint32_t>(len), iov) == GuestMemory::MapResult::kOk,
        "write outside guest memory");
  IoVecCursor(iov).write(src, static_cast<uint32_t>(len));
}

void SimMemory::read(uint64_t gpa, void* dst, uint64_t len) const {
  IoVecList iov;
  check(table_.map(gpa, static_cast<uint32_t>(len), iov) == GuestMemory::MapResult::kOk,
        "read outside guest memory");
  IoVecCursor(iov).read(dst, static_cast<uint32_t>(len));
}

uint8_t* SimMemory::host(uint64_t gpa, uint64_t len) const {
  uint8_t* p = table_.translate(gpa, len);
  check(p != nullptr, "host(): not inside one region");
  return p;
}

SimGuest::SimGuest(SimMemory& memory, uint16_t ring_size, uint64_t features)
    : memory_(memory),
      size_(ring_size),
      features_(features),
      hdr_size_(NetFeatures::from_bits(features).net_hdr_size),
      packed_((features >> kFRingPacked) & 1) {
  callfd_ = eventfd(0, EFD_NONBLOCK);
  check(callfd_ >= 0, "eventfd");
  if (packed_) {
    const uint64_t desc_gpa = memory.alloc_ring_memory(16ull * size_, 16);
    const uint64_t driver_gpa = memory.alloc_ring_memory(4, 4);
    const uint64_t device_gpa = memory.alloc_ring_memory(4, 4);
    packed_desc_ = reinterpret_cast<VringPackedDesc*>(memory.host(desc_gpa, 16ull * size_));
    driver_event_ = reinterpret_cast<VringPackedEvent*>(memory.host(driver_gpa, 4));
    device_event_ = reinterpret_cast<VringPackedEvent*>(memory.host(device_gpa, 4));
    std::memset(packed_desc_, 0, 16ull * size_);  // a driver starts from a zeroed ring
    *driver_event_ = {};
    *device_event_ = {};
    for (int i = size_ - 1; i >= 0; --i) free_.push_back(static_cast<uint16_t>(i));  // ids
    return;
  }
  const uint64_t desc_gpa = memory.alloc_ring_memory(16ull * size_, 16);
  const uint64_t avail_gpa = memory.alloc_ring_memory(6 + 2ull * size_, 2);
  const uint64_t used_gpa = memory.alloc_ring_memory(6 + 8ull * size_, 4);
  desc_ = reinterpret_cast<VringDesc*>(memory.host(desc_gpa, 16ull * size_));
  avail_ = reinterpret_cast<VringAvail*>(memory.host(avail_gpa, 6 + 2ull * size_));
  used_ = reinterpret_cast<VringUsed*>(memory.host(used_gpa, 6 + 8ull * size_));
  std::memset(desc_, 0, 16ull * size_);  // a driver starts from zeroed rings
  std::memset(avail_, 0, 6 + 2ull * size_);
  std::memset(used_, 0, 6 + 8ull * size_);
  addrs_ = SplitRingAddrs{desc_, avail_, used_, size_};
  for (int i = size_ - 1; i >= 0; --i) free_.push_back(static_cast<uint16_t>(i));
}

SimGuest::~SimGuest() { close(callfd_); }

VirtQueue::Setup SimGuest::setup() const {
  VirtQueue::Setup s;
  if (packed_) {
    s.packed_addrs = PackedRingAddrs{packed_desc_, driver_event_, device_event_, size_};
    s.last_avail_idx = avail_pos_.base();
    s.last_used_idx = used_pos_.base();
    s.features = features_;
    s.memory = &memory_.table();
    s.callfd = callfd_;
    return s;
  }
  s.addrs = addrs_;
  s.last_avail_idx = avail_shadow_;
  s.last_used_idx = used_->idx;
  s.features = features_;
  s.memory = &memory_.table();
  s.callfd = callfd_;
  return s;
}

void SimGuest::start_at(uint16_t idx) {
  if (packed_) {  // `idx` slots on from a fresh ring: a lap's wrap counter when past the end
    avail_pos_ = used_pos_ = PackedPos{}.advanced(idx, size_);
    // Every slot as the lap before its next one left it: used (AVAIL == USED) with the other
    // wrap counter, so neither available nor used in the lap to come.
    for (uint16_t slot = 0; slot < size_; ++slot) {
      const bool next_lap = slot >= avail_pos_.slot ? avail_pos_.wrap : !avail_pos_.wrap;
      packed_desc_[slot].flags =
          next_lap ? 0 : static_cast<uint16_t>(kVringPackedDescFAvail | kVringPackedDescFUsed);
    }
    return;
  }
  set_avail_idx(idx);
  used_->idx = idx;
  last_used_seen_ = idx;
}

uint64_t SimGuest::take_interrupts() {
  eventfd_t value = 0;
  return eventfd_read(callfd_, &value) == 0 ? value : 0;
}

void SimGuest::split_only(const char* what) const {
  if (packed_) throw std::runtime_error(std::string("SimGuest::") + what + ": split rings only");
}

uint16_t SimGuest::packed_chain(const std::vector<std::pair<uint64_t, uint32_t>>& bufs,
                                uint16_t flags, bool indirect) {
  check(!bufs.empty(), "empty chain");
  check(!free_.empty(), "SimGuest: no free buffer id");
  const uint16_t slots = indirect ? 1 : static_cast<uint16_t>(bufs.size());
  uint32_t in_use = 0;
  for (const auto& [id, n] : id_slots_) in_use += n;
  check(in_use + slots <= size_, "SimGuest: packed ring full");
  const uint16_t id = free_.back();
  free_.pop_back();
  auto lap_flags = [](bool wrap) { return wrap ? kVringPackedDescFAvail : kVringPackedDescFUsed; };
  const uint16_t head_slot = avail_pos_.slot;
  uint16_t head_flags = 0;
  if (indirect) {
    const uint64_t table_gpa = memory_.alloc_ring_memory(16 * bufs.size(), 16);
    auto* table = reinterpret_cast<VringPackedDesc*>(memory_.host(table_gpa, 16 * bufs.size()));
    for (size_t i = 0; i < bufs.size(); ++i)
      table[i] = VringPackedDesc{bufs[i].first, bufs[i].second, 0, flags};
    packed_desc_[head_slot] =
        VringPackedDesc{table_gpa, static_cast<uint32_t>(16 * bufs.size()), id, 0};
    head_flags = kVringDescFIndirect | lap_flags(avail_pos_.wrap);
    avail_pos_ = avail_pos_.advanced(1, size_);
  } else {
    for (size_t i = 0; i < bufs.size(); ++i) {
      VringPackedDesc& d = packed_desc_[avail_pos_.slot];
      d.addr = bufs[i].first;
      d.len = bufs[i].second;
      d.id = id;
      const uint16_t f = static_cast<uint16_t>(flags | (i + 1 < bufs.size() ? kVringDescFNext : 0) |
                                               lap_flags(avail_pos_.wrap));
      if (i == 0)
        head_flags = f;
      else
        __atomic_store_n(&d.flags, f, __ATOMIC_RELEASE);
      avail_pos_ = avail_pos_.advanced(1, size_);
    }
  }
  unpublished_.emplace_back(head_slot, head_flags);
  id_slots_[id] = slots;
  if (in_order()) made_available_.push_back(id);
  return id;
}

std::vector<VringUsedElem> SimGuest::take_used_packed() {
  std::vector<VringUsedElem> out;
  for (;;) {
    const uint16_t flags = __atomic_load_n(&packed_desc_[used_pos_.slot].flags, __ATOMIC_ACQUIRE);
    const bool avail = flags & kVringPackedDescFAvail, used = flags & kVringPackedDescFUsed;
    if (avail != used || used != used_pos_.wrap) break;
    const VringPackedDesc d = packed_desc_[used_pos_.slot];
    check(id_slots_.count(d.id) != 0, "used id not in flight");
    // With IN_ORDER one entry may return every chain made available up to its id (virtio 1.1,
    // 2.8.23): the driver skips forward by all their slots.
    uint32_t slots = 0;
    for (;;) {
      const uint16_t id = in_order() ? made_available_.front() : d.id;
      if (in_order()) made_available_.pop_front();
      auto it = id_slots_.find(id);
      check(it != id_slots_.end(), "used id not in flight");
      slots += it->second;
      id_slots_.erase(it);
      free_.push_back(id);
      out.push_back(VringUsedElem{id, id == d.id ? d.len : 0});
      if (id == d.id) break;
    }
    used_pos_ = used_pos_.advanced(slots, size_);
  }
  return out;
}

uint16_t SimGuest::alloc_desc() {
  split_only("alloc_desc()");
  check(!free_.empty(), "SimGuest: descriptor table full");
  const uint16_t i = free_.back();
  free_.pop_back();
  return i;
}

uint16_t SimGuest::chain(const std::vector<std::pair<uint64_t, uint32_t>>& bufs, uint16_t flags,
                         bool indirect) {
  check(!bufs.empty(), "empty chain");
  if (indirect) {
    const uint64_t table_gpa = memory_.alloc_ring_memory(16 * bufs.size(), 16);
    auto* table = reinterpret_cast<VringDesc*>(memory_.host(table_gpa, 16 * bufs.size()));
    for (size_t i = 0; i < bufs.size(); ++i) {
      table[i].addr = bufs[i].first;
      table[i].len = bufs[i].second;
      table[i].flags = flags | (i + 1 < bufs.size() ? kVringDescFNext : 0);
      table[i].next = static_cast<uint16_t>(i + 1);
    }
    const uint16_t head = alloc_desc();
    desc_[head] =
        VringDesc{table_gpa, static_cast<uint32_t>(16 * bufs.size()), kVringDescFIndirect, 0};
    chain_descs_[head] = {head};
    return head;
  }
  std::vector<uint16_t> ids;
  for (size_t i = 0; i < bufs.size(); ++i) ids.push_back(alloc_desc());
  for (size_t i = 0; i < bufs.size(); ++i) {
    VringDesc& d = desc_[ids[i]];
    d.addr = bufs[i].first;
    d.len = bufs[i].second;
    d.flags = flags | (i + 1 < bufs.size() ? kVringDescFNext : 0);
    d.next = i + 1 < bufs.size() ? ids[i + 1] : 0;
  }
  chain_descs_[ids[0]] = ids;
  return ids[0];
}

uint16_t SimGuest::send(const SimPacket& packet, const TxLayout& layout, bool publish_now) {
  std::vector<std::pair<uint64_t, uint32_t>> bufs;
  const uint32_t len = static_cast<uint32_t>(packet.data.size());
  std::vector<uint8_t> bytes(hdr_size_ + len);
  std::memcpy(bytes.data(), &packet.hdr, hdr_size_);
  if (len) std::memcpy(bytes.data() + hdr_size_, packet.data.data(), len);

  uint32_t off = 0;
  auto add = [&](uint64_t gpa, uint32_t n) {
    memory_.write(gpa, bytes.data() + off, n);
    bufs.emplace_back(gpa, n);
    off += n;
  };
  if (layout.separate_header) add(memory_.alloc(hdr_size_), hdr_size_);
  const uint32_t rest = static_cast<uint32_t>(bytes.size()) - off;
  if (layout.at_gpa != 0) {
    add(layout.at_gpa, rest);
  } else if (layout.cross_region && rest >= 2) {
    add(memory_.alloc_across_boundary(rest, rest / 2), rest);
  } else if (rest > 0) {
    const uint32_t pieces = std::max<uint32_t>(1, std::min(layout.data_pieces, rest));
    for (uint32_t p = 0; p < pieces; ++p) {
      const uint32_t n = p + 1 == pieces ? rest - (rest / pieces) * p : rest / pieces;
      add(memory_.alloc(n), n);
    }
  }
  if (packed_) {
    const uint16_t id = packed_chain(bufs, 0, layout.indirect);
    if (publish_now) publish();
    return id;
  }
  const uint16_t head = chain(bufs, 0, layout.indirect);
  post_head(head);
  if (publish_now) publish();
  return head;
}

void SimGuest::post_rx(uint16_t count, uint32_t buf_len, uint32_t pieces, bool indirect) {
  for (uint16_t i = 0; i < count; ++i) {
    std::vector<std::pair<uint64_t, uint32_t>> bufs;
    for (uint32_t p = 0; p < pieces; ++p) {
      const uint32_t n = p + 1 == pieces ? buf_len - (buf_len / pieces) * p : buf_len / pieces;
      bufs.emplace_back(memory_.alloc(n), n);
    }
    if (packed_) {
      rx_bufs_[packed_chain(bufs, kVringDescFWrite, indirect)] = bufs;
      continue;
    }
    const uint16_t head = chain(bufs, kVringDescFWrite, indirect);
    rx_bufs_[head] = bufs;
    post_head(head);
  }
  publish();
}

void SimGuest::post_head(uint16_t head) {
  split_only("post_head()");
  avail_->ring[avail_shadow_ % size_] = head;
  ++avail_shadow_;
}

void SimGuest::publish() {
  if (packed_) {  // the heads' flags, in ring order: each chain becomes available whole
    for (const auto& [slot, flags] : unpublished_)
      __atomic_store_n(&packed_desc_[slot].flags, flags, __ATOMIC_RELEASE);
    unpublished_.clear();
    return;
  }
  __atomic_store_n(&avail_->idx, avail_shadow_, __ATOMIC_RELEASE);
}

void SimGuest::set_avail_idx(uint16_t idx) {
  split_only("set_avail_idx()");
  avail_shadow_ = idx;
  publish();
}

uint16_t SimGuest::used_idx() const {
  split_only("used_idx()");
  return __atomic_load_n(&used_->idx, __ATOMIC_ACQUIRE);
}

void SimGuest::set_used_event(uint16_t idx) {
  if (packed_) {
    driver_event_->off_wrap = PackedPos{}.advanced(idx, size_).base();
    __atomic_store_n(&driver_event_->flags, kVringPackedEventFDesc, __ATOMIC_RELEASE);
    return;
  }
  avail_->ring[size_] = idx;
}

void SimGuest::set_avail_flags(uint16_t flags) {
  if (packed_) {
    __atomic_store_n(
        &driver_event_->flags,
        (flags & kVringAvailFNoInterrupt) ? kVringPackedEventFDisable : kVringPackedEventFEnable,
        __ATOMIC_RELEASE);
    return;
  }
  avail_->flags = flags;
}

uint16_t SimGuest::avail_event() const {
  split_only("avail_event()");
  uint16_t value;
  std::memcpy(&value, &used_->ring[size_], sizeof(value));
  return value;
}

void SimGuest::free_chain(uint16_t head) {
  auto it = chain_descs_.find(head);
  if (it == chain_descs_.end()) return;
  for (uint16_t d : it->second) free_.push_back(d);
  chain_descs_.erase(it);
}

std::vector<VringUsedElem> SimGuest::take_used() {
  if (packed_) return take_used_packed();
  std::vector<VringUsedElem> out;
  const uint16_t end = used_idx();
  for (; last_used_seen_ != end; ++last_used_seen_) {
    const VringUsedElem e = used_->ring[last_used_seen_ % size_];
    out.push_back(e);
    free_chain(static_cast<uint16_t>(e.id));
  }
  return out;
}

std::vector<SimPacket> SimGuest::receive() {
  std::vector<SimPacket> packets;
  const std::vector<VringUsedElem> used = take_used();
  const bool mrg = (features_ >> kNetFMrgRxbuf) & 1;
  for (size_t i = 0; i < used.size();) {
    std::vector<uint8_t> bytes;
    uint64_t first_gpa = 0;
    auto append = [&](const VringUsedElem& e) {
      auto it = rx_bufs_.find(static_cast<uint16_t>(e.id));
      check(it != rx_bufs_.end(), "used id is not a posted RX chain");
      if (first_gpa == 0) first_gpa = it->second.front().first;
      uint32_t left = e.len;
      for (const auto& [gpa, n] : it->second) {
        const uint32_t k = std::min(left, n);
        const size_t at = bytes.size();
        bytes.resize(at + k);
        memory_.read(gpa, bytes.data() + at, k);
        left -= k;
      }
      check(left == 0, "used len larger than the chain");
      rx_bufs_.erase(it);
    };
    append(used[i]);
    check(bytes.size() >= hdr_size_, "used len shorter than the header");
    SimPacket p;
    std::memcpy(&p.hdr, bytes.data(), hdr_size_);
    const uint16_t buffers = mrg ? p.hdr.num_buffers : 1;
    check(buffers >= 1 && i + buffers <= used.size(), "num_buffers beyond used entries");
    for (uint16_t b = 1; b < buffers; ++b) append(used[i + b]);
    p.buffers = buffers;
    p.gpa = first_gpa;
    p.data.assign(bytes.begin() + hdr_size_, bytes.end());
    packets.push_back(std::move(p));
    i += buffers;
  }
  return packets;
}

std::vector<uint8_t> make_frame(uint32_t len, uint32_t seed) {
  std::vector<uint8_t> f(len);
  for (uint32_t i = 0; i < len; ++i)
    f[i] = static_cast<uint8_t>((i * 131 + seed * 7 + 1) ^ (i >> 8));
  if (len >= 42) {
    static const uint8_t kHeader[] = {
        0x02, 0,    0,    0,    0,  0x02, 0x02, 0, 0,  0,  0, 0x01, 0x08, 0x00,  // Ethernet, IPv4
        0x45, 0,    0,    0,    0,  0,    0x40, 0, 64, 17, 0, 0,  // IPv4: len, DF, UDP
        10,   0,    0,    1,    10, 0,    0,    2,                // addresses
        0x30, 0x39, 0x00, 0x35, 0,  0,    0,    0,                // UDP ports, len, csum
    };
    std::memcpy(f.data(), kHeader, sizeof(kHeader));
    const uint16_t ip_len = static_cast<uint16_t>(std::min<uint32_t>(len - 14, 65535));
    f[16] = static_cast<uint8_t>(ip_len >> 8);
    f[17] = static_cast<uint8_t>(ip_len);
    const uint16_t udp_len = static_cast<uint16_t>(std::min<uint32_t>(len - 34, 65535));
    f[38] = static_cast<uint8_t>(udp_len >> 8);
    f[39] = static_cast<uint8_t>(udp_len);
  }
  return f;
}

}  // namespace vqs::test
