// SPDX-License-Identifier: BSD-3-Clause
#include "datapath/vqs_log.h"

RTE_LOG_REGISTER(vqs_lib_logtype, vqs.lib, INFO);
