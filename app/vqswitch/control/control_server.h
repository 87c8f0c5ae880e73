// SPDX-License-Identifier: BSD-3-Clause
// The control socket vqswitchctl talks to: one request (NUL-terminated arguments), one reply
// ("ok" or "error", then text), then close. Served from the control thread's poll loop, never
// from a forwarding lcore. See docs/operations.md, "The protocol".
#pragma once

#include <poll.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vhost/socket_access.h"

namespace vqs::app {

struct ControlReply {
  bool ok = true;
  std::string text;  // ends with a newline unless empty
};

class ControlServer {
 public:
  using Handler = std::function<ControlReply(const std::vector<std::string>& args)>;

  static constexpr size_t kMaxRequestBytes = 64 << 10;
  static constexpr size_t kMaxClients = 16;
  static constexpr int kClientTimeoutMs = 2000;  // to send the whole request, and to read a reply

  // Listens on `path` (its directory created if missing; a stale socket there removed, anything
  // else refused), with `access` (mode 0600 when unset). nullptr with `error`.
  static std::unique_ptr<ControlServer> create(const std::string& path, const SocketAccess& access,
                                               Handler handler, std::string* error);
  ~ControlServer();  // closes every connection and removes the socket file
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  const std::string& path() const { return path_; }
  // Appends the descriptors to wait on (the listener, then each client) to `fds`.
  void add_poll_fds(std::vector<pollfd>* fds) const;
  // Given what poll() returned for the descriptors add_poll_fds appended (from `fds[first]`):
  // accepts, reads, and answers each complete request; drops clients past their time.
  void handle(const std::vector<pollfd>& fds, size_t first, uint64_t now_ms);

  uint64_t requests() const { return requests_; }
  uint64_t refused() const { return refused_; }  // too many clients, too long or too slow

 private:
  struct Client {
    int fd;
    uint64_t deadline_ms;
    std::string request;
  };

  ControlServer(std::string path, int listen_fd, Handler handler)
      : path_(std::move(path)), listen_fd_(listen_fd), handler_(std::move(handler)) {}
  void accept_clients(uint64_t now_ms);
  // false: the client is done with (answered, gone or refused) and must be closed.
  bool read_request(Client& client);
  void answer(Client& client);

  const std::string path_;
  const int listen_fd_;
  const Handler handler_;
  std::vector<Client> clients_;
  uint64_t requests_ = 0;
  uint64_t refused_ = 0;
};

// Splits a request into its NUL-terminated arguments; false when the last one is not terminated.
bool split_request(const std::string& request, std::vector<std::string>* args);

}  // namespace vqs::app
