// SPDX-License-Identifier: BSD-3-Clause
#include "datapath_fixture.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace vqs::test {

uint64_t test_ring_format() {
  static const uint64_t format = [] {
    const char* ring = std::getenv("VQS_TEST_RING");
    return ring != nullptr && std::strcmp(ring, "packed") == 0 ? bit(kFRingPacked) : 0;
  }();
  return format;
}

rte_mempool* test_pool() {
  static rte_mempool* pool =
      rte_pktmbuf_pool_create("vqs_test", 16383, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  if (pool == nullptr) throw std::runtime_error("mbuf pool");
  return pool;
}

rte_mempool* small_pool(unsigned size) {
  static int serial = 0;
  const std::string name = "vqs_small_" + std::to_string(serial++);
  rte_mempool* pool =
      rte_pktmbuf_pool_create(name.c_str(), size, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  if (pool == nullptr) throw std::runtime_error("small mbuf pool");
  return pool;
}

std::vector<uint8_t> mbuf_bytes(const rte_mbuf* m) {
  std::vector<uint8_t> out;
  uint32_t segs = 0;
  for (const rte_mbuf* s = m; s != nullptr; s = s->next, ++segs) {
    const auto* p = rte_pktmbuf_mtod(s, const uint8_t*);
    out.insert(out.end(), p, p + s->data_len);
  }
  REQUIRE(out.size() == m->pkt_len);
  REQUIRE(segs == m->nb_segs);
  return out;
}

rte_mbuf* make_mbuf(const std::vector<uint8_t>& data, rte_mempool* pool) {
  rte_mbuf* head = rte_pktmbuf_alloc(pool);
  REQUIRE(head != nullptr);
  rte_mbuf* seg = head;
  size_t off = 0;
  do {
    const size_t n = std::min<size_t>(data.size() - off, rte_pktmbuf_tailroom(seg));
    if (n) std::memcpy(rte_pktmbuf_append(head, static_cast<uint16_t>(n)), data.data() + off, n);
    off += n;
    if (off < data.size()) {
      rte_mbuf* next = rte_pktmbuf_alloc(pool);
      REQUIRE(next != nullptr);
      REQUIRE(rte_pktmbuf_chain(head, next) == 0);
      seg = next;
    }
  } while (off < data.size());
  REQUIRE(head->pkt_len == data.size());
  return head;
}

std::vector<rte_mbuf*> make_packets(int n, uint32_t size) {
  std::vector<rte_mbuf*> pkts;
  for (int i = 0; i < n; ++i) pkts.push_back(make_mbuf(make_frame(size, i)));
  return pkts;
}

void free_packets(const std::vector<rte_mbuf*>& pkts, size_t from) {
  for (size_t i = from; i < pkts.size(); ++i) rte_pktmbuf_free(pkts[i]);
}

}  // namespace vqs::test
