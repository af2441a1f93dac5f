#include "gateway.hpp"

#include <openssl/evp.h>

#include <charconv>

#include "dtrain/common/errors.hpp"

namespace dtrain::etcd {

std::string prefix_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key from prefix on (etcd's "\0" range_end)
}

namespace gw {

std::string b64encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()), int(bytes.size()));
  out.resize(std::size_t(n));
  return out;
}

std::string b64decode(std::string_view text, std::string_view what) {
  if (text.empty()) return {};
  if (text.size() % 4 != 0) throw IoError(fmt::format("etcd sent {} that is not base64 ({} characters)", what, text.size()));
  std::string out(3 * (text.size() / 4), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()), int(text.size()));
  if (n < 0) throw IoError(fmt::format("etcd sent {} that is not base64", what));
  // EVP_DecodeBlock counts the zero bytes that the '=' padding stands for.
  std::size_t pad = text.back() != '=' ? 0 : text[text.size() - 2] == '=' ? 2 : 1;
  out.resize(std::size_t(n) - pad);
  return out;
}

std::int64_t i64(const json& obj, const char* field) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return 0;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (!it->is_string()) throw IoError(fmt::format("etcd sent a non-integer \"{}\": {}", field, it->dump()));
  const auto& s = it->get_ref<const std::string&>();
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size())
    throw IoError(fmt::format("etcd sent a non-integer \"{}\": \"{}\"", field, s));
  return v;
}

namespace {

std::string bytes_field(const json& obj, const char* field) {
  auto it = obj.find(field);
  if (it == obj.end() || !it->is_string()) return {};
  return b64decode(it->get_ref<const std::string&>(), field);
}

const char* target_name(Compare::Target t) {
  switch (t) {
    case Compare::Target::version: return "VERSION";
    case Compare::Target::create: return "CREATE";
    case Compare::Target::mod: return "MOD";
    case Compare::Target::value: return "VALUE";
  }
  return "VERSION";
}

const char* result_name(Compare::Result r) {
  switch (r) {
    case Compare::Result::equal: return "EQUAL";
    case Compare::Result::greater: return "GREATER";
    case Compare::Result::less: return "LESS";
    case Compare::Result::not_equal: return "NOT_EQUAL";
  }
  return "EQUAL";
}

}  // namespace

json key_range(std::string_view key, std::string_view range_end) {
  json j{{"key", b64encode(key)}};
  if (!range_end.empty()) j["range_end"] = b64encode(range_end);
  return j;
}

KeyValue kv_from(const json& kv) {
  KeyValue out;
  out.key = bytes_field(kv, "key");
  out.value = bytes_field(kv, "value");
  out.create_revision = i64(kv, "create_revision");
  out.mod_revision = i64(kv, "mod_revision");
  out.version = i64(kv, "version");
  out.lease = i64(kv, "lease");
  return out;
}

RangeResult range_from(const json& reply) {
  RangeResult r;
  if (auto h = reply.find("header"); h != reply.end()) r.revision = i64(*h, "revision");
  if (auto kvs = reply.find("kvs"); kvs != reply.end() && kvs->is_array())
    for (const auto& kv : *kvs) r.kvs.push_back(kv_from(kv));
  r.count = i64(reply, "count");
  return r;
}

json compare_to(const Compare& c) {
  json j{{"key", b64encode(c.key)}, {"target", target_name(c.target)}, {"result", result_name(c.result)}};
  switch (c.target) {
    case Compare::Target::version: j["version"] = std::to_string(c.number); break;
    case Compare::Target::create: j["create_revision"] = std::to_string(c.number); break;
    case Compare::Target::mod: j["mod_revision"] = std::to_string(c.number); break;
    case Compare::Target::value: j["value"] = b64encode(c.value); break;
  }
  return j;
}

json op_to(const Op& op) {
  switch (op.kind) {
    case Op::Kind::put: {
      json p{{"key", b64encode(op.key)}, {"value", b64encode(op.value)}};
      if (op.lease != 0) p["lease"] = std::to_string(op.lease);
      return json{{"request_put", std::move(p)}};
    }
    case Op::Kind::range: return json{{"request_range", key_range(op.key, op.range_end)}};
    case Op::Kind::erase: return json{{"request_delete_range", key_range(op.key, op.range_end)}};
  }
  return {};
}

std::optional<ErrorReply> error_of(const json& reply) {
  if (!reply.is_object()) return std::nullopt;
  auto it = reply.find("error");
  if (it == reply.end()) return std::nullopt;
  ErrorReply e{2, {}};
  if (it->is_object()) {  // a stream's error
    e.code = int(i64(*it, "grpc_code"));
    e.message = it->value("message", std::string("(no message)"));
    return e;
  }
  if (!reply.contains("code")) return std::nullopt;  // e.g. LeaseGrantResponse's own "error" string
  e.code = int(i64(reply, "code"));
  e.message = reply.value("message", it->is_string() ? it->get<std::string>() : std::string("(no message)"));
  return e;
}

ErrorReply error_from_body(long http_status, const std::string& body) {
  auto j = json::parse(body, nullptr, false);
  if (auto e = error_of(j)) return *e;
  std::string text = body.substr(0, 200);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return ErrorReply{2, fmt::format("HTTP {}: {}", http_status, text.empty() ? "(empty body)" : text)};
}

bool token_invalid(const ErrorReply& e) {
  return e.code == int(Code::unauthenticated) || e.message.find("invalid auth token") != std::string::npos ||
         e.message.find("revision of auth store is old") != std::string::npos;
}

bool auth_refused(const ErrorReply& e) {
  static constexpr const char* kTexts[] = {"authentication failed", "user name is empty", "permission denied",
                                           "authentication is not enabled", "user name not found"};
  if (e.code == int(Code::permission_denied)) return true;
  for (const char* t : kTexts)
    if (e.message.find(t) != std::string::npos) return true;
  return false;
}

}  // namespace gw
}  // namespace dtrain::etcd
