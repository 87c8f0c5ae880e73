// SPDX-License-Identifier: BSD-3-Clause
#include "vhost/vhost_port_options.h"

namespace vqs {

std::string OptionLimits::range() const { return std::to_string(min) + ".." + std::to_string(max); }

std::optional<OptionConflict> find_option_conflict(
    const VhostPortOptions& options, const std::function<bool(OptionConflict::Option)>& given) {
  using Option = OptionConflict::Option;
  if (given(Option::kReconnect) && !options.client)
    return OptionConflict{Option::kReconnect, "to client mode"};
  // The frontend owns a client's socket.
  if (options.client && given(Option::kSocketMode))
    return OptionConflict{Option::kSocketMode, "to server mode"};
  if (options.client && given(Option::kSocketGroup))
    return OptionConflict{Option::kSocketGroup, "to server mode"};
  if (!options.zero_copy && given(Option::kZeroCopyMinLen))
    return OptionConflict{Option::kZeroCopyMinLen, "with zero-copy"};
  if (!options.zero_copy && given(Option::kZeroCopyFallback))
    return OptionConflict{Option::kZeroCopyFallback, "with zero-copy"};
  return std::nullopt;
}

}  // namespace vqs
