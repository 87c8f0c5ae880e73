// SPDX-License-Identifier: BSD-3-Clause
// Who may connect to a vhost-user server socket: its file mode and group, as the owner of the
// port asks for them (YAML socket_mode/socket_group, devargs socket_mode=/socket_group=). Without
// them the socket gets the process umask and group. No EAL here.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace vqs {

struct SocketAccess {
  std::optional<mode_t> mode;  // permission bits only (0..0777)
  std::optional<gid_t> group;
  bool operator==(const SocketAccess&) const = default;
};

// "0660" or "660": octal permission bits, nothing above 0777 (no setuid, setgid or sticky).
std::optional<mode_t> parse_socket_mode(const std::string& text, std::string* why);
// A group name ("kvm") or a numeric id ("107") that exists on this host.
std::optional<gid_t> parse_socket_group(const std::string& text, std::string* why);
// Applies `access` to the socket at `path` (group first, then mode). False with `why`.
bool apply_socket_access(const std::string& path, const SocketAccess& access, std::string* why);
// Prepares a server socket's path for bind(): nothing there, or a stale socket file that is
// removed (*removed_stale). Anything else is an error and is left as it is: a socket another
// process accepts on, and any path that is not a socket (a regular file is never deleted).
bool clear_server_socket_path(const std::string& path, bool* removed_stale, std::string* error);

}  // namespace vqs
