// started_epoch's memory operations on the CPU (weft/part/common.hpp; the device's are
// detail::DeviceStartedMemory): std::atomic words for the started cell and the host's started
// word, each call carrying its grid's number. Used by test_part_started.cpp and
// test_part_reuse.cpp.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "weft/part/common.hpp"

namespace weft::part {

/// One request's started cell and host word, and what the calls did to them.
struct Cell {
  std::atomic<uint64_t> w[kCellWords];
  std::atomic<uint64_t> started{0};
  std::atomic<uint64_t> host_loads{0};
  std::chrono::milliseconds read_delay{0};  ///< a host read held up this long
  std::chrono::milliseconds wait_limit{5000};
  Cell() {
    for (uint32_t i = 0; i < kCellWords; ++i) w[i] = cell_initial(i);
  }
};

/// started_epoch's memory operations over Cell for one call of grid `g` (DeviceStartedMemory's).
struct HostStartedMemory {
  Cell& c;
  uint64_t g;
  uint64_t stale = 0;  ///< non-zero: the host read returns this (a read made before a start)
  uint64_t grid() const { return g; }
  uint64_t take_reader(uint64_t v) { return c.w[kCellReader].exchange(v); }
  void give_back(uint64_t v) {
    uint64_t expect = v;
    c.w[kCellReader].compare_exchange_strong(expect, kNoGrid);
  }
  uint64_t load_reader() { return c.w[kCellReader].load(); }
  uint64_t load_published() { return c.w[kCellPublished].load(); }
  void raise_epoch(uint64_t e) {
    uint64_t old = c.w[kCellEpoch].load();
    while (old < e && !c.w[kCellEpoch].compare_exchange_weak(old, e)) {
    }
  }
  void publish(uint64_t v) { c.w[kCellPublished].store(v); }  // seq_cst: after raise_epoch
  uint64_t load_epoch() { return c.w[kCellEpoch].load(); }
  uint64_t load_started() {
    ++c.host_loads;
    const uint64_t s = stale != 0 ? stale : c.started.load();
    if (c.read_delay.count() > 0) std::this_thread::sleep_for(c.read_delay);
    return s;
  }
  template <typename Ready>
  bool wait(Ready ready) {
    const auto end = std::chrono::steady_clock::now() + c.wait_limit;
    while (!ready()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::yield();
    }
    return true;
  }
};

}  // namespace weft::part
