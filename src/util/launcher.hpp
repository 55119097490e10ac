// The GPU tests' launcher: starts one process per rank (fork), hands each the unique id
// through a pipe, waits for all of them with a deadline, and kills what is left after it.
//
// The parent never touches CUDA (a CUDA context does not survive fork): it asks a probe
// child how many GPUs there are. Exit codes: 0 pass, 1 fail, 77 skipped (CTest's
// SKIP_RETURN_CODE), as for every GPU test.
#pragma once

#include <functional>
#include <string>

#include "weft/weft.h"

namespace weft::gputest {

constexpr int kSkip = 77;

/// Number of CUDA devices, found in a child process (0 when CUDA is unusable).
int probe_device_count();

/// Runs body(rank, id) in `nranks` processes; rank r uses device r % devices (set before
/// body runs; a rank whose cudaSetDevice fails prints the CUDA error and exits 4), so with fewer GPUs than ranks the ranks share them round-robin (a check of
/// correctness, not of speed; it says so on stdout). Skips only without any GPU. `skip_ranks` lists ranks that are started but given no id (they exit at
/// once): "a rank never joins". Returns 0 when every started rank returned 0, kSkip when
/// any returned kSkip, else 1. Ranks still running after `timeout_s` are killed (fail).
int run_ranks(int nranks, const std::function<int(int rank, const weftUniqueId& id)>& body, double timeout_s,
              const std::string& name, std::initializer_list<int> skip_ranks = {});

/// Waits for `stream` with a deadline (a hang becomes a failure, not a stuck test).
/// Returns false on timeout or CUDA error.
bool sync_bounded(weftStream_t stream, double timeout_s);

}  // namespace weft::gputest
