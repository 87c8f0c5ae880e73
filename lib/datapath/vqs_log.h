// SPDX-License-Identifier: BSD-3-Clause
// The library's log type, "vqs.lib" (`--log-level=vqs.lib:debug`), used by every layer with EAL.
#pragma once

#include <rte_log.h>

extern int vqs_lib_logtype;

#define VQS_LOG(level, fmt, ...) \
  rte_log(RTE_LOG_##level, vqs_lib_logtype, "vqs: " fmt "\n", ##__VA_ARGS__)
