#pragma once
// What a head says to the `dtrain launch` it starts on a host, over that launch's standard input
// (never on a command line or in an environment other users may read):
//
//   line 1   the header, one JSON object: the rendezvous token, the head's working folder, the
//            launch's words, the host's node rank, and the variables that travel (head_env);
//   then     a signal's name a line (INT, TERM, HUP): the head got it, the host's launch gets it;
//   EOF      the head is gone (ssh dropped, head killed): the host's launch stops as on SIGTERM.
//
// Back come the host's launch's stdout and stderr, and on its stderr one line, kJoinedLine, once the
// node joined the job's rendezvous (the head strips it): a host whose launch ends without it never
// joined, so the other nodes wait for it in vain and the head stops them at once.
//
// The launch agent runs `AGENT... HOST DTRAIN __remote`; node_main reads the header and runs
// `dtrain launch --node-rank R WORDS...` in this process with the header's token.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dtrain::remote {

struct HeadHeader {
  std::string token;
  std::string cwd;
  std::vector<std::string> words;  // the launch's words after `launch`
  int node_rank = 0;
  std::vector<std::pair<std::string, std::string>> env;
};

// One line of JSON (with its newline) / the header of such a line; ConfigError when it is not one.
std::string encode_header(const HeadHeader& h);
HeadHeader decode_header(std::string_view line);

// The variables of `environ` that travel to every host: DTRAIN_* (but the token), PET_*, NCCL_*,
// PYTHONPATH.
std::vector<std::pair<std::string, std::string>> head_env(char** environ);

// The hidden command `dtrain __remote`: reads the header from standard input, moves to its folder
// (or stays in the home folder, with a warning, where it is missing), sets its variables and runs
// `run(["dtrain", "launch", "--node-rank", R, WORDS...])`.
int node_main(int argc, char** argv, int (*run)(int, char**));

// The line a host's launch writes on its stderr once its node joined the rendezvous.
inline constexpr std::string_view kJoinedLine = "\001dtrain: joined the rendezvous\n";
// Writes kJoinedLine (in a process started by a head).
void tell_head_joined();

// The token of this process's head, when `dtrain __remote` started it.
const std::optional<std::string>& head_token();

// Starts the thread that reads the rest of standard input: a signal's name raises that signal in
// this process, the end of the input SIGTERM. Only in a process started by a head.
void watch_head();

}  // namespace dtrain::remote
