// SPDX-License-Identifier: BSD-3-Clause
// The switch's log type, "vqs.switch" (`--log-level=vqs.switch:debug` in eal.args).
#pragma once

#include <rte_log.h>

extern int vqs_switch_logtype;

#define SWITCH_LOG(level, fmt, ...) \
  rte_log(RTE_LOG_##level, vqs_switch_logtype, "vqswitch: " fmt "\n", ##__VA_ARGS__)
