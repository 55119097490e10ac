#include "util/launcher.hpp"

#include <cuda_runtime_api.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

namespace weft::gputest {

int probe_device_count() {
  pid_t pid = fork();
  if (pid < 0) return 0;
  if (pid == 0) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    _exit(n > 100 ? 100 : n);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 0;
}

int run_ranks(int nranks, const std::function<int(int, const weftUniqueId&)>& body, double timeout_s,
              const std::string& name, std::initializer_list<int> skip_ranks) {
  const int ndev = probe_device_count();
  if (ndev == 0) {
    std::printf("%s: no GPU, skipped\n", name.c_str());
    return kSkip;
  }
  if (ndev < nranks)
    std::printf("%s: %d ranks share %d GPU(s) round-robin: a check of correctness, not of speed\n", name.c_str(),
                nranks, ndev);
  std::fflush(stdout);
  // A rank that exits early (or is never given an id) must not kill us through its pipe.
  signal(SIGPIPE, SIG_IGN);
  std::vector<pid_t> pids(static_cast<size_t>(nranks), -1);
  std::vector<int> pipes(static_cast<size_t>(nranks), -1);
  for (int r = 0; r < nranks; ++r) {
    int fds[2];
    if (pipe(fds) != 0) return 1;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[1]);
      bool skip = false;
      for (int s : skip_ranks) skip |= s == r;
      if (skip) _exit(0);
      weftUniqueId id;
      size_t got = 0;
      while (got < sizeof(id)) {
        ssize_t k = read(fds[0], id.internal + got, sizeof(id) - got);
        if (k <= 0) _exit(3);
        got += static_cast<size_t>(k);
      }
      close(fds[0]);
      if (const cudaError_t e = cudaSetDevice(r % ndev); e != cudaSuccess) {
        // Exit 4. Under CUDA MPS this is typically the server refusing clients after an earlier
        // client was killed with work on the GPU (cudaErrorMpsServerNotReady and kin).
        std::printf("%s: rank %d: cudaSetDevice(%d) failed: %s (%s)\n", name.c_str(), r, r % ndev, cudaGetErrorName(e),
                    cudaGetErrorString(e));
        std::fflush(stdout);
        _exit(4);
      }
      int rc = body(r, id);
      std::fflush(stdout);
      _exit(rc);
    }
    close(fds[0]);
    pids[static_cast<size_t>(r)] = pid;
    pipes[static_cast<size_t>(r)] = fds[1];
  }
  // The root thread lives in this (CUDA-free) parent process.
  weftUniqueId id;
  if (weftGetUniqueId(&id) != weftSuccess) {
    std::printf("%s: weftGetUniqueId failed: %s\n", name.c_str(), weftGetLastError(nullptr));
    for (pid_t p : pids) kill(p, SIGKILL);
    return 1;
  }
  for (int fd : pipes) {
    ssize_t k = write(fd, id.internal, sizeof(id));
    (void)k;
    close(fd);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int result = 0, left = nranks;
  std::vector<bool> done(static_cast<size_t>(nranks), false);
  while (left > 0) {
    for (int r = 0; r < nranks; ++r) {
      if (done[static_cast<size_t>(r)]) continue;
      int st = 0;
      pid_t w = waitpid(pids[static_cast<size_t>(r)], &st, WNOHANG);
      if (w == 0) continue;
      done[static_cast<size_t>(r)] = true;
      --left;
      int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
      if (rc == kSkip) {
        if (result == 0) result = kSkip;
      } else if (rc != 0) {
        std::printf("%s: rank %d exited with %d\n", name.c_str(), r, rc);
        result = 1;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < nranks; ++r)
        if (!done[static_cast<size_t>(r)]) {
          std::printf("%s: rank %d still running after %.0f s, killed\n", name.c_str(), r, timeout_s);
          kill(pids[static_cast<size_t>(r)], SIGKILL);
          waitpid(pids[static_cast<size_t>(r)], nullptr, 0);
        }
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return result;
}

bool sync_bounded(weftStream_t stream, double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    cudaError_t e = cudaStreamQuery(reinterpret_cast<cudaStream_t>(stream));
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady) {
      std::printf("stream error: %s\n", cudaGetErrorString(e));
      return false;
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace weft::gputest
