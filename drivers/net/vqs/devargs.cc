// SPDX-License-Identifier: BSD-3-Clause
#include "devargs.h"

#include <rte_kvargs.h>

#include <sys/un.h>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <set>

namespace vqs {
namespace {

constexpr const char* kValidKeys =
    "iface, queues, client, reconnect, tso, notify_coalesce_packets, notify_coalesce_usecs, "
    "refill_threshold, zerocopy, zerocopy_min_len, desc_release, buffer_release, "
    "interrupt_recheck_us, socket_mode, socket_group";

bool parse_uint(const char* text, uint64_t max, uint64_t* out) {
  if (text == nullptr || *text == '\0' || *text == '-' || *text == '+') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || v > max) return false;
  *out = v;
  return true;
}

}  // namespace

std::optional<VhostDeviceOptions> parse_devargs(const char* args, std::string* error) {
  VhostDeviceOptions options;
  std::unique_ptr<rte_kvargs, decltype(&rte_kvargs_free)> kvlist(
      rte_kvargs_parse(args != nullptr ? args : "", nullptr), rte_kvargs_free);
  if (!kvlist) {
    *error = std::string("cannot parse devargs '") + (args ? args : "") +
             "' (expected key=value pairs separated by commas)";
    return std::nullopt;
  }
  std::set<std::string> seen;
  bool have_iface = false;
  for (unsigned i = 0; i < kvlist->count; ++i) {
    const std::string key = kvlist->pairs[i].key;
    const char* value = kvlist->pairs[i].value;
    if (!seen.insert(key).second) {
      *error = "devarg '" + key + "' given twice";
      return std::nullopt;
    }
    auto bad = [&](const std::string& expected) {
      *error = "devarg '" + key + "': " + expected + ", got '" + (value ? value : "") + "'";
      return std::nullopt;
    };
    uint64_t n = 0;
    // A number within `limits`, worded as every devarg's range is.
    auto number = [&](const OptionLimits& limits) {
      return parse_uint(value, limits.max, &n) && limits.contains(n);
    };
    auto out_of = [&](const OptionLimits& limits) {
      return bad("must be " + limits.range() + limits.note);
    };
    if (key == "iface") {
      if (value == nullptr || *value == '\0') return bad("a socket path is required");
      if (std::string(value).size() >= sizeof(sockaddr_un::sun_path))
        return bad("a socket path shorter than 108 bytes");
      options.path = value;
      have_iface = true;
    } else if (key == "queues") {
      if (!number(vhost_limits::kQueues)) return out_of(vhost_limits::kQueues);
      options.queue_pairs = static_cast<uint16_t>(n);
    } else if (key == "client") {
      if (!parse_uint(value, 1, &n)) return bad("must be 0 or 1");
      options.client = n == 1;
    } else if (key == "reconnect") {
      if (!parse_uint(value, 1, &n)) return bad("must be 0 or 1");
      options.reconnect = n == 1;
    } else if (key == "tso") {
      if (!parse_uint(value, 1, &n)) return bad("must be 0 or 1");
      options.tso = n == 1;
    } else if (key == "notify_coalesce_packets") {
      if (!number(vhost_limits::kNotifyCoalescePackets))
        return out_of(vhost_limits::kNotifyCoalescePackets);
      options.notify.coalesce_packets = static_cast<uint32_t>(n);
    } else if (key == "notify_coalesce_usecs") {
      if (!number(vhost_limits::kNotifyCoalesceUsecs))
        return out_of(vhost_limits::kNotifyCoalesceUsecs);
      options.notify.coalesce_usecs = static_cast<uint32_t>(n);
    } else if (key == "refill_threshold") {
      if (!number(vhost_limits::kRefillThreshold)) return out_of(vhost_limits::kRefillThreshold);
      options.notify.refill_threshold = static_cast<uint32_t>(n);
    } else if (key == "zerocopy") {
      if (!parse_uint(value, 1, &n)) return bad("must be 0 or 1");
      options.zero_copy = n == 1;
    } else if (key == "zerocopy_min_len") {
      if (!number(vhost_limits::kZeroCopyMinLen)) return out_of(vhost_limits::kZeroCopyMinLen);
      options.zero_copy_min_len = static_cast<uint32_t>(n);
    } else if (key == "desc_release" || key == "buffer_release") {
      const auto mode = parse_line_release(value ? value : "");
      if (!mode) return bad("must be auto, on or off");
      (key == "desc_release" ? options.desc_release : options.buffer_release) = *mode;
    } else if (key == "interrupt_recheck_us") {
      if (!number(vhost_limits::kInterruptRecheckUs))
        return out_of(vhost_limits::kInterruptRecheckUs);
      options.interrupt_recheck_us = static_cast<uint32_t>(n);
    } else if (key == "socket_mode") {
      std::string why;
      options.access.mode = parse_socket_mode(value ? value : "", &why);
      if (!options.access.mode) return bad(why);
    } else if (key == "socket_group") {
      std::string why;
      options.access.group = parse_socket_group(value ? value : "", &why);
      if (!options.access.group) return bad(why);
    } else {
      *error = "unknown devarg '" + key + "' (valid: " + kValidKeys + ")";
      return std::nullopt;
    }
  }
  if (!have_iface) {
    *error = "devarg 'iface' (the vhost-user socket path) is required";
    return std::nullopt;
  }
  const auto conflict =
      find_option_conflict(options, [&](const char* key) { return seen.count(key) > 0; });
  if (conflict) {
    const char* hint = conflict->needs == OptionConflict::Needs::kClientMode ? "add client=1"
                       : conflict->needs == OptionConflict::Needs::kZeroCopy
                           ? "add zerocopy=1"
                           : "the frontend owns a client's socket";
    *error = std::string("devarg '") + conflict->key + "' applies " + conflict->why + " only (" +
             hint + ")";
    return std::nullopt;
  }
  return options;
}

}  // namespace vqs
