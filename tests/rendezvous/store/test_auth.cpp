// Token handling: strength, new tokens, token files (bounded reads), and the proofs.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "dtrain/common/errors.hpp"
#include "dtrain/rendezvous/store/auth.hpp"

using namespace dtrain::rdzv;
using dtrain::ConfigError;
namespace fs = std::filesystem;

namespace {

struct Dir {
  fs::path path = fs::temp_directory_path() / ("dtrain-auth-" + std::to_string(::getpid()));
  Dir() { fs::create_directories(path); }
  ~Dir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    ::chmod((path / name).c_str(), 0600);
    return (path / name).string();
  }
};

}  // namespace

TEST_SUITE("rendezvous::auth") {
  TEST_CASE("token_bits counts what the token's alphabet can hold") {
    CHECK(auth::token_bits("0123456789abcdef0123456789abcdef") == 128);  // hex: 4 bits each
    CHECK(auth::token_bits("0123456789ABCDEF") == 64);
    CHECK(auth::token_bits("collectives-test-token") == 132);  // base64url: 6 bits each
    CHECK(auth::token_bits("c2VjcmV0c2VjcmV0c2VjcmV0") == 144);
    CHECK(auth::token_bits("YWJjZA==") == 36);  // padding holds nothing
    CHECK(auth::token_bits("secret1") == 42);
    CHECK(auth::token_bits("p@ss w0rd!") == 80);  // anything else: 8 bits a byte
  }

  TEST_CASE("tokens under 128 bits are refused with a hint, others pass") {
    CHECK_NOTHROW(auth::check_token_strength("", "x"));  // no token: loopback-only mode, checked elsewhere
    CHECK_NOTHROW(auth::check_token_strength("0123456789abcdef0123456789abcdef", "x"));
    CHECK_THROWS_WITH_AS(auth::check_token_strength("secret1", "token file /etc/t"),
                         doctest::Contains("token file /etc/t: the rendezvous token is too weak (7 characters can hold at most 42 bits"),
                         ConfigError);
    CHECK_THROWS_WITH_AS(auth::check_token_strength("0123456789abcdef0123456789abcde", "x"),
                         doctest::Contains("dtrain token --output FILE"), ConfigError);
  }

  TEST_CASE("new tokens are 64 hex digits from the CSPRNG, never the same") {
    std::set<std::string> seen;
    for (int i = 0; i < 64; ++i) {
      std::string t = auth::new_token();
      CHECK(t.size() == 64);
      CHECK(t.find_first_not_of("0123456789abcdef") == std::string::npos);
      CHECK(auth::token_bits(t) == 256);
      seen.insert(t);
    }
    CHECK(seen.size() == 64);
  }

  TEST_CASE("a token file: first line, trailing blanks off, bounded, weak ones refused") {
    Dir d;
    CHECK(auth::read_token_file(d.write("ok", "abc \t\r\nsecond line\n")) == "abc");
    CHECK(auth::read_token_file(d.write("nonl", "xyz")) == "xyz");
    CHECK_THROWS_WITH_AS(auth::read_token_file(d.write("empty", "\n")), doctest::Contains("is empty"), ConfigError);
    CHECK_THROWS_WITH_AS(auth::read_token_file((d.path / "missing").string()),
                         doctest::Contains("No such file or directory"), ConfigError);
    CHECK_THROWS_WITH_AS(auth::read_token_file(d.write("huge", std::string(100000, 'a'))),
                         doctest::Contains("longer than 4096 bytes"), ConfigError);
    CHECK(auth::read_token_file(d.write("max", std::string(4096, 'a') + "\n" + std::string(100000, 'b'))).size() == 4096);
    // an endless file is read only up to the bound
    CHECK_THROWS_WITH_AS(auth::read_token_file("/dev/zero"), doctest::Contains("longer than 4096 bytes"), ConfigError);
    std::string strong = auth::new_token();
    CHECK(auth::resolve_token(d.write("strong", strong + "\n")) == strong);
    CHECK_THROWS_WITH_AS(auth::resolve_token(d.write("weak", "secret1\n")), doctest::Contains("too weak"), ConfigError);
  }

  TEST_CASE("DTRAIN_RDZV_TOKEN is checked like a file") {
    ::setenv("DTRAIN_RDZV_TOKEN", "short", 1);
    CHECK_THROWS_WITH_AS(auth::resolve_token(""), doctest::Contains("DTRAIN_RDZV_TOKEN: the rendezvous token is too weak"),
                         ConfigError);
    ::setenv("DTRAIN_RDZV_TOKEN", "0123456789abcdef0123456789abcdef", 1);
    CHECK(auth::resolve_token("") == "0123456789abcdef0123456789abcdef");
    ::unsetenv("DTRAIN_RDZV_TOKEN");
    CHECK(auth::resolve_token("").empty());
  }

  TEST_CASE("the two proofs differ by role and nonce order") {
    Bytes a = auth::random_nonce(), b = auth::random_nonce();
    auto client = auth::proof("t", "client", a, b, "run", 1);
    auto server = auth::proof("t", "server", b, a, "run", 1);
    CHECK(client.size() == auth::kProofBytes);
    CHECK_FALSE(auth::constant_time_equal(client, server));
    CHECK(auth::constant_time_equal(client, auth::proof("t", "client", a, b, "run", 1)));
    CHECK_FALSE(auth::constant_time_equal(client, auth::proof("t", "client", a, b, "run", 2)));
    CHECK_FALSE(auth::constant_time_equal(client, auth::proof("u", "client", a, b, "run", 1)));
  }

  TEST_CASE("HMAC-SHA256 through the libcrypto loaded on first use: RFC 4231's test cases 1 and 2") {
    auto hex = [](const Bytes& b) {
      std::string out;
      for (unsigned char c : b) out += fmt::format("{:02x}", c);
      return out;
    };
    std::string data1 = "Hi There", data2 = "what do ya want for nothing?";
    CHECK(hex(auth::hmac_sha256(std::string(20, '\x0b'), Bytes(data1.begin(), data1.end()))) ==
          "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    CHECK(hex(auth::hmac_sha256("Jefe", Bytes(data2.begin(), data2.end()))) ==
          "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  }

  TEST_CASE("constant_time_equal: equal bytes only, never two empty ones") {
    Bytes a{1, 2, 3}, b{1, 2, 3}, c{1, 2, 4}, d{1, 2};
    CHECK(auth::constant_time_equal(a, b));
    CHECK_FALSE(auth::constant_time_equal(a, c));
    CHECK_FALSE(auth::constant_time_equal(a, d));
    CHECK_FALSE(auth::constant_time_equal(Bytes{}, Bytes{}));
    Bytes n1 = auth::random_nonce(), n2 = auth::random_nonce();
    CHECK(n1.size() == auth::kNonceBytes);
    CHECK(n1 != n2);
  }
}
