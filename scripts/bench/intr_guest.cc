// SPDX-License-Identifier: BSD-3-Clause
// The guest of the refill benchmark (switch_vs_ovs.sh --scenarios intr-rx): a receiver that
// sleeps until the switch notifies it, as a Linux guest's virtio-net does, fed by a paced sender
// in the same guest. Whether the receiver's ring runs dry while it sleeps depends on when the
// switch notifies it: at once, after coalescing, or early because of the refill threshold.
//
//   vqs-intr-guest EAL-ARGS -- --pps N [--burst B] [--size BYTES]
//
// Ports come in pairs per switch: the first of the active set ("set portlist A,B") sends, the
// second receives. One worker lcore waits in epoll(7) for two things only: a timerfd that ticks
// every B / N seconds, on which it sends one burst of B frames to A (what A's ring refuses is
// counted, not retried), and B's Rx interrupt (virtio_user's call eventfd for the queue,
// armed with rte_eth_dev_rx_intr_enable: the virtio driver clears VRING_AVAIL_F_NO_INTERRUPT),
// on which it drains B's queue and re-arms. The receiver never polls B otherwise: between two
// notifications its ring only fills. Reads testpmd's commands that switch_vs_ovs.sh sends from
// stdin ("set portlist A,B", "start", "stop", "show port stats all", "quit") and answers
// "show port stats all" with the rates since the previous one:
//   "Tx-pps: N" (sent), "Rx-pps: N" (received), and
//   "Intr: wakeups-ps N refused-ps N" (interrupts that woke the receiver, frames A's ring refused)
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "guest_commands.h"
#include "guest_frame.h"
#include "guest_port.h"

namespace {

using vqs::bench::PortList;

constexpr uint16_t kMaxBurst = 64;
constexpr uint64_t kMaxTicksAtOnce = 4;  // after a stall, catch up at most this many bursts

struct Counters {
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> refused{0};
  std::atomic<uint64_t> received{0};
  std::atomic<uint64_t> wakeups{0};
};

std::atomic<bool> g_stop{false};
vqs::bench::Published<PortList> g_active;  // {sender, receiver}; empty: stopped
Counters g_counters;
int g_control_fd = -1;  // eventfd: the main lcore wakes the worker for a new set or the end

struct Worker {
  rte_mempool* pool;
  uint32_t size;
  uint16_t burst;
  uint64_t interval_ns;
};

void clear_fd(int fd) {
  uint64_t value;
  while (read(fd, &value, sizeof(value)) == sizeof(value)) {
  }
}

void set_timer(int fd, uint64_t interval_ns) {
  itimerspec spec{};
  spec.it_interval = {static_cast<time_t>(interval_ns / 1000000000),
                      static_cast<long>(interval_ns % 1000000000)};
  spec.it_value = interval_ns ? spec.it_interval : timespec{};
  timerfd_settime(fd, 0, &spec, nullptr);
}

// Takes everything queued on `port` and leaves its interrupt armed on an empty queue (a frame
// that lands between the last empty burst and the arming is caught by the burst after it).
void drain(uint16_t port) {
  rte_mbuf* pkts[kMaxBurst];
  uint64_t received = 0;
  rte_eth_dev_rx_intr_disable(port, 0);
  while (true) {
    uint16_t n;
    while ((n = rte_eth_rx_burst(port, 0, pkts, kMaxBurst)) > 0) {
      received += n;
      rte_pktmbuf_free_bulk(pkts, n);
    }
    rte_eth_dev_rx_intr_enable(port, 0);
    n = rte_eth_rx_burst(port, 0, pkts, kMaxBurst);
    if (n == 0) break;
    received += n;
    rte_pktmbuf_free_bulk(pkts, n);
    rte_eth_dev_rx_intr_disable(port, 0);
  }
  g_counters.received.fetch_add(received, std::memory_order_relaxed);
}

void send_burst(const Worker& w, uint16_t port) {
  rte_mbuf* pkts[kMaxBurst];
  if (rte_pktmbuf_alloc_bulk(w.pool, pkts, w.burst) != 0) return;
  for (uint16_t i = 0; i < w.burst; ++i)
    vqs::bench::build_frame(pkts[i], w.size, RTE_ETHER_TYPE_IPV4);
  const uint16_t sent = rte_eth_tx_burst(port, 0, pkts, w.burst);
  if (sent < w.burst) rte_pktmbuf_free_bulk(pkts + sent, w.burst - sent);
  g_counters.sent.fetch_add(sent, std::memory_order_relaxed);
  g_counters.refused.fetch_add(w.burst - sent, std::memory_order_relaxed);
}

int worker_loop(void* arg) {
  const Worker& w = *static_cast<const Worker*>(arg);
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  const int timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (epoll_fd < 0 || timer_fd < 0) {
    std::fprintf(stderr, "vqs-intr-guest: epoll/timerfd: %s\n", std::strerror(errno));
    g_stop.store(true);
    return 1;
  }
  // Keys: the port id for an Rx interrupt, these two for the others.
  constexpr uint64_t kTimerKey = RTE_MAX_ETHPORTS, kControlKey = RTE_MAX_ETHPORTS + 1;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kTimerKey;
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, timer_fd, &ev);
  ev.data.u64 = kControlKey;
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, g_control_fd, &ev);
  std::vector<int> rx_fd(RTE_MAX_ETHPORTS, -1);
  uint16_t port;
  RTE_ETH_FOREACH_DEV(port) {
    rx_fd[port] = rte_eth_dev_rx_intr_ctl_q_get_fd(port, 0);
    if (rx_fd[port] < 0) {
      std::fprintf(stderr, "vqs-intr-guest: port %u has no Rx interrupt fd\n", port);
      g_stop.store(true);
      return 1;
    }
    rte_eth_dev_rx_intr_disable(port, 0);
    ev.data.u64 = port;
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, rx_fd[port], &ev);
  }
  uint32_t seen = 0;
  uint16_t tx = RTE_MAX_ETHPORTS, rx = RTE_MAX_ETHPORTS;  // RTE_MAX_ETHPORTS: stopped
  PortList ports;
  epoll_event events[8];
  while (!g_stop.load(std::memory_order_relaxed)) {
    const int n = epoll_wait(epoll_fd, events, 8, 100);  // 100 ms: to see g_stop
    for (int i = 0; i < n; ++i) {
      const uint64_t key = events[i].data.u64;
      if (key == kControlKey) {
        clear_fd(g_control_fd);
      } else if (key == kTimerKey) {
        uint64_t ticks = 0;
        if (read(timer_fd, &ticks, sizeof(ticks)) != sizeof(ticks)) continue;
        for (uint64_t t = 0; tx != RTE_MAX_ETHPORTS && t < std::min(ticks, kMaxTicksAtOnce); ++t)
          send_burst(w, tx);
      } else {
        clear_fd(rx_fd[key]);
        if (key != rx) continue;
        g_counters.wakeups.fetch_add(1, std::memory_order_relaxed);
        drain(rx);
      }
    }
    if (g_active.take(&seen, &ports)) {
      if (rx != RTE_MAX_ETHPORTS) rte_eth_dev_rx_intr_disable(rx, 0);
      tx = ports.size() == 2 ? ports[0] : RTE_MAX_ETHPORTS;
      rx = ports.size() == 2 ? ports[1] : RTE_MAX_ETHPORTS;
      set_timer(timer_fd, tx != RTE_MAX_ETHPORTS ? w.interval_ns : 0);
      if (rx != RTE_MAX_ETHPORTS) drain(rx);  // what an earlier period left, and arm
    }
  }
  close(timer_fd);
  close(epoll_fd);
  return 0;
}

