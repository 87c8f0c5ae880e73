// SPDX-License-Identifier: BSD-3-Clause
// Walks one descriptor chain of a split virtqueue into host buffers. The table is guest memory the
// guest may change at any time: each descriptor is copied once and only the copy is checked and
// used. The bounds: docs/architecture.md, "Guest memory is hostile".
#pragma once

#include "ring/vring.h"

#include <cstdint>
#include <cstring>

#include "ring/guest_memory.h"
#include "ring/io_vec.h"
#include "ring/prefetch.h"

namespace vqs {

enum class ChainAccess : uint8_t {
  kDeviceReads,   // guest TX: every descriptor read-only
  kDeviceWrites,  // guest RX: every descriptor write-only
};

enum class ChainError : uint8_t {
  kNone,
  kBadIndex,               // head or next outside the (indirect) table
  kBadAddress,             // buffer or indirect table not inside guest memory, or wraps
  kTooLong,                // more descriptors than the ring size or IoVecList::kCapacity: a loop
                           // or an oversized chain
  kTooManySegments,        // more than IoVecList::kCapacity host buffers
  kWrongDirection,         // write-only flag does not match the direction
  kIndirectNotNegotiated,  // VIRTQ_DESC_F_INDIRECT without kRingFIndirectDesc
  kNestedIndirect,         // indirect descriptor inside an indirect table
  kIndirectWithNext,       // INDIRECT and NEXT together (forbidden by the spec)
  kBadIndirectLength,      // indirect table empty or not a multiple of 16 bytes
  kNotAvailable,           // packed: a chained descriptor the driver has not made available
};

const char* chain_error_name(ChainError error);

// One copy of a descriptor (split or packed) from guest memory. The compiler barrier keeps it from
// reading the guest's again later: the guest may change it meanwhile, and only the copy is checked.
template <typename Desc>
inline Desc load_desc(const Desc* table, uint32_t index) {
  Desc d;
  std::memcpy(&d, &table[index], sizeof(d));
  asm volatile("" ::: "memory");
  return d;
}

// One buffer descriptor's part of a chain, the same for every ring format: the direction must
// be the one asked, and the buffer inside guest memory; appended to `out` (an empty one adds
// nothing).
inline ChainError append_buffer(const GuestMemory& memory, uint64_t addr, uint32_t len,
                                bool device_writes, ChainAccess access, IoVecList& out) {
  if (device_writes != (access == ChainAccess::kDeviceWrites)) return ChainError::kWrongDirection;
  if (len == 0) return ChainError::kNone;
  switch (memory.map(addr, len, out)) {
    case GuestMemory::MapResult::kUnmapped:
      return ChainError::kBadAddress;
    case GuestMemory::MapResult::kListFull:
      return ChainError::kTooManySegments;
    case GuestMemory::MapResult::kOk:
      break;
  }
  return ChainError::kNone;
}

// An indirect table as a descriptor names it, for every ring format: whole 16-byte descriptors,
// at least one, in one guest region (it must be contiguous in host memory). nullptr and the
// error otherwise; `entries` its size.
inline const void* indirect_table(const GuestMemory& memory, uint64_t addr, uint32_t len,
                                  uint32_t* entries, ChainError* error) {
  static_assert(sizeof(VringDesc) == 16);
  if (len == 0 || len % sizeof(VringDesc) != 0) {
    *error = ChainError::kBadIndirectLength;
    return nullptr;
  }
  const void* table = memory.translate(addr, len);
  if (table == nullptr) *error = ChainError::kBadAddress;
  *entries = len / sizeof(VringDesc);
  return table;
}

// For prefetch_buffer_head: a buffer the device only reads (guest TX).
constexpr uint32_t kBufferNotWritten = UINT32_MAX;

// The lines prefetch_buffer_head touches for `len` (> 0) bytes at `start`: [first, end), of which
// those from `first_written` on are fetched for writing. None before the one holding byte
// `hinted_from` (< len).
struct BufferLines {
  uintptr_t first;
  uintptr_t first_written;
  uintptr_t end;
};
inline BufferLines buffer_lines(uintptr_t start, uint32_t len, uint32_t written_from,
                                uint32_t hinted_from = 0) {
  constexpr uintptr_t kMask = ~uintptr_t{kCacheLine - 1};
  BufferLines lines;
  lines.first = (start + hinted_from) & kMask;
  lines.end = ((start + len - 1) & kMask) + kCacheLine;
  // The line holding the first byte written is the first line written.
  lines.first_written = written_from < len ? (start + written_from) & kMask : lines.end;
  return lines;
}

// Cache hints for the first `bytes` of a buffer (clipped to its length `len`, translated within
// guest memory; anything odd is skipped). Guest RX passes `written_from`, the offset of the first
// byte sure to be stored (the packet's, after the header): lines from there on are fetched for
// writing, so that the burst's stores do not each wait for ownership. A line that holds only the
// header is fetched for reading: enqueue stores the header only where it differs, so that line,
// unchanged, stays in the guest's cache too. Taken for writing, every packet cost the guest a
// miss on the header from a CPU that shares no cache with ours (virtio_user's header fills the
// end of its line: guest-rx 64 B far, docs/benchmarks.md "Guest-rx 64 B in the far placement").
// No line before the one holding byte `hinted_from` is touched. For every ring format.
// prefetch_host_lines() takes the buffer already translated, at `p`.
inline void prefetch_host_lines(const uint8_t* p, uint32_t len, uint32_t bytes,
                                uint32_t written_from, uint32_t hinted_from = 0) {
  if (bytes < len) len = bytes;
  if (p == nullptr || len == 0) return;
  if (hinted_from >= len) hinted_from = 0;
  const BufferLines lines =
      buffer_lines(reinterpret_cast<uintptr_t>(p), len, written_from, hinted_from);
  for (uintptr_t line = lines.first; line < lines.end; line += kCacheLine) {
    if (line >= lines.first_written)
      prefetch_line_for_write(reinterpret_cast<const void*>(line));
    else
      prefetch_line(reinterpret_cast<const void*>(line));
  }
}
inline void prefetch_buffer_head(const GuestMemory& memory, uint64_t addr, uint32_t len,
                                 uint32_t bytes, uint32_t written_from, uint32_t hinted_from = 0) {
  if (bytes < len) len = bytes;
  const uint8_t* p = len != 0 ? memory.translate(addr, len) : nullptr;
  prefetch_host_lines(p, len, len, written_from, hinted_from);
}

// Where the hints for a guest TX buffer of `len` bytes start: at the packet, past the
// `hdr_size`-byte header, unless the buffer holds the header alone. The header's line is left to
// the hardware, which fetches it with the packet's (the line before). A hint on it made our
// CPU's prefetcher take the lines before it as well: virtio_user's header sits at the end of its
// mbuf's headroom, so those are the guest's own rte_mbuf, whose next stores then waited for them
// to come back (far placement, PVP 64 B; docs/benchmarks.md, "The guest's side of PVP 64 B").
inline uint32_t tx_hints_from(uint32_t len, uint32_t hdr_size) {
  return len > hdr_size ? hdr_size : 0;
}

// Cache hints for a guest TX buffer: the packet's first `packet_bytes` past the `hdr_size`-byte
// header (tx_hints_from). For every ring format.
inline void prefetch_tx_buffer_head(const GuestMemory& memory, uint64_t addr, uint32_t len,
                                    uint32_t hdr_size, uint32_t packet_bytes) {
  prefetch_buffer_head(memory, addr, len, hdr_size + packet_bytes, kBufferNotWritten,
                       tx_hints_from(len, hdr_size));
}

// Hints for a chain's first buffer, `len` bytes at `addr`, given `host`, its translation whole
// (nullptr when it spans regions: the head may still lie in one). Guest RX: the first `bytes`,
// written from `written_from` on. Guest TX: the packet's first `packet_bytes` past the
// `hdr_size`-byte header (tx_hints_from). For every ring format.
inline void hint_rx_buffer(const GuestMemory& memory, uint64_t addr, uint32_t len,
                           const uint8_t* host, uint32_t bytes, uint32_t written_from) {
  if (host != nullptr)
    prefetch_host_lines(host, len, bytes, written_from);
  else
    prefetch_buffer_head(memory, addr, len, bytes, written_from);
}
inline void hint_tx_buffer(const GuestMemory& memory, uint64_t addr, uint32_t len,
                           const uint8_t* host, uint32_t hdr_size, uint32_t packet_bytes) {
  if (host != nullptr)
    prefetch_host_lines(host, len, hdr_size + packet_bytes, kBufferNotWritten,
                        tx_hints_from(len, hdr_size));
  else
    prefetch_tx_buffer_head(memory, addr, len, hdr_size, packet_bytes);
}

// A split chain's first descriptor read once, and its buffer translated whole (nullptr when the
// head is outside the table, the descriptor indirect or the buffer not inside one region): a
// burst hints the buffer's lines and later takes it from the same copy, so what it checks is
// what it uses.
struct FirstBuffer {
  VringDesc desc;  // all zero when the head is outside the table
  uint8_t* host;
  // No member initializers: a burst's array of them is left unwritten until its hint pass.
};

class DescChainReader {
 public:
  DescChainReader() = default;
  DescChainReader(const VringDesc* table, uint16_t ring_size, const GuestMemory* memory,
                  bool indirect_negotiated)
      : table_(table),
        ring_size_(ring_size),
        memory_(memory),
        indirect_negotiated_(indirect_negotiated) {}

