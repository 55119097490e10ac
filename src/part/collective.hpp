// Partitioned collectives over a ContextImpl (internal): a schedule (schedule.hpp) whose
// neighbour pairs are internal partitioned requests on scratch buffers; the device handle
// (weft/part/collective_device.hpp) runs the steps inside the user's kernel.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "part/request.hpp"
#include "part/schedule.hpp"

namespace weft::part {

class CollectiveImpl : public Collective {
 public:
  CollectiveImpl(ContextImpl& ctx, Schedule sched, std::string name, void* buf, uint32_t partitions, uint64_t count,
                 int dtype, int op, int tag);
  ~CollectiveImpl() override;
  void start() override;
  void pbuf_prepare() override;
  bool test() override;
  void wait() override;
  bool parrived(uint32_t u) override;
  PcollDeviceHandle handle() const override { return handle_; }
  const PcollDeviceHandle* device_pointer() const override { return dev_handle_; }

 private:
  std::string who() const;
  void check_device_error();
  void upload();

  ContextImpl& ctx_;
  Schedule sched_;
  std::string name_;
  int tag_ = 0;
  std::vector<int> peers_;                      ///< neighbour ranks, index = PcollPeer index
  std::vector<std::unique_ptr<RequestImpl>> recvs_, sends_;  ///< by peer index (null: no such direction)
  std::vector<void*> scratch_;                  ///< by peer index
  PcollDeviceHandle handle_;
  PcollDeviceHandle* dev_handle_ = nullptr;
  PcollStep* dev_steps_ = nullptr;
  PcollPeer* dev_peers_ = nullptr;
  DeviceErrorRecord* err_host_ = nullptr;
  bool active_ = false, set_up_ = false, prepared_ = false;
  bool errored_ = false;                        ///< a misused epoch: the next start resyncs the counts
  uint64_t epoch_ = 0;
  uint32_t host_index_ = 0;
  uint64_t* host_ = nullptr;                    ///< the collective's host words (kWord*)
  // WEFT_PART_TRACE.
  EpochTrace trace_;
  EpochTrace::Clock::time_point prev_end_{};
  uint64_t trace_epoch_ = 0;
};

}  // namespace weft::part
