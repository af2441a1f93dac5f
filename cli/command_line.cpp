// Options, then the program (command_line.hpp).
#include "command_line.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <set>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/text.hpp"

namespace dtrain::cli {

std::optional<std::string> suggest(const std::string& word, const std::vector<std::string>& names) {
  if (auto near = text::closest(word, names)) return near;
  std::optional<std::string> best;
  std::size_t best_d = 3;
  int prefixed = 0;
  std::string prefix_hit;
  for (const auto& n : names) {
    std::size_t d = text::edit_distance(word, n);
    if (word.size() >= 3 && d < best_d) {
      best = n;
      best_d = d;
    }
    if (!word.empty() && n.rfind(word, 0) == 0) {
      ++prefixed;
      prefix_hit = n;
    }
  }
  if (best) return best;
  if (prefixed == 1) return prefix_hit;
  // the longest shared beginning, when it is long and names one candidate ("--nprocs" -> "--nproc-per-node")
  std::size_t longest = 0;
  int ties = 0;
  std::string hit;
  for (const auto& n : names) {
    std::size_t k = 0;
    while (k < n.size() && k < word.size() && n[k] == word[k]) ++k;
    if (k > longest) longest = k, ties = 1, hit = n;
    else if (k == longest) ++ties;
  }
  std::size_t dashes = word.rfind("--", 0) == 0 ? 2 : word.rfind('-', 0) == 0 ? 1 : 0;
  if (longest >= dashes + 4 && ties == 1) return hit;
  return std::nullopt;
}

namespace {

bool is_option(const std::string& a) { return a.size() > 1 && a[0] == '-' && a != "--"; }

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

[[noreturn]] void unknown_option(const CLI::App& sub, const std::string& name) {
  std::vector<std::string> names;
  for (const CLI::Option* o : sub.get_options()) {
    for (const auto& l : o->get_lnames()) names.push_back("--" + l);
    for (const auto& s : o->get_snames()) names.push_back("-" + s);
  }
  std::string cmd = "dtrain " + sub.get_name();
  auto near = suggest(name, names);
  throw ConfigError(fmt::format("{}: unknown option '{}'{}; '{} --help' lists the options", cmd, name,
                                near ? fmt::format(", did you mean '{}'?", *near) : std::string(), cmd));
}

bool one_dash_word(const std::string& name) { return name.size() > 2 && name[0] == '-' && name[1] != '-'; }

// mpirun's -np, -ppn -> the name CLI11 knows their row by ("-n", "--npernode"); nullopt otherwise.
std::optional<std::string> mpirun_word(const std::string& a) {
  if (!one_dash_word(a)) return std::nullopt;
  const config::FlagRow* row = config::find_flag(a);
  if (row == nullptr) return std::nullopt;
  std::string names = cli11_names(*row);
  return names.substr(0, names.find(','));
}

// "--nproc_per_node=4" -> "--nproc-per-node=4" when the option exists spelled with dashes.
std::string dashed(const CLI::App& sub, const std::string& name) {
  if (name.rfind("--", 0) != 0 || name.find('_') == std::string::npos) return name;
  std::string d = name;
  for (std::size_t i = 2; i < d.size(); ++i)
    if (d[i] == '_') d[i] = '-';
  return sub.get_option_no_throw(d) != nullptr ? d : name;
}

// torchrun (argparse) takes an unambiguous beginning of a long flag as that flag, in either
// spelling: "--nproc_per_nod 2" is --nproc-per-node 2, with one note. Only torchrun's flags are
// completed (dtrain's own keep CLI11's exact names); a beginning that several flags share, dtrain's
// own included, is refused naming them. nullopt: not a torchrun flag's beginning.
std::optional<std::string> completed(const CLI::App& sub, const std::string& word) {
  if (word.rfind("--", 0) != 0 || word.size() < 3) return std::nullopt;
  std::string d = word;
  for (std::size_t i = 2; i < d.size(); ++i)
    if (d[i] == '_') d[i] = '-';
  std::vector<std::string> hits;
  std::set<const config::FlagRow*> rows;
  bool torchrun = false;
  for (const CLI::Option* o : sub.get_options())
    for (const auto& l : o->get_lnames()) {
      if (("--" + l).rfind(d, 0) != 0) continue;
      hits.push_back("--" + l);
      const config::FlagRow* row = config::find_flag(hits.back());
      rows.insert(row);  // nullptr: CLI11's --help, plan's --json
      torchrun = torchrun || (row != nullptr && row->family == config::FlagFamily::torchrun);
    }
  if (!torchrun) return std::nullopt;
  if (rows.size() > 1)
    throw ConfigError(fmt::format("dtrain {}: '{}' is ambiguous: it begins {}; give the whole flag", sub.get_name(), word,
                                  text::join(hits, ", ")));
  std::string full = config::flag_name(**rows.begin());
  std::fprintf(stderr, "dtrain: note: %s taken as %s (torchrun takes an unambiguous beginning of a flag)\n",
               word.c_str(), full.c_str());
  return full;
}

}  // namespace

std::string cli11_names(const config::FlagRow& row) {
  std::string out;
  for (const auto& n : config::flag_names(row))
    if (!one_dash_word(n)) out += (out.empty() ? "" : ",") + n;
  return out;
}

std::vector<std::string> split_program(const CLI::App& sub, const std::vector<std::string>& args, ProgramWords& out) {
  std::vector<std::string> cli;
  bool job_file = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      std::vector<std::string> rest(args.begin() + static_cast<long>(i) + 1, args.end());
      if (job_file) out.appended = std::move(rest);
      else out.words = std::move(rest), out.after_dashdash = true;
      break;
    }
    if (!is_option(a)) {
      // JOB.json as the first word keeps the options after it (the job file form)
      if (!job_file && ends_with(a, ".json")) {
        job_file = true;
        cli.push_back(a);
        continue;
      }
      out.words.assign(args.begin() + static_cast<long>(i), args.end());
      break;
    }
    auto eq = a.rfind("--", 0) == 0 ? a.find('=') : std::string::npos;
    std::string name = mpirun_word(a).value_or(dashed(sub, a.substr(0, eq)));
    const CLI::Option* opt = sub.get_option_no_throw(name);
    if (opt == nullptr)
      if (auto full = completed(sub, name)) opt = sub.get_option_no_throw(name = *full);
    if (opt == nullptr && a.size() > 2 && a[1] != '-') {  // torchrun's -r3, -t3: a short option and its value
      const CLI::Option* s = sub.get_option_no_throw(a.substr(0, 2));
      if (s != nullptr && s->get_items_expected_max() > 0) {
        cli.push_back(a.substr(0, 2));
        cli.push_back(a.substr(2));
        continue;
      }
    }
    if (opt == nullptr) unknown_option(sub, name);
    cli.push_back(eq == std::string::npos ? name : name + a.substr(eq));
    if (eq == std::string::npos && opt->get_items_expected_max() > 0 && i + 1 < args.size()) cli.push_back(args[++i]);
  }
  return cli;
}

}  // namespace dtrain::cli
