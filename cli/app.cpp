// The tandem command: one CLI11 app with a subcommand per task, and one mapping from errors to
// exit codes.
#include <algorithm>
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

// Edits (insertions, deletions, substitutions) between a and b.
std::size_t distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// "; did you mean 'X'?" for the nearest of `known` to `word` (within a third of its length, at
// least 2 edits, or a prefix of it), else "".
std::string suggestion(const std::string& word, const std::vector<std::string>& known) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const std::string& k : known) {
    const std::size_t d = k.rfind(word, 0) == 0 && word.size() >= 3 ? 1 : distance(word, k);
    if (d < best_distance) {
      best = k;
      best_distance = d;
    }
  }
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

// The names a user may type after `tandem`, and after `tandem COMMAND` (its long options).
std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
  return names;
}
std::vector<std::string> option_names(const CLI::App& sub) {
  std::vector<std::string> names;
  for (const CLI::Option* o : sub.get_options()) {
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
  }
  for (const CLI::App* s : sub.get_subcommands([](const CLI::App*) { return true; })) names.push_back(s->get_name());
  return names;
}

// A message for what CLI11 would only call unexpected: an unknown command or option, with the
// nearest known one; "" when the error is another.
std::string unknown_word(const CLI::App& app, int argc, const char* const* argv) {
  if (argc < 2) return "";
  const std::string first = argv[1];
  const std::vector<std::string> commands = command_names(app);
  if (first.empty() || first[0] == '-') return "";
  if (std::find(commands.begin(), commands.end(), first) == commands.end()) {
    std::string all;
    for (const std::string& c : commands) all += (all.empty() ? "" : ", ") + c;
    return "tandem: unknown command '" + first + "'" + suggestion(first, commands) + " (commands: " + all +
           "; 'tandem --help' says what each does)";
  }
  const auto child = [](const CLI::App& parent, const std::string& name) -> const CLI::App* {
    for (const CLI::App* s : parent.get_subcommands([](const CLI::App*) { return true; })) {
      if (s->get_name() == name) return s;
    }
    return nullptr;
  };
  const CLI::App* sub = child(app, first);
  std::string path = first;
  for (int i = 2; i < argc && sub != nullptr; ++i) {
    const std::string word = argv[i];
    if (const CLI::App* nested = child(*sub, word); nested != nullptr) {  // bench memory
      sub = nested;
      path += " " + word;
      continue;
    }
    if (word.rfind("--", 0) != 0) continue;
    const std::string name = word.substr(0, word.find('='));
    const std::vector<std::string> known = option_names(*sub);
    if (std::find(known.begin(), known.end(), name) == known.end() && name != "--help") {
      return "tandem " + path + ": unknown option '" + name + "'" + suggestion(name, known) + " ('tandem " + path +
             " --help' lists its options)";
    }
  }
  return "";
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
  app.set_version_flag("--version,-V", std::string("tandem ") + version_string);
  app.require_subcommand(1);
  app.get_formatter()->column_width(34);
  forget_outputs();  // those of an earlier run in this process (the tests run several)
  std::vector<Command> commands = {add_info(app),    add_check(app),   add_train(app),
                                   add_predict(app), add_regress(app), add_compare(app)};
  for (Command& c : add_bench(app)) commands.push_back(std::move(c));
  app.footer(footer());  // after the subcommands: theirs stay short

  if (argc == 2 && std::string(argv[1]) == "help") {  // as git and cargo take it
    std::fputs(app.help().c_str(), stdout);
    return kOk;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (const std::string what = unknown_word(app, argc, argv); !what.empty() && e.get_exit_code() != 0) {
      std::fprintf(stderr, "%s\n", what.c_str());
      return kUsage;
    }
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
