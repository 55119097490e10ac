#pragma once
// The partitioned progression engine driven by the UCX transport (across (emulated) nodes):
// the worker progresses on every pass, and a peer's endpoint is checked only while a job
// with that peer has work (ProgressEngine::set_progress), so a peer that leaves once its
// requests are done is not reported as a failure of the others.
#include "net/ucx_transport.hpp"
#include "part/engine.hpp"

namespace weft::part {

inline void drive_with(ProgressEngine& engine, net::UcxTransport* ucx) {
  engine.set_progress([ucx] { ucx->progress_worker(); }, [ucx](int peer) { ucx->check_peer(peer); });
}

}  // namespace weft::part
