// SPDX-License-Identifier: BSD-3-Clause
// The hooks librte_vhost runs before and after each vhost-user message of a connection: a second
// frontend, a request outside what we negotiate and a memory table that does not fit its files
// are refused there; the device is told of each message (it suspends its vrings around those
// that change them) and answers GET_QUEUE_NUM itself.
#pragma once

#include <rte_vhost.h>

namespace vqs {

const rte_vhost_user_extern_ops& vhost_message_hooks();

}  // namespace vqs