void wake_worker() {
  const uint64_t one = 1;
  if (write(g_control_fd, &one, sizeof(one)) != sizeof(one)) std::perror("vqs-intr-guest: wake");
}

void on_signal(int) { g_stop.store(true); }

}  // namespace

int main(int argc, char** argv) {
  const int eal_args = rte_eal_init(argc, argv);
  if (eal_args < 0) {
    std::fprintf(stderr, "vqs-intr-guest: EAL init failed\n");
    return 1;
  }
  argc -= eal_args;
  argv += eal_args;
  uint64_t pps = 0;
  uint32_t burst = 32, size = 64;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--pps") == 0)
      pps = std::strtoull(argv[++i], nullptr, 10);
    else if (std::strcmp(argv[i], "--burst") == 0)
      burst = static_cast<uint32_t>(std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--size") == 0)
      size = static_cast<uint32_t>(std::atoi(argv[++i]));
  }
  if (pps == 0 || burst == 0 || burst > kMaxBurst || size < 60 || size > 1518) {
    std::fprintf(stderr,
                 "usage: vqs-intr-guest EAL-ARGS -- --pps N [--burst 1..64] [--size 60..1518]\n");
    return 2;
  }
  const unsigned worker = rte_get_next_lcore(-1, 1, 0);
  if (rte_eth_dev_count_avail() < 2 || worker >= RTE_MAX_LCORE) {
    std::fprintf(stderr, "vqs-intr-guest: needs two --vdev ports and a worker lcore\n");
    return 2;
  }
  rte_mempool* pool = rte_pktmbuf_pool_create("intr", 32767, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                              static_cast<int>(rte_socket_id()));
  g_control_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (pool == nullptr || g_control_fd < 0) {
    std::fprintf(stderr, "vqs-intr-guest: no mbuf pool or eventfd\n");
    return 1;
  }
  if (!vqs::bench::start_all_ports(pool, "vqs-intr-guest", true)) return 1;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  Worker w{pool, size, static_cast<uint16_t>(burst), uint64_t{1000000000} * burst / pps};
  rte_eal_remote_launch(worker_loop, &w, worker);
  vqs::bench::CounterRates<4> rates;
  vqs::bench::GuestCommands commands;
  commands.ports = 2;
  commands.start = [](const PortList& ports) {
    g_active.publish(ports);
    wake_worker();
  };
  commands.stop = [] {
    g_active.publish({});
    wake_worker();
  };
  commands.show = [&rates] {  // the rates since the previous "show"
    const auto r = rates.next({g_counters.sent.load(), g_counters.received.load(),
                               g_counters.wakeups.load(), g_counters.refused.load()});
    std::printf("  Tx-pps: %12lu\n  Rx-pps: %12lu\n  Intr: wakeups-ps %lu refused-ps %lu\n", r[0],
                r[1], r[2], r[3]);
  };
  vqs::bench::run_guest_commands(commands, g_stop);
  g_stop.store(true);
  wake_worker();
  rte_eal_wait_lcore(worker);
  vqs::bench::close_all_ports();
  return 0;
}
