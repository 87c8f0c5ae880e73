// SPDX-License-Identifier: BSD-3-Clause
// Split virtqueue layout and flags, as the virtio 1.x specification (2.7) defines them.
// <linux/virtio_ring.h> has the same, but its inline helpers do not compile as C++.
#pragma once

#include <cstdint>

namespace vqs {

struct VringDesc {
  uint64_t addr;
  uint32_t len;
  uint16_t flags;
  uint16_t next;
};

struct VringAvail {
  uint16_t flags;
  uint16_t idx;
  uint16_t ring[];  // size entries, then used_event (with EVENT_IDX)
};

struct VringUsedElem {
  uint32_t id;
  uint32_t len;
};

struct VringUsed {
  uint16_t flags;
  uint16_t idx;
  VringUsedElem ring[];  // size entries, then avail_event (with EVENT_IDX)
};

static_assert(sizeof(VringDesc) == 16 && sizeof(VringUsedElem) == 8);

constexpr uint16_t kVringDescFNext = 1;
constexpr uint16_t kVringDescFWrite = 2;
constexpr uint16_t kVringDescFIndirect = 4;
constexpr uint16_t kVringAvailFNoInterrupt = 1;
constexpr uint16_t kVringUsedFNoNotify = 1;

// Feature bits of the ring itself.
constexpr unsigned kRingFIndirectDesc = 28;
constexpr unsigned kRingFEventIdx = 29;
constexpr unsigned kFRingPacked = 34;

// Packed virtqueue layout (virtio 1.1+, 2.8): one descriptor ring that the driver makes
// available and the device marks used in place, by two flag bits against wrap counters.
struct VringPackedDesc {
  uint64_t addr;
  uint32_t len;
  uint16_t id;  // buffer id: in a chain's last descriptor
  uint16_t flags;
};

// Event suppression: the driver's area tells the device when to interrupt, the device's area
// tells the driver when to kick.
struct VringPackedEvent {
  uint16_t off_wrap;  // descriptor ring offset (bits 0-14) and wrap counter (bit 15)
  uint16_t flags;
};

static_assert(sizeof(VringPackedDesc) == 16 && sizeof(VringPackedEvent) == 4);

constexpr uint16_t kVringPackedDescFAvail = 1u << 7;
constexpr uint16_t kVringPackedDescFUsed = 1u << 15;
constexpr uint16_t kVringPackedEventFEnable = 0;
constexpr uint16_t kVringPackedEventFDisable = 1;
constexpr uint16_t kVringPackedEventFDesc = 2;  // with EVENT_IDX: at off_wrap

}  // namespace vqs
