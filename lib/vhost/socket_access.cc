// SPDX-License-Identifier: BSD-3-Clause
#include "vhost/socket_access.h"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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

namespace {

const char* file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a socket";
}

}  // namespace

// Before librte_vhost binds (and, at unregistering, unlinks) the path: lstat, so a symlink is
// not followed; only a socket nobody accepts on is removed.
bool clear_server_socket_path(const std::string& path, bool* removed_stale, std::string* error) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return true;
    *error = std::string("cannot inspect the socket path: ") + std::strerror(errno);
    return false;
  }
  if (!S_ISSOCK(st.st_mode)) {
    *error = std::string("the path exists and is not a socket (") + file_kind(st.st_mode) +
             "); it is left as it is";
    return false;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    *error = "socket path longer than " + std::to_string(sizeof(addr.sun_path) - 1) + " bytes";
    return false;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket(): ") + std::strerror(errno);
    return false;
  }
  const bool live = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  const int err = errno;
  close(fd);
  if (live || err != ECONNREFUSED) {
    *error = live ? std::string("another process accepts connections on this socket")
                  : std::string("cannot probe the existing socket: ") + std::strerror(err);
    return false;
  }
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    *error = std::string("cannot remove the stale socket file: ") + std::strerror(errno);
    return false;
  }
  *removed_stale = true;
  return true;
}

}  // namespace vqs
