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
    "refill_threshold, zerocopy, zerocopy_min_len, socket_mode, socket_group";

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
    if (key == "iface") {
      if (value == nullptr || *value == '\0') return bad("a socket path is required");
      if (std::string(value).size() >= sizeof(sockaddr_un::sun_path))
        return bad("a socket path shorter than 108 bytes");
      options.path = value;
      have_iface = true;
    } else if (key == "queues") {
      if (!parse_uint(value, kMaxQueuePairs, &n) || n == 0) return bad("must be 1..128");
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
      if (!parse_uint(value, NotifyPolicy::kMaxCoalescePackets, &n)) return bad("must be 0..1024");
      options.notify.coalesce_packets = static_cast<uint32_t>(n);
    } else if (key == "notify_coalesce_usecs") {
      if (!parse_uint(value, NotifyPolicy::kMaxCoalesceUsecs, &n)) return bad("must be 0..1000000");
      options.notify.coalesce_usecs = static_cast<uint32_t>(n);
    } else if (key == "refill_threshold") {
      if (!parse_uint(value, NotifyPolicy::kMaxRefillThreshold, &n))
        return bad("must be 0..32768 (0: ring size / 2)");
      options.notify.refill_threshold = static_cast<uint32_t>(n);
    } else if (key == "zerocopy") {
      if (!parse_uint(value, 1, &n)) return bad("must be 0 or 1");
      options.zero_copy = n == 1;
    } else if (key == "zerocopy_min_len") {
      if (!parse_uint(value, UINT16_MAX, &n) || n < 64) return bad("must be 64..65535 (bytes)");
      options.zero_copy_min_len = static_cast<uint32_t>(n);
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
  if (seen.count("reconnect") && !options.client) {
    *error = "devarg 'reconnect' applies to client mode only (add client=1)";
    return std::nullopt;
  }
  if ((seen.count("socket_mode") || seen.count("socket_group")) && options.client) {
    *error = std::string("devarg '") +
             (seen.count("socket_mode") ? "socket_mode" : "socket_group") +
             "' applies to server mode only (the frontend owns a client's socket)";
    return std::nullopt;
  }
  if (seen.count("zerocopy_min_len") && !options.zero_copy) {
    *error = "devarg 'zerocopy_min_len' applies with zero-copy only (add zerocopy=1)";
    return std::nullopt;
  }
  return options;
}

}  // namespace vqs