  // Appends the chain's buffers to `out`, in order. On error `out` holds a partial chain: callers
  // truncate it back. With `visited`, adds the descriptors read (at most the chain bound), for
  // callers that bound a burst's work.
  ChainError read(uint16_t head, ChainAccess access, IoVecList& out,
                  uint32_t* visited = nullptr) const {
    const uint32_t bound = ring_size_ < IoVecList::kCapacity ? ring_size_ : IoVecList::kCapacity;
    uint32_t left = bound;
    const ChainError error = walk(head, access, out, left);
    if (visited != nullptr) *visited += bound - left;
    return error;
  }

  // The common case, checked quickly: a chain of one descriptor (no NEXT, no INDIRECT) in the
  // given direction, non-empty and whole inside one guest region. Its buffer, or nullptr when the
  // chain is anything else — then read() decides. Never accepts what read() would reject.
  uint8_t* single_buffer(uint16_t head, ChainAccess access, uint32_t* len) const {
    if (head >= ring_size_) return nullptr;
    const VringDesc d = load_desc(table_, head);
    const uint16_t want = access == ChainAccess::kDeviceWrites ? kVringDescFWrite : 0;
    if (d.flags != want || d.len == 0) return nullptr;
    *len = d.len;
    return memory_->translate(d.addr, d.len);
  }

  // Chain `head`'s first descriptor and buffer, for single_buffer(const FirstBuffer&, ...).
  FirstBuffer first_buffer(uint16_t head) const {
    FirstBuffer f{};
    if (head >= ring_size_) return f;
    f.desc = load_desc(table_, head);
    if (!(f.desc.flags & kVringDescFIndirect)) f.host = memory_->translate(f.desc.addr, f.desc.len);
    return f;
  }
  // single_buffer() on a first descriptor read before: the same answer for the same descriptor.
  static uint8_t* single_buffer(const FirstBuffer& f, ChainAccess access, uint32_t* len) {
    const uint16_t want = access == ChainAccess::kDeviceWrites ? kVringDescFWrite : 0;
    if (f.desc.flags != want || f.desc.len == 0) return nullptr;
    *len = f.desc.len;
    return f.host;
  }
  const GuestMemory& memory() const { return *memory_; }

 private:
  ChainError walk(uint16_t head, ChainAccess access, IoVecList& out, uint32_t& budget) const;

  const VringDesc* table_ = nullptr;
  uint16_t ring_size_ = 0;
  const GuestMemory* memory_ = nullptr;
  bool indirect_negotiated_ = false;
};

}  // namespace vqs
