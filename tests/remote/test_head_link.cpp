// The head's header to each host and the variables that travel with it.
#include <doctest/doctest.h>

#include <string>

#include "dtrain/common/errors.hpp"
#include "dtrain/remote/head_link.hpp"

namespace remote = dtrain::remote;

TEST_SUITE("remote::head_link") {
  TEST_CASE("the header survives its line, quotes, spaces and newlines included") {
    remote::HeadHeader h{"0123abcd", "/work/a b", {"--nnodes=3", "job.json", "--", "it's \"x\"\n"}, 2,
                         {{"PYTHONPATH", "/p"}}};
    std::string line = remote::encode_header(h);
    CHECK(line.back() == '\n');
    CHECK(line.find('\n') == line.size() - 1);
    remote::HeadHeader back = remote::decode_header(line);
    CHECK(back.token == h.token);
    CHECK(back.cwd == h.cwd);
    CHECK(back.words == h.words);
    CHECK(back.node_rank == 2);
    CHECK(back.env == h.env);
  }

  TEST_CASE("a line that is no header is refused, naming the command") {
    CHECK_THROWS_WITH_AS(remote::decode_header("hello"), doctest::Contains("dtrain __remote"), dtrain::ConfigError);
    CHECK_THROWS_AS(remote::decode_header(R"({"token": "x"})"), dtrain::ConfigError);
  }

  TEST_CASE("DTRAIN_*, PET_*, NCCL_* and PYTHONPATH travel; the token and the rest do not") {
    std::string a = "DTRAIN_LOG=debug", b = "DTRAIN_RDZV_TOKEN=secret", c = "PET_NNODES=3", d = "HOME=/root",
                e = "NCCL_DEBUG=INFO", f = "PYTHONPATH=/x";
    char* env[] = {a.data(), b.data(), c.data(), d.data(), e.data(), f.data(), nullptr};
    auto got = remote::head_env(env);
    REQUIRE(got.size() == 4);
    CHECK(got[0].first == "DTRAIN_LOG");
    CHECK(got[1].first == "PET_NNODES");
    CHECK(got[2].first == "NCCL_DEBUG");
    CHECK(got[3].first == "PYTHONPATH");
  }
}
