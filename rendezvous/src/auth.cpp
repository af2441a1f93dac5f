#include "dtrain/rendezvous/auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <cerrno>
#include <fstream>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/params.hpp"
#include "dtrain/common/log.hpp"
#include "dtrain/rendezvous/wire.hpp"

namespace dtrain::rdzv::auth {

Bytes random_nonce() {
  Bytes n(kNonceBytes);
  if (RAND_bytes(n.data(), int(n.size())) != 1) throw IoError("rendezvous: the OpenSSL random generator failed");
  return n;
}

Bytes hmac_sha256(std::string_view key, ByteView message) {
  Bytes out(EVP_MAX_MD_SIZE);
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), int(key.size()), message.data(), message.size(), out.data(), &len) == nullptr)
    throw IoError("rendezvous: HMAC-SHA256 failed in OpenSSL");
  out.resize(len);
  return out;
}

bool constant_time_equal(ByteView a, ByteView b) {
  if (a.size() != b.size() || a.empty()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Bytes proof(std::string_view token, std::string_view role, ByteView first_nonce, ByteView second_nonce,
            std::string_view run_id, std::int64_t generation) {
  // Length-prefixed fields, so no two different inputs share an encoding.
  Bytes msg = wire::pack({Bytes(role.begin(), role.end()), Bytes(first_nonce.begin(), first_nonce.end()),
                          Bytes(second_nonce.begin(), second_nonce.end()), Bytes(run_id.begin(), run_id.end()),
                          wire::i64_bytes(generation)});
  static constexpr std::string_view kLabel = "dtrain-rdzv-v1 ";
  msg.insert(msg.begin(), kLabel.begin(), kLabel.end());
  return hmac_sha256(token, msg);
}

std::string read_token_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw ConfigError(fmt::format("token file {}: {}; give a readable file with the shared token", path,
                                  errno_text(errno)));
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
  if (line.empty())
    throw ConfigError(fmt::format("token file {} is empty; put the shared token on its first line", path));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
    DTRAIN_WARN(rdzv, "token file {} can be read by other users (mode {:o}); chmod 600 it", path,
                st.st_mode & 0777);
  return line;
}

std::string resolve_token(std::string_view path) {
  return path.empty() ? param_string("DTRAIN_RDZV_TOKEN") : read_token_file(std::string(path));
}

}  // namespace dtrain::rdzv::auth
