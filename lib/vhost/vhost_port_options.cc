// SPDX-License-Identifier: BSD-3-Clause
#include "vhost/vhost_port_options.h"

namespace vqs {

std::string OptionLimits::range() const { return std::to_string(min) + ".." + std::to_string(max); }

std::optional<OptionConflict> find_option_conflict(const VhostPortOptions& options,
                                                   const std::function<bool(const char*)>& given) {
  using Needs = OptionConflict::Needs;
  if (!options.client && given("reconnect"))
    return OptionConflict{"reconnect", Needs::kClientMode, "to client mode"};
  // The frontend owns a client's socket.
  for (const char* key : {"socket_mode", "socket_group"})
    if (options.client && given(key))
      return OptionConflict{key, Needs::kServerMode, "to server mode"};
  for (const char* key : {"zerocopy_min_len", "zerocopy_fallback"})
    if (!options.zero_copy && given(key))
      return OptionConflict{key, Needs::kZeroCopy, "with zero-copy"};
  return std::nullopt;
}

std::optional<LineRelease> parse_line_release(std::string_view word) {
  if (word == "auto") return LineRelease::kAuto;
  if (word == "on") return LineRelease::kOn;
  if (word == "off") return LineRelease::kOff;
  return std::nullopt;
}

const char* line_release_name(LineRelease mode) {
  switch (mode) {
    case LineRelease::kAuto:
      return "auto";
    case LineRelease::kOn:
      return "on";
    case LineRelease::kOff:
      return "off";
  }
  return "?";
}

}  // namespace vqs
