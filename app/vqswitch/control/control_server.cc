// SPDX-License-Identifier: BSD-3-Clause
#include "control/control_server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace vqs::app {
namespace {

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

bool send_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

bool split_request(const std::string& request, std::vector<std::string>* args) {
  args->clear();
  size_t start = 0;
  while (start < request.size()) {
    const size_t end = request.find('\0', start);
    if (end == std::string::npos) return false;
    args->push_back(request.substr(start, end - start));
    start = end + 1;
  }
  return true;
}

std::unique_ptr<ControlServer> ControlServer::create(const std::string& path,
                                                     const SocketAccess& access, Handler handler,
                                                     std::string* error) {
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    *error = "control socket " + path + ": cannot create " + dir.string() + ": " + ec.message();
    return nullptr;
  }
  bool removed_stale = false;
  std::string why;
  if (!clear_server_socket_path(path, &removed_stale, &why)) {
    *error = "control socket " + path + ": " + why;
    return nullptr;
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = "control socket " + path + ": " + errno_text("socket");
    return nullptr;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), std::min(path.size(), sizeof(addr.sun_path) - 1));
  // The file is created with the socket's own mode: owner only from the start, never wider for
  // a moment before the chmod below.
  (void)fchmod(fd, 0600);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, static_cast<int>(kMaxClients)) != 0) {
    *error = "control socket " + path + ": " + errno_text("bind/listen");
    close(fd);
    return nullptr;
  }
  SocketAccess wanted = access;
  if (!wanted.mode) wanted.mode = 0600;
  if (!apply_socket_access(path, wanted, &why)) {
    *error = "control socket " + path + ": " + why;
    close(fd);
    unlink(path.c_str());
    return nullptr;
  }
  return std::unique_ptr<ControlServer>(new ControlServer(path, fd, std::move(handler)));
}

ControlServer::~ControlServer() {
  for (Client& c : clients_) close(c.fd);
  close(listen_fd_);
  unlink(path_.c_str());
}

void ControlServer::add_poll_fds(std::vector<pollfd>* fds) const {
  fds->push_back({listen_fd_, POLLIN, 0});
  for (const Client& c : clients_) fds->push_back({c.fd, POLLIN, 0});
}

void ControlServer::handle(const std::vector<pollfd>& fds, size_t first, uint64_t now_ms) {
  // Clients first, in the order add_poll_fds gave them; accept after, so the order holds.
  std::vector<Client> kept;
  for (size_t i = 0; i < clients_.size(); ++i) {
    Client& c = clients_[i];
    const size_t at = first + 1 + i;
    const bool ready = at < fds.size() && fds[at].fd == c.fd && fds[at].revents != 0;
    bool keep = true;
    if (ready) {
      keep = read_request(c);
    } else if (now_ms >= c.deadline_ms) {
      ++refused_;
      keep = false;
    }
    if (keep) {
      kept.push_back(std::move(c));
    } else {
      close(c.fd);
    }
  }
  clients_ = std::move(kept);
  if (first < fds.size() && fds[first].fd == listen_fd_ && (fds[first].revents & POLLIN) != 0)
    accept_clients(now_ms);
}

void ControlServer::accept_clients(uint64_t now_ms) {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN: none left; anything else: the client's problem
    if (clients_.size() >= kMaxClients) {
      ++refused_;
      close(fd);
      continue;
    }
    clients_.push_back({fd, now_ms + kClientTimeoutMs, {}});
  }
}

bool ControlServer::read_request(Client& client) {
  char buf[4096];
  for (;;) {
    const ssize_t n = recv(client.fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;  // more later, or gone
    if (n == 0) {
      answer(client);
      return false;
    }
    if (client.request.size() + static_cast<size_t>(n) > kMaxRequestBytes) {
      ++refused_;
      client.request.clear();
      std::string reply = "error\nrequest longer than ";  // appended: see commands.cc's cat()
      reply += std::to_string(kMaxRequestBytes);
      reply += " bytes\n";
      (void)send_all(client.fd, reply.data(), reply.size());
      return false;
    }
    client.request.append(buf, static_cast<size_t>(n));
  }
}

void ControlServer::answer(Client& client) {
  ++requests_;
  // The reply may be long (fdb-show): written blocking, bounded by a send timeout.
  const int flags = fcntl(client.fd, F_GETFL);
  if (flags >= 0) (void)fcntl(client.fd, F_SETFL, flags & ~O_NONBLOCK);
  const timeval timeout{kClientTimeoutMs / 1000, (kClientTimeoutMs % 1000) * 1000};
  (void)setsockopt(client.fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  std::vector<std::string> args;
  ControlReply reply;
  if (!split_request(client.request, &args) || args.empty()) {
    reply = {false, "malformed request: arguments each end in a NUL byte\n"};
  } else {
    reply = handler_(args);
  }
  const std::string text = (reply.ok ? "ok\n" : "error\n") + reply.text;
  (void)send_all(client.fd, text.data(), text.size());
}

}  // namespace vqs::app
