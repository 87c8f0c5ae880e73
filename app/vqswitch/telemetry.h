// rte_telemetry commands, for dpdk-telemetry.py (`--file-prefix` of the switch's EAL):
//   /vqswitch/ports   counters per port (rx/tx, drops by reason)
//   /vqswitch/lcores  per forwarding lcore: packets, busy share, visits, sleeps
//   /vqswitch/queues  per polled rx queue: lcore, weights, visits ended by weight / empty;
//                     with a port name as parameter, that port's queues only
#pragma once

#include "switch.h"

namespace vqs::app {

// Registers the commands (once per process) and points them at `sw`; nullptr detaches them
// (they then answer with an empty dictionary), waiting for a command in progress to finish.
void telemetry_attach(const Switch* sw);

}  // namespace vqs::app
