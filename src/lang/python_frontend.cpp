#include "lang/python_frontend.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "lang/algorithm_file.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

extern char** environ;

namespace weft {

namespace fs = std::filesystem;

namespace {

// Exit statuses of the child (weft/_run.py).
constexpr int kProgramFailed = 2, kNoModule = 3;

// Imports the runner; a missing module is its own status so that the error can say so.
constexpr const char* kBootstrap =
    "import sys\n"
    "try:\n"
    "    import weft._run as run\n"
    "except ImportError as e:\n"
    "    sys.stderr.write('weft: cannot import the weft module: %s\\n' % e)\n"
    "    sys.exit(3)\n"
    "sys.exit(run.main(sys.argv[1:]))\n";

std::string interpreter() {
  if (const char* p = std::getenv("WEFT_PYTHON"); p && *p) return p;
#ifdef WEFT_PYTHON_EXECUTABLE
  if (fs::exists(WEFT_PYTHON_EXECUTABLE)) return WEFT_PYTHON_EXECUTABLE;
#endif
  return "python3";
}

// The build tree's module folder, when this binary runs from the build tree it was built in.
std::string module_dir() {
#ifdef WEFT_PYTHON_BUILD_DIR
  std::error_code ec;
  if (fs::is_regular_file(fs::path(WEFT_PYTHON_BUILD_DIR) / "weft" / "_run.py", ec)) return WEFT_PYTHON_BUILD_DIR;
#endif
  return {};
}

// A temporary folder removed when the call ends, however it ends.
struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "weft-py-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) fail(ErrorCode::System, std::string("cannot make a temporary folder: ") + std::strerror(errno));
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

std::string_view error_code_identifier(ErrorCode code) {
  switch (code) {
    case ErrorCode::Success: return "Success";
    case ErrorCode::UnhandledCuda: return "UnhandledCuda";
    case ErrorCode::System: return "System";
    case ErrorCode::Internal: return "Internal";
    case ErrorCode::InvalidArgument: return "InvalidArgument";
    case ErrorCode::InvalidUsage: return "InvalidUsage";
    case ErrorCode::Remote: return "Remote";
    case ErrorCode::InProgress: return "InProgress";
    case ErrorCode::Timeout: return "Timeout";
    case ErrorCode::Parse: return "Parse";
    case ErrorCode::Verify: return "Verify";
  }
  return "Internal";
}

ErrorCode error_code_from_identifier(std::string_view name) {
  for (int c = 1; c <= static_cast<int>(ErrorCode::Verify); ++c)
    if (error_code_identifier(static_cast<ErrorCode>(c)) == name) return static_cast<ErrorCode>(c);
  return ErrorCode::InvalidArgument;
}

bool is_python_path(const std::string& source) { return source.size() > 3 && source.ends_with(".py"); }

Algorithm load_python_program(const std::string& path, const std::map<std::string, std::string>& params) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) fail(ErrorCode::InvalidArgument, path + ": no such file");
  const std::string python = interpreter();
  TempDir tmp;
  const std::string out = tmp.path + "/algorithm", err = tmp.path + "/error";

  std::string param_list;
  for (const auto& [k, v] : params) param_list += (param_list.empty() ? "" : ",") + k + "=" + v;
  std::vector<std::string> env_strings = {"WEFT_ALGORITHM_OUT=" + out, "WEFT_ERROR_OUT=" + err,
                                          "WEFT_PARAMS=" + param_list};
  std::string pythonpath = module_dir();
  if (const char* p = std::getenv("PYTHONPATH"); p && *p) pythonpath += (pythonpath.empty() ? "" : ":") + std::string(p);
  if (!pythonpath.empty()) env_strings.push_back("PYTHONPATH=" + pythonpath);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  for (char** e = environ; *e; ++e) {
    std::string_view kv(*e);
    bool ours = false;
    // The algorithm program gets no secret (the bootstrap's key is no business of it).
    for (const char* k : {"WEFT_ALGORITHM_OUT=", "WEFT_ERROR_OUT=", "WEFT_PARAMS=", "PYTHONPATH=", "WEFT_BOOTSTRAP_SECRET="})
      ours = ours || kv.starts_with(k);
    if (!ours) envp.push_back(*e);
  }
  envp.push_back(nullptr);
  std::vector<std::string> args = {python, "-c", kBootstrap, path};
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);  // the program's prints
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, python.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  const std::string how = " (set WEFT_PYTHON to an interpreter with weft's module; docs/python.md)";
  if (rc != 0)
    fail(ErrorCode::InvalidArgument, path + ": cannot run the Python interpreter '" + python + "': " +
                                         std::strerror(rc) + how);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) fail(ErrorCode::System, path + ": waiting for the Python interpreter failed: " + std::strerror(errno));
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (code == 0) {
    if (!fs::is_regular_file(out, ec)) fail(ErrorCode::InvalidArgument, path + ": the program traced no algorithm");
    return load_algorithm_file(out);
  }
  if (code == kNoModule)
    fail(ErrorCode::InvalidArgument, path + ": the Python interpreter '" + python +
                                         "' cannot import weft's module (build it: pybind11-dev installed, then "
                                         "scripts/build.sh; or install it with cmake --install)" + how);
  if (code == kProgramFailed && fs::is_regular_file(err, ec)) {
    // The runner's first line names the error code, the rest is the message.
    std::string text = text::read_file(err).value_or("");
    const size_t nl = text.find('\n');
    if (nl != std::string::npos) {
      std::string msg = text.substr(nl + 1);
      while (!msg.empty() && msg.back() == '\n') msg.pop_back();
      fail(error_code_from_identifier(text.substr(0, nl)), msg);
    }
  }
  fail(ErrorCode::InvalidArgument, path + ": the Python program stopped with exit status " + std::to_string(code) +
                                       " (its output is above)");
}

}  // namespace weft
