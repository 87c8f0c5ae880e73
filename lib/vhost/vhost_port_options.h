// SPDX-License-Identifier: BSD-3-Clause
// The options of a vhost port that its user sets — net_vqs's devargs, a vqswitch port mapping —
// with their defaults, limits and the rules between them, declared once. Each parser reads its own
// syntax and words its own errors from these. No EAL.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "datapath/lend_policy.h"
#include "ring/line_release.h"
#include "ring/notify_policy.h"
#include "vhost/socket_access.h"

namespace vqs {

// librte_vhost 22.11 serves at most this many queue pairs per device (VHOST_MAX_QUEUE_PAIRS).
constexpr uint16_t kMaxQueuePairs = 128;

struct VhostPortOptions {
  uint16_t queue_pairs = 1;  // served; vrings beyond them are never polled
  bool client = false;       // connect to the socket instead of listening on it
  bool reconnect = true;     // client mode: reconnect when the peer goes away
  SocketAccess access;       // server mode: the socket's mode and group, set when it is created
  bool tso = false;          // offer HOST/GUEST_TSO4/6
  NotifyPolicy notify;       // for each guest RX vring, applied when it starts
  // Guest TX: lend packets of at least zero_copy_min_len bytes instead of copying them, at most
  // min(128, ring size / 4) per vring at a time (see ZeroCopyTracker).
  bool zero_copy = false;
  uint32_t zero_copy_min_len = kDefaultZeroCopyMinLen;
  // At the limit, copy (true) or wait for a lent chain to come back (benchmarks only).
  bool zero_copy_fallback = true;
  // Split rings: descriptor lines read go back to the guest (auto: when its CPU shares no cache
  // with ours and it is the bottleneck; line_release.h).
  LineRelease desc_release = LineRelease::kAuto;
  // Guest TX, split rings: the head lines of a packet copied out of the guest's buffer go back
  // (its next writes there, the next packet's headers, then skip our copy; line_release.h). Auto
  // also asks that the guest send frames of its own, not forward ours (sender_gate.h).
  LineRelease buffer_release = LineRelease::kAuto;
  // Split rings without EVENT_IDX: how long a guest's "no interrupts" stands before it is read
  // again after a burst (SplitRing::set_interrupt_recheck); 0: after every burst. The owner must
  // flush between bursts (the PMD: the application's tx bursts, as notify_coalesce).
  uint32_t interrupt_recheck_us = 0;
  bool operator==(const VhostPortOptions&) const = default;
};

// A numeric option's limits, as both parsers check and word them.
struct OptionLimits {
  uint64_t min;
  uint64_t max;
  const char* note;  // after the range in messages, e.g. " (0: ring size / 2)"
  constexpr bool contains(uint64_t v) const { return v >= min && v <= max; }
  std::string range() const;  // "0..32768"
};

namespace vhost_limits {
constexpr OptionLimits kQueues{1, kMaxQueuePairs, ""};
constexpr OptionLimits kNotifyCoalescePackets{0, NotifyPolicy::kMaxCoalescePackets, ""};
constexpr OptionLimits kNotifyCoalesceUsecs{0, NotifyPolicy::kMaxCoalesceUsecs, ""};
constexpr OptionLimits kRefillThreshold{0, NotifyPolicy::kMaxRefillThreshold,
                                        " (0: ring size / 2)"};
constexpr OptionLimits kZeroCopyMinLen{64, 65535, " (bytes)"};
constexpr OptionLimits kInterruptRecheckUs{0, 1000, " (microseconds; 0: after every burst)"};
}  // namespace vhost_limits

// desc_release's and buffer_release's words, as YAML and devargs take them: "auto", "on", "off".
std::optional<LineRelease> parse_line_release(std::string_view word);
const char* line_release_name(LineRelease mode);

// A rule between options, broken: `key` (the same name in YAML and in devargs) was set where it
// does not apply. Each parser words it its own way ("devarg 'reconnect'", "ports[0].reconnect").
struct OptionConflict {
  enum class Needs { kClientMode, kServerMode, kZeroCopy };
  const char* key;
  Needs needs;
  const char* why;  // where it applies: "to client mode"
};
// `given(key)`: whether the user set that option (a default breaks no rule).
std::optional<OptionConflict> find_option_conflict(const VhostPortOptions& options,
                                                   const std::function<bool(const char*)>& given);

}  // namespace vqs
