// SPDX-License-Identifier: BSD-3-Clause
// A simulated virtio-net guest driver for tests: guest memory in several regions, split rings in
// it, TX chains and RX buffers posted as real (or hostile) drivers do, used entries read back. In
// heap memory, so the sanitizer build catches device accesses outside the regions.
#pragma once

#include "ring/virtio_net_hdr.h"
#include "ring/vring.h"

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "ring/guest_memory.h"
#include "ring/packed_ring.h"
#include "ring/virtqueue.h"

namespace vqs::test {

// Regions 0 and 1 are adjacent in guest-physical space but separate host allocations, so a buffer
// may cross a region boundary; further regions follow after gaps.
class SimMemory {
 public:
  static constexpr uint64_t kBase = 0x100000;
  static constexpr uint64_t kGap = 0x40000000;

  explicit SimMemory(const std::vector<uint64_t>& region_sizes);

  const GuestMemory& table() const { return table_; }
  uint64_t region_start(uint32_t i) const { return table_.region(i).guest_phys_addr; }
  uint64_t region_end(uint32_t i) const { return region_start(i) + table_.region(i).size; }

  // Buffers come from regions 0-1 (bump allocation, wrapping to the start); ring memory from the
  // last region.
  uint64_t alloc(uint64_t len, uint64_t align = 8);
  uint64_t alloc_ring_memory(uint64_t len, uint64_t align);
  // A buffer of `len` bytes that starts `before_end` bytes before the end of region 0.
  uint64_t alloc_across_boundary(uint64_t len, uint64_t before_end);

  // Copies that may cross regions; the address range must be mapped.
  void write(uint64_t gpa, const void* src, uint64_t len);
  void read(uint64_t gpa, void* dst, uint64_t len) const;
  uint8_t* host(uint64_t gpa, uint64_t len) const;  // within one region

 private:
  std::vector<std::unique_ptr<uint8_t[]>> storage_;
  GuestMemory table_;
  uint64_t buffer_cursor_ = 0;
  uint64_t ring_cursor_ = 0;
};

struct SimPacket {
  VirtioNetHdrMrgRxbuf hdr{};
  std::vector<uint8_t> data;
  uint16_t buffers = 1;  // used entries the packet took (guest RX)
  uint64_t gpa = 0;      // guest RX: where its first buffer starts (its header)
};

// How a TX chain is laid out in descriptors.
struct TxLayout {
  bool separate_header = false;  // header in its own descriptor (legacy drivers without ANY_LAYOUT)
  uint32_t data_pieces = 1;      // data split over this many descriptors
  bool indirect = false;         // chain in an indirect table
  bool cross_region = false;     // the (header and) data buffer crosses the region 0/1 boundary
  uint64_t at_gpa = 0;           // else: header and data in one descriptor here (a received
                                 // packet's buffer, sent on as a forwarder does)
};

// With VIRTIO_F_RING_PACKED in its features, a packed driver (virtio 1.1, 2.8): chains made
// available at its position with ids of its own, used entries read in place. The raw split-ring
// accessors below are for split rings only (they throw otherwise).
class SimGuest {
 public:
  SimGuest(SimMemory& memory, uint16_t ring_size, uint64_t features);
  bool packed() const { return packed_; }
  ~SimGuest();

  // The queue as the device is handed it; indices where the guest's rings stand now.
  VirtQueue::Setup setup() const;
  // Starts both ring indices at `idx` (before the device attaches), e.g. just below 2^16.
  void start_at(uint16_t idx);
  uint16_t ring_size() const { return size_; }
  uint64_t features() const { return features_; }
  uint32_t hdr_size() const { return hdr_size_; }
  int callfd() const { return callfd_; }
  // Interrupts received since the last call (reads the eventfd).
  uint64_t take_interrupts();

