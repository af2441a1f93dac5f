// dtrain token [--output FILE] [--force]: a new random rendezvous token (256 bits, hex), printed or
// written to a new file of mode 0600.
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>

#include "app.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/common/exit_codes.hpp"
#include "dtrain/rendezvous/store/auth.hpp"

namespace dtrain::cli {
namespace {

struct TokenArgs {
  std::string output;
  bool force = false;
};

bool write_all(int fd, const std::string& s) {
  std::size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += std::size_t(n);
  }
  return true;
}

// A new file only readable by its owner; an existing one is replaced only with --force (and made
// 0600 first, so the new token is never readable by others).
void write_token_file(const TokenArgs& a, const std::string& line) {
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (a.force ? O_TRUNC : O_EXCL);
  int fd = ::open(a.output.c_str(), flags, 0600);
  if (fd < 0 && errno == EEXIST)
    throw ConfigError(fmt::format("token file {} already exists; give another path, or --force to replace it "
                                  "(every node must then get the new token)", a.output));
  if (fd < 0) throw IoError(fmt::format("cannot create the token file {}: {}", a.output, errno_text(errno)));
  bool ok = ::fchmod(fd, 0600) == 0 && write_all(fd, line) && ::fsync(fd) == 0;
  int err = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(a.output.c_str());
    throw IoError(fmt::format("cannot write the token file {}: {}", a.output, errno_text(err)));
  }
}

int make_token(const TokenArgs& a) {
  std::string line = rdzv::auth::new_token() + "\n";
  if (a.output.empty()) {
    if (!write_all(1, line)) throw IoError(fmt::format("cannot write the token to stdout: {}", errno_text(errno)));
    return exit_code::ok;
  }
  write_token_file(a, line);
  std::fprintf(stderr, "dtrain: wrote a new rendezvous token to %s (mode 0600); give every node this file "
                       "(--token-file or rendezvous.token_file)\n", a.output.c_str());
  return exit_code::ok;
}

}  // namespace

void register_token(CLI::App& app, Runner& run) {
  auto args = std::make_shared<TokenArgs>();
  CLI::App* sub = app.add_subcommand("token", "print a new random rendezvous token (256 bits), or write it to a file");
  sub->add_option("--output,-o", args->output, "write it to FILE, created with mode 0600 (not replaced unless --force)")
      ->type_name("FILE");
  sub->add_flag("--force", args->force, "replace FILE when it exists");
  sub->footer("Exit status: 0 ok; 2 FILE exists (without --force) or bad usage; 125 FILE cannot be written.");
  sub->callback([args, &run] {
    run = [args] { return make_token(*args); };
  });
}

}  // namespace dtrain::cli
