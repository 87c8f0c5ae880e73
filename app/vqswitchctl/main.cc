// SPDX-License-Identifier: BSD-3-Clause
// vqswitchctl: sends one command to a running vqswitch over its control socket and prints the
// reply (errors to stderr, exit status 1). Protocol: app/vqswitch/control/control_server.h.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "config/config.h"

namespace {

using vqs::app::kControlDir;
const std::string kDefaultPrefix = vqs::app::EalConfig().file_prefix;

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: vqswitchctl [-s SOCKET | --prefix FILE_PREFIX] COMMAND [ARGS] [--json]\n"
               "  -s SOCKET               the switch's control socket (control.socket)\n"
               "  --prefix FILE_PREFIX    the socket of the switch with this eal.file_prefix:\n"
               "                          %s/FILE_PREFIX.ctl (default prefix: %s)\n"
               "  --version               print the version and exit\n"
               "  vqswitchctl help        lists the commands\n",
               kControlDir, kDefaultPrefix.c_str());
}

bool send_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket_path;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    const std::string arg = argv[i];
    if ((arg == "-s" || arg == "--socket") && i + 1 < argc) {
      socket_path = argv[++i];
    } else if (arg == "--prefix" && i + 1 < argc) {
      socket_path = std::string(kControlDir) + "/" + argv[++i] + ".ctl";
    } else if (arg == "--version") {
      std::printf("vqswitchctl %s\n", VQS_VERSION);
      return 0;
    } else if (arg == "-h" || arg == "--help") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "vqswitchctl: unknown or incomplete option: %s\n", arg.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (i >= argc) {
    usage(stderr);
    return 2;
  }
  if (socket_path.empty()) socket_path = std::string(kControlDir) + "/" + kDefaultPrefix + ".ctl";

  std::string request;
  for (; i < argc; ++i) {
    request += argv[i];
    request += '\0';
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    std::fprintf(stderr, "vqswitchctl: %s: path too long for a unix socket\n", socket_path.c_str());
    return 2;
  }
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::fprintf(stderr, "vqswitchctl: cannot connect to %s: %s (is vqswitch running?)\n",
                 socket_path.c_str(), std::strerror(errno));
    return 2;
  }
  if (!send_all(fd, request) || shutdown(fd, SHUT_WR) != 0) {
    std::fprintf(stderr, "vqswitchctl: %s: sending the request: %s\n", socket_path.c_str(),
                 std::strerror(errno));
    return 2;
  }
  std::string reply;
  char buf[65536];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::fprintf(stderr, "vqswitchctl: %s: reading the reply: %s\n", socket_path.c_str(),
                   std::strerror(errno));
      return 2;
    }
    if (n == 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  const size_t eol = reply.find('\n');
  const std::string status = reply.substr(0, eol);
  const std::string text = eol == std::string::npos ? "" : reply.substr(eol + 1);
  if (status == "ok") {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  if (status == "error") {
    std::fprintf(stderr, "vqswitchctl: %s", text.c_str());
    return 1;
  }
  std::fprintf(stderr, "vqswitchctl: %s: no reply (the switch closed the connection)\n",
               socket_path.c_str());
  return 2;
}