  // Guest TX: builds and posts one chain; returns its head. Published at once unless `publish`
  // is false (then call publish()).
  uint16_t send(const SimPacket& packet, const TxLayout& layout = {}, bool publish = true);
  // Guest RX: posts `count` receive chains of `buf_len` bytes, each in `pieces` descriptors.
  void post_rx(uint16_t count, uint32_t buf_len, uint32_t pieces = 1, bool indirect = false);
  // Guest RX: reads the used ring and reassembles packets (num_buffers with MRG_RXBUF).
  std::vector<SimPacket> receive();
  // Used entries not yet read, raw; frees their descriptors.
  std::vector<VringUsedElem> take_used();

  // Raw access for hostile layouts.
  uint16_t alloc_desc();
  VringDesc& desc(uint16_t i) {
    split_only("desc()");
    return desc_[i];
  }
  void post_head(uint16_t head);     // avail ring entry, not yet published
  void publish();                    // avail->idx
  void set_avail_idx(uint16_t idx);  // whatever the device should believe
  uint16_t avail_idx() const {
    split_only("avail_idx()");
    return avail_shadow_;
  }
  uint16_t used_idx() const;
  // Interrupt suppression. Packed: kVringAvailFNoInterrupt disables interrupts in the driver's
  // event area (0 enables them), and used_event `idx` asks for one at the position `idx` slots
  // from a fresh ring's start (as a split index for chains of one descriptor).
  void set_avail_flags(uint16_t flags);
  void set_used_event(uint16_t idx);
  uint16_t avail_event() const;
  uint16_t used_flags() const {
    split_only("used_flags()");
    return used_->flags;
  }
  uint16_t free_descs() const { return static_cast<uint16_t>(free_.size()); }
  SimMemory& memory() { return memory_; }

 private:
  uint16_t chain(const std::vector<std::pair<uint64_t, uint32_t>>& bufs, uint16_t flags,
                 bool indirect);
  void free_chain(uint16_t head);
  // Packed: writes the chain at the driver's position, all but its head's flags (publish()
  // writes those, in order); returns its id.
  uint16_t packed_chain(const std::vector<std::pair<uint64_t, uint32_t>>& bufs, uint16_t flags,
                        bool indirect);
  std::vector<VringUsedElem> take_used_packed();
  bool in_order() const { return (features_ >> kFInOrder) & 1; }
  void split_only(const char* what) const;

  SimMemory& memory_;
  uint16_t size_;
  uint64_t features_;
  uint32_t hdr_size_;
  VringDesc* desc_;
  VringAvail* avail_;
  VringUsed* used_;
  SplitRingAddrs addrs_;
  uint16_t avail_shadow_ = 0;
  uint16_t last_used_seen_ = 0;
  int callfd_ = -1;
  std::vector<uint16_t> free_;
  bool packed_ = false;
  VringPackedDesc* packed_desc_ = nullptr;
  VringPackedEvent* driver_event_ = nullptr;
  VringPackedEvent* device_event_ = nullptr;
  PackedPos avail_pos_;  // packed: where the driver makes the next chain available
  PackedPos used_pos_;   // packed: where it reads the next used entry
  std::vector<std::pair<uint16_t, uint16_t>> unpublished_;  // packed: (slot, head flags)
  std::map<uint16_t, uint16_t> id_slots_;                   // packed: id -> slots its chain takes
  std::deque<uint16_t> made_available_;  // packed with IN_ORDER: ids in flight, oldest first
  std::map<uint16_t, std::vector<uint16_t>> chain_descs_;                   // head -> table entries
  std::map<uint16_t, std::vector<std::pair<uint64_t, uint32_t>>> rx_bufs_;  // head -> buffers
};

// A packet of `len` bytes: an Ethernet/IPv4/UDP frame when long enough, then a byte pattern
// that depends on `seed`, so that misplaced bytes are caught.
std::vector<uint8_t> make_frame(uint32_t len, uint32_t seed);

}  // namespace vqs::test
