// SPDX-License-Identifier: BSD-3-Clause
// rte_telemetry commands for dpdk-telemetry.py: /vqswitch/ports, /vqswitch/lcores and
// /vqswitch/queues list names; with a parameter they give one entry's counters. Only lists go
// without one: a reply holds 16 KiB. See docs/architecture.md, "The switch".
#pragma once

#include "core/switch.h"

namespace vqs::app {

// Registers the commands (once per process) and points them at `sw`; nullptr detaches them
// (they then answer with an empty list, or an error), waiting for a command in progress to finish.
void telemetry_attach(const Switch* sw);

}  // namespace vqs::app
