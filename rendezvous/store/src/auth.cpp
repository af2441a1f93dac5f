#include "dtrain/rendezvous/store/auth.hpp"

#include <dlfcn.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/opensslv.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/params.hpp"
#include "dtrain/common/log.hpp"
#include "dtrain/rendezvous/store/wire.hpp"

namespace dtrain::rdzv::auth {

namespace {

#define DTRAIN_AUTH_STR2(x) #x
#define DTRAIN_AUTH_STR(x) DTRAIN_AUTH_STR2(x)
#ifdef OPENSSL_SHLIB_VERSION
constexpr const char* kLibcrypto = "libcrypto.so." DTRAIN_AUTH_STR(OPENSSL_SHLIB_VERSION);
#else
constexpr const char* kLibcrypto = "libcrypto.so." SHLIB_VERSION_NUMBER;
#endif

// OpenSSL's libcrypto, loaded on the first HMAC rather than by the dynamic linker at start-up: a
// plain local launch authenticates no one, and linking it cost every dtrain process (and every
// program that loads libdtrain_collectives) about a millisecond of relocations and library set-up
// (bench/RESULTS.md, "Launch"). Randomness comes from the kernel (getrandom), as OpenSSL's own does.
struct Libcrypto {
  decltype(&::HMAC) hmac = nullptr;
  decltype(&::EVP_sha256) sha256 = nullptr;
};

const Libcrypto& libcrypto() {
  static const Libcrypto lib = [] {
    void* h = ::dlopen(kLibcrypto, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr)
      throw IoError(fmt::format("rendezvous: cannot load {} for HMAC-SHA256: {} (install OpenSSL's libcrypto; "
                                "Debian: libssl3)", kLibcrypto, ::dlerror()));
    Libcrypto l;
    l.hmac = reinterpret_cast<decltype(&::HMAC)>(::dlsym(h, "HMAC"));
    l.sha256 = reinterpret_cast<decltype(&::EVP_sha256)>(::dlsym(h, "EVP_sha256"));
    if (l.hmac == nullptr || l.sha256 == nullptr)
      throw IoError(fmt::format("rendezvous: {} lacks HMAC or EVP_sha256", kLibcrypto));
    return l;
  }();
  return lib;
}

// n bytes from the kernel's CSPRNG.
void fill_random(unsigned char* out, std::size_t n, const char* what) {
  while (n > 0) {
    ssize_t got = ::getrandom(out, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw IoError(fmt::format("{}: the kernel's random generator failed: {}", what, errno_text(errno)));
    out += got;
    n -= static_cast<std::size_t>(got);
  }
}

}  // namespace

Bytes random_nonce() {
  Bytes n(kNonceBytes);
  fill_random(n.data(), n.size(), "rendezvous");
  return n;
}

Bytes hmac_sha256(std::string_view key, ByteView message) {
  const Libcrypto& lib = libcrypto();
  Bytes out(EVP_MAX_MD_SIZE);
  unsigned int len = 0;
  if (lib.hmac(lib.sha256(), key.data(), int(key.size()), message.data(), message.size(), out.data(), &len) == nullptr)
    throw IoError("rendezvous: HMAC-SHA256 failed in OpenSSL");
  out.resize(len);
  return out;
}

bool constant_time_equal(ByteView a, ByteView b) {
  if (a.size() != b.size() || a.empty()) return false;
  unsigned char diff = 0;  // no early exit: the time does not depend on where they differ
  for (std::size_t i = 0; i < a.size(); ++i) diff = static_cast<unsigned char>(diff | (a[i] ^ b[i]));
  return diff == 0;
}

Bytes proof(std::string_view token, std::string_view role, ByteView first_nonce, ByteView second_nonce,
            std::string_view run_id, std::int64_t generation) {
  // Length-prefixed fields, so no two different inputs share an encoding.
  Bytes msg = wire::pack({Bytes(role.begin(), role.end()), Bytes(first_nonce.begin(), first_nonce.end()),
                          Bytes(second_nonce.begin(), second_nonce.end()), Bytes(run_id.begin(), run_id.end()),
                          wire::i64_bytes(generation)});
  static constexpr std::string_view kLabel = "dtrain-rdzv-v2 ";
  msg.insert(msg.begin(), kLabel.begin(), kLabel.end());
  return hmac_sha256(token, msg);
}

std::size_t token_bits(std::string_view token) {
  auto all = [&](auto pred) {
    for (char c : token)
      if (!pred(static_cast<unsigned char>(c))) return false;
    return true;
  };
  auto hex = [](unsigned char c) { return std::isxdigit(c) != 0; };
  auto b64 = [](unsigned char c) { return std::isalnum(c) != 0 || c == '+' || c == '/' || c == '-' || c == '_' || c == '='; };
  std::size_t n = token.size();
  if (all(hex)) return n * 4;
  if (all(b64)) {
    while (n > 0 && token[n - 1] == '=') --n;  // padding holds nothing
    return n * 6;
  }
  return n * 8;
}

void check_token_strength(std::string_view token, std::string_view where) {
  if (token.empty()) return;
  std::size_t bits = token_bits(token);
  if (bits >= kMinTokenBits) return;
  throw ConfigError(fmt::format(
      "{}: the rendezvous token is too weak ({} characters can hold at most {} bits, at least {} are needed: 32 hex "
      "digits, 22 base64 characters or 16 bytes); make a strong one with `dtrain token --output FILE` and give the "
      "same file to every node",
      where, token.size(), bits, kMinTokenBits));
}

std::string new_token() {
  unsigned char raw[kNewTokenBytes];
  fill_random(raw, sizeof raw, "token");
  std::string out;
  out.reserve(2 * sizeof raw);
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char c : raw) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  ::explicit_bzero(raw, sizeof raw);
  return out;
}

namespace {

// The first line of fd, up to kMaxTokenFileLine bytes (more is an error); false on a read error.
bool read_first_line(int fd, std::string& line, bool& too_long) {
  char buf[512];
  too_long = false;
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    std::string_view chunk(buf, std::size_t(n));
    auto nl = chunk.find('\n');
    line.append(chunk.substr(0, nl));
    if (line.size() > kMaxTokenFileLine) {
      too_long = true;
      return true;
    }
    if (nl != std::string_view::npos) return true;
  }
}

}  // namespace

