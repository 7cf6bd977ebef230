// The tandem command: one CLI11 app with a subcommand per task, and one mapping from errors to
// exit codes.
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "cli.hpp"
#include "options.hpp"
#include "tandem/environment.hpp"
#include "tandem/errors.hpp"
#include "tandem/profile.hpp"
#include "tandem/version.hpp"

namespace tandem::cli {
namespace {

std::string footer() {
  std::string text = "environment (a value tandem does not know is refused):\n";
  for (const auto& v : environment_variables()) {
    text += "  " + v.name + "=" + v.values + "\n      " + v.meaning + "\n";
  }
  text +=
      "\nexit codes: 0 ok, 1 a check or accuracy target failed (or measurements too noisy to keep),\n"
      "  2 usage (bad option, unknown or unusable backend, bad TANDEM_* value), 3 data or file error,\n"
      "  4 device or run failure (out of memory, device error, anything unexpected)\n"
      "\n'tandem COMMAND --help' shows a command's options.";
  return text;
}

// The exit code and the message's lead-in for an error that ended a command.
int exit_code_of(const std::exception& e, std::string& lead) {
  lead.clear();
  if (dynamic_cast<const DataError*>(&e) != nullptr) return kDataError;  // IoError too
  if (dynamic_cast<const OutOfMemory*>(&e) != nullptr || dynamic_cast<const DeviceError*>(&e) != nullptr) {
    return kRunError;
  }
  if (dynamic_cast<const Error*>(&e) != nullptr) return kUsage;
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {
    lead = "out of host memory: ";
    return kRunError;
  }
  lead = "unexpected error: ";
  return kRunError;
}

}  // namespace

int run(int argc, const char* const* argv) {
  CLI::App app("tandem " + std::string(version_string) +
                   ": one API, several backends (CPU, GPU, simulator, float64 reference); check them against "
                   "the reference, train and regress on them, and measure where the GPU wins.",
               "tandem");
  app.set_version_flag("--version", std::string("tandem ") + version_string);
  app.require_subcommand(1);
  app.get_formatter()->column_width(34);
  forget_outputs();  // those of an earlier run in this process (the tests run several)
  std::vector<Command> commands = {add_info(app),    add_check(app),   add_train(app),
                                   add_predict(app), add_regress(app), add_compare(app)};
  for (Command& c : add_bench(app)) commands.push_back(std::move(c));
  app.footer(footer());  // after the subcommands: theirs stay short

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help, the version, or the error with a pointer to --help
    return code == 0 ? kOk : kUsage;
  }
  std::string name = "tandem";
  try {
    for (const std::string& unknown : check_environment()) {
      std::fprintf(stderr, "tandem: warning: %s is not a variable tandem reads (see tandem --help)\n", unknown.c_str());
    }
    // The most deeply parsed subcommand runs (bench memory rather than bench).
    const Command* chosen = nullptr;
    for (const Command& c : commands) {
      if (c.app->parsed()) chosen = &c;
    }
    if (chosen == nullptr) return kUsage;  // require_subcommand makes this unreachable
    name = "tandem " + (chosen->app->get_parent() != &app ? chosen->app->get_parent()->get_name() + " " : "") +
           chosen->app->get_name();
    // The profile is an output too: checked before the work, written before the exit code is known.
    const auto profile_path = env::text("TANDEM_PROFILE");
    if (profile_path) check_writable(*profile_path);
    check_outputs(chosen->app);
    const int code = chosen->run();
    if (profile_path && profile::enabled()) (void)profile::stop();
    return code;
  } catch (const std::exception& e) {
    std::string lead;
    const int code = exit_code_of(e, lead);
    std::fprintf(stderr, "%s: %s%s\n", name.c_str(), lead.c_str(), e.what());
    std::fflush(stderr);
    end_distributed_job(code);
    return code;
  }
}

}  // namespace tandem::cli
