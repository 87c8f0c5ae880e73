// SPDX-License-Identifier: BSD-3-Clause
// The vhost layer's log line: librte_vhost's callbacks, the session, the message checks.
#pragma once

#include <rte_log.h>

#define VQS_LOG(level, fmt, ...) \
  rte_log(RTE_LOG_##level, RTE_LOGTYPE_USER1, "vqs: " fmt "\n", ##__VA_ARGS__)