std::string read_token_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw ConfigError(fmt::format("token file {}: {}; give a readable file with the shared token", path,
                                  errno_text(errno)));
  std::string line;
  bool too_long = false;
  bool ok = read_first_line(fd, line, too_long);
  int err = errno;
  struct stat st {};
  bool stat_ok = ::fstat(fd, &st) == 0;
  ::close(fd);
  if (!ok) throw ConfigError(fmt::format("token file {}: {}; give a readable file with the shared token", path, errno_text(err)));
  if (too_long)
    throw ConfigError(fmt::format("token file {}: the first line is longer than {} bytes; a token file holds one "
                                  "short line (make one with `dtrain token --output FILE`)",
                                  path, kMaxTokenFileLine));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
  if (line.empty())
    throw ConfigError(fmt::format("token file {} is empty; put the shared token on its first line", path));
  if (stat_ok && S_ISREG(st.st_mode) && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
    DTRAIN_WARN(rdzv, "token file {} can be read by other users (mode {:o}); chmod 600 it", path,
                st.st_mode & 0777);
  return line;
}

std::string resolve_token(std::string_view path) {
  if (path.empty()) {
    std::string token = param_string("DTRAIN_RDZV_TOKEN");
    check_token_strength(token, "DTRAIN_RDZV_TOKEN");
    return token;
  }
  std::string token = read_token_file(std::string(path));
  check_token_strength(token, fmt::format("token file {}", path));
  return token;
}

}  // namespace dtrain::rdzv::auth
