// SPDX-License-Identifier: BSD-3-Clause
#include "ports/switch_log.h"

RTE_LOG_REGISTER(vqs_switch_logtype, vqs.switch, INFO);
