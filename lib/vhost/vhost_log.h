// SPDX-License-Identifier: BSD-3-Clause
// The vhost layer's log line: librte_vhost's callbacks, the session, the message checks.
#pragma once

#include "datapath/vqs_log.h"  // VQS_LOG on the "vqs.lib" log type
