// SPDX-License-Identifier: BSD-3-Clause
#include "vhost/socket_access.h"

#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace vqs {

std::optional<mode_t> parse_socket_mode(const std::string& text, std::string* why) {
  mode_t mode = 0;
  bool digits = !text.empty() && text.size() <= 4;
  for (char c : text) {
    if (c < '0' || c > '7') digits = false;
    if (digits) mode = static_cast<mode_t>(mode * 8 + static_cast<mode_t>(c - '0'));
  }
  if (!digits || mode > 0777) {
    *why = "must be octal permission bits such as \"0660\" (at most 0777)";
    return std::nullopt;
  }
  return mode;
}

std::optional<gid_t> parse_socket_group(const std::string& text, std::string* why) {
  if (text.empty()) {
    *why = "must be a group name or id";
    return std::nullopt;
  }
  std::vector<char> buf(16384);
  group entry{};
  group* found = nullptr;
  int rc = getgrnam_r(text.c_str(), &entry, buf.data(), buf.size(), &found);
  if (rc == 0 && found != nullptr) return found->gr_gid;
  if (text.find_first_not_of("0123456789") == std::string::npos && text.size() <= 9) {
    const auto gid = static_cast<gid_t>(std::stoul(text));
    rc = getgrgid_r(gid, &entry, buf.data(), buf.size(), &found);
    if (rc == 0 && found != nullptr) return gid;
  }
  *why = "no group \"" + text + "\" on this host";
  return std::nullopt;
}

bool apply_socket_access(const std::string& path, const SocketAccess& access, std::string* why) {
  if (access.group && chown(path.c_str(), static_cast<uid_t>(-1), *access.group) != 0) {
    *why = std::string("cannot give the socket its group: ") + std::strerror(errno);
    return false;
  }
  if (access.mode && chmod(path.c_str(), *access.mode) != 0) {
    *why = std::string("cannot give the socket its mode: ") + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace vqs
