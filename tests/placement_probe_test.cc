// SPDX-License-Identifier: BSD-3-Clause
// The placement probe: which crossings make a guest far or near, and what it ignores.
#include "ring/placement_probe.h"

#include <catch2/catch.hpp>

using namespace vqs;

namespace {

constexpr uint64_t kHz = 2000000000;  // 2 cycles a ns
constexpr uint64_t kNear = 2 * 40;    // a line crossing within a shared cache
constexpr uint64_t kFar = 2 * 120;    // between dies: 90-160 ns measured, ~120 on average

}  // namespace

TEST_CASE("placement probe: far after far crossings, near again after near ones") {
  PlacementProbe probe;
  probe.start(kHz);
  CHECK_FALSE(probe.far());  // no samples: near, nothing given back
  probe.add_sample(kFar);
  CHECK(probe.far());
  for (int i = 0; i < 40; ++i) probe.add_sample(kNear);
  CHECK_FALSE(probe.far());
  CHECK(probe.average_cycles() < 2 * PlacementProbe::kNearNs);
  for (int i = 0; i < 40; ++i) probe.add_sample(kFar);
  CHECK(probe.far());
  CHECK(probe.samples() == 81);
}

TEST_CASE("placement probe: between the thresholds the class holds (hysteresis)") {
  const uint64_t between = 2 * (PlacementProbe::kNearNs + PlacementProbe::kFarNs) / 2;
  PlacementProbe probe;
  probe.start(kHz);
  for (int i = 0; i < 40; ++i) probe.add_sample(kNear);
  for (int i = 0; i < 40; ++i) probe.add_sample(between);
  CHECK_FALSE(probe.far());
  for (int i = 0; i < 40; ++i) probe.add_sample(kFar);
  for (int i = 0; i < 40; ++i) probe.add_sample(between);
  CHECK(probe.far());
}

TEST_CASE(
    "placement probe: one stretched sample (an interrupt, a preemption) does not make a "
    "near guest far") {
  PlacementProbe probe;
  probe.start(kHz);
  for (int i = 0; i < 40; ++i) probe.add_sample(kNear);
  probe.add_sample(uint64_t{1} << 40);  // ~9 minutes at 2 GHz
  CHECK_FALSE(probe.far());
  for (int i = 0; i < 40; ++i) probe.add_sample(kNear);
  CHECK(probe.average_cycles() < 2 * PlacementProbe::kNearNs);
}

TEST_CASE(
    "placement probe: one timed load in kSampleEvery polls, a sample only when the index "
    "moved") {
  PlacementProbe probe;
  probe.start(kHz);
  int due = 0;
  for (uint32_t i = 0; i < 10 * PlacementProbe::kSampleEvery; ++i) due += probe.due() ? 1 : 0;
  CHECK(due == 10);

  alignas(64) uint16_t idx = 7;
  CHECK(probe.timed_load(&idx, 7) == 7);  // the same index: the line did not cross
  CHECK(probe.samples() == 0);
  idx = 9;
  CHECK(probe.timed_load(&idx, 7) == 9);
  CHECK(probe.samples() == 1);
}

TEST_CASE("placement probe: without a TSC rate it never samples and never says far") {
  PlacementProbe probe;
  probe.start(0);
  CHECK_FALSE(probe.enabled());
  for (uint32_t i = 0; i < 4 * PlacementProbe::kSampleEvery; ++i) CHECK_FALSE(probe.due());
  CHECK_FALSE(probe.far());
}

TEST_CASE("placement probe: the reading monitoring shows, in ns") {
  PlacementProbe probe;
  CHECK_FALSE(probe.reading().measured);  // never started
  probe.start(kHz);
  CHECK_FALSE(probe.reading().measured);  // no samples yet
  probe.add_sample(kFar);
  PlacementProbe::Reading r = probe.reading();
  CHECK(r.measured);
  CHECK(r.far);
  CHECK(r.line_ns == kFar / 2);
  for (int i = 0; i < 40; ++i) probe.add_sample(kNear);
  r = probe.reading();
  CHECK_FALSE(r.far);
  CHECK(r.line_ns >= kNear / 2);
  CHECK(r.line_ns < PlacementProbe::kNearNs);
  probe.start(0);  // stopped: what it measured is gone
  r = probe.reading();
  CHECK_FALSE(r.measured);
  CHECK(r.line_ns == 0);
}
