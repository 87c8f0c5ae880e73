// SPDX-License-Identifier: BSD-3-Clause
// rte_telemetry commands, for dpdk-telemetry.py (`--file-prefix` of the switch's EAL):
//   /vqswitch/ports         the port names
//   /vqswitch/ports,NAME    that port's counters (rx/tx, drops by reason)
//   /vqswitch/lcores        the forwarding lcores' ids
//   /vqswitch/lcores,ID     that lcore's packets, cycles, visits, sleeps and wake-ups
//   /vqswitch/queues        every polled rx queue as "NAME:Q", in polling order
//   /vqswitch/queues,NAME   port NAME's rx queues ("rxqQ"): lcore, weights, rx, visits ended by
//                           weight / empty; /vqswitch/queues,NAME:Q one of them
// Lists without a parameter, as /ethdev/list: a reply holds 16 KiB, too little for the counters
// of hundreds of guests.
#pragma once

#include "core/switch.h"

namespace vqs::app {

// Registers the commands (once per process) and points them at `sw`; nullptr detaches them
// (they then answer with an empty list, or an error), waiting for a command in progress to finish.
void telemetry_attach(const Switch* sw);

}  // namespace vqs::app
