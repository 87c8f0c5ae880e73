// rte_telemetry commands, for dpdk-telemetry.py (`--file-prefix` of the switch's EAL):
//   /vqswitch/ports         the port names
//   /vqswitch/ports,NAME    that port's counters (rx/tx, drops by reason)
//   /vqswitch/lcores        per forwarding lcore: packets, cycles, visits, sleeps
//   /vqswitch/queues[,NAME] per polled rx queue (of port NAME): port, queue, lcore, weights,
//                           visits ended by weight / empty
#pragma once

#include "switch.h"

namespace vqs::app {

// Registers the commands (once per process) and points them at `sw`; nullptr detaches them
// (they then answer with an empty dictionary), waiting for a command in progress to finish.
void telemetry_attach(const Switch* sw);

}  // namespace vqs::app
