// `dtrain token`: a strong token on stdout, or in a new file of mode 0600.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <string>

#include "run_binary.hpp"

using dtrain::test::read_file;
using dtrain::test::run;
using dtrain::test::TempDir;

TEST_SUITE("cli::cmd_token") {
  TEST_CASE("prints 64 hex digits, a new one each time") {
    auto a = run({DTRAIN_BIN, "token"});
    auto b = run({DTRAIN_BIN, "token"});
    CHECK(a.status == 0);
    REQUIRE(a.out.size() == 65);
    CHECK(a.out.back() == '\n');
    CHECK(a.out.find_first_not_of("0123456789abcdef") == 64);
    CHECK(a.out != b.out);
  }

  TEST_CASE("--output creates the file 0600, refuses to replace it without --force") {
    TempDir t;
    std::string f = (t.path / "tok").string();
    auto r = run({DTRAIN_BIN, "token", "--output", f});
    CHECK(r.status == 0);
    CHECK(r.out.empty());
    CHECK(r.err.find("wrote a new rendezvous token to " + f + " (mode 0600)") != std::string::npos);
    struct stat st {};
    REQUIRE(::stat(f.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    std::string first = read_file(f);
    CHECK(first.size() == 65);
    auto again = run({DTRAIN_BIN, "token", "-o", f});
    CHECK(again.status == 2);
    CHECK(again.err.find("already exists; give another path, or --force") != std::string::npos);
    CHECK(read_file(f) == first);
    ::chmod(f.c_str(), 0644);
    auto forced = run({DTRAIN_BIN, "token", "-o", f, "--force"});
    CHECK(forced.status == 0);
    REQUIRE(::stat(f.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(read_file(f) != first);
    auto nowhere = run({DTRAIN_BIN, "token", "-o", (t.path / "no" / "such" / "dir").string()});
    CHECK(nowhere.status == 125);
    CHECK(nowhere.err.find("cannot create the token file") != std::string::npos);
  }

  TEST_CASE("the token it makes is accepted where a weak one is refused") {
    TempDir t;
    std::string strong = (t.path / "strong").string();
    REQUIRE(run({DTRAIN_BIN, "token", "-o", strong}).status == 0);
    std::string weak = t.write("weak", "secret1\n");
    auto p = run({DTRAIN_BIN, "launch", "--nodes", "2", "--node-rank", "1", "--rdzv", "127.0.0.1:1", "--token-file", weak,
                  "--", "true"});
    CHECK(p.status == 2);
    CHECK(p.err.find("token file " + weak + ": the rendezvous token is too weak") != std::string::npos);
  }
}
