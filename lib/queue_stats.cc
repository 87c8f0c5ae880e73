#include "queue_stats.h"

namespace vqs {

const char* drop_reason_name(DropReason reason) {
  switch (reason) {
    case DropReason::kInvalidDescriptor:
      return "invalid_descriptor";
    case DropReason::kNoGuestBuffer:
      return "no_guest_buffer";
    case DropReason::kTooLarge:
      return "too_large";
    case DropReason::kCount:
      break;
  }
  return "unknown";
}

}  // namespace vqs
