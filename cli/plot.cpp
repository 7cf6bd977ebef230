// --plot: the measurements as JSON in a folder, and bench/plot.py run on them. The script runs as
// an argument vector through posix_spawn (no shell: any path works, quotes and spaces included).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "sweep.hpp"
#include "tandem/errors.hpp"

extern char** environ;

namespace tandem::cli::sweep {
namespace {

// Runs argv[0] (looked up on PATH when it has no '/') and returns its exit status; -1 when it
// could not be started. quiet: its output goes to /dev/null.
int spawn(const std::vector<std::string>& args, bool quiet) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (quiet) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

namespace {

// The plotting script and a python3 that has matplotlib; InvalidArgument saying what to install
// when either is missing (`data`: where the measurements were written, for the message).
std::pair<std::filesystem::path, const char*> plot_tools(const std::string& data) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string kept = data.empty() ? std::string() : " (the data is in " + data + ")";
  // The script: installed beside the CLI (share/tandem), else in the source tree it was built from.
  std::vector<fs::path> candidates;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(self.parent_path() / "../share/tandem/plot.py");
  candidates.emplace_back(TANDEM_SOURCE_DIR "/bench/plot.py");
  fs::path script;
  for (const fs::path& c : candidates) {
    if (fs::exists(c, ec)) {
      script = c;
      break;
    }
  }
  if (script.empty()) throw InvalidArgument("--plot: bench/plot.py is not installed with this tandem" + kept);
  // Debian's matplotlib belongs to /usr/bin/python3; a python3 earlier on PATH may lack it.
  for (const char* python : {"/usr/bin/python3", "python3"}) {
    if (spawn({python, "-c", "import matplotlib"}, true) == 0) return {script, python};
  }
  throw InvalidArgument("--plot needs matplotlib: apt install python3-matplotlib" + kept);
}

}  // namespace

void plot_check(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    throw IoError(dir + " is not a folder (the plots are PNG files written into one)");
  }
  // The nearest folder that exists must let us create the rest in it, or write there.
  fs::path at = fs::absolute(dir, ec);
  while (!at.empty() && !fs::exists(at, ec) && at.has_parent_path() && at.parent_path() != at) at = at.parent_path();
  if (!fs::is_directory(at, ec)) throw IoError(at.string() + " is not a folder");
  if (access(at.c_str(), W_OK) != 0) throw IoError("cannot write in " + at.string() + " (" + std::strerror(errno) + ")");
  (void)plot_tools("");
}

void plot_json(const Json& doc, const std::string& dir, const std::string& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError("--plot: cannot create " + dir + " (" + ec.message() + ")");
  const fs::path data = fs::path(dir) / file;
  write_text(data.string(), json_text(doc));
  const auto [script, python] = plot_tools(data.string());
  if (spawn({python, script.string(), data.string(), dir}, false) != 0) {
    throw InvalidArgument("--plot: " + script.string() + " failed (see above); the data is in " + data.string());
  }
}

}  // namespace tandem::cli::sweep
