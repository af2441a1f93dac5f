#pragma once
// The JSON shapes of etcd's v3 gRPC gateway (etcd 3.4), both ways: keys and values base64 encoded,
// int64 fields as JSON strings, fields at their default value omitted (a PUT event has no "type",
// an empty range no "kvs", a failed txn no "succeeded"), errors as {"error", "message", "code"}.
// Pure: no I/O.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "client.hpp"

namespace dtrain::etcd::gw {

using nlohmann::json;

// gRPC status codes that etcd answers with (google.golang.org/grpc/codes).
enum class Code : int {
  ok = 0,
  invalid_argument = 3,
  deadline_exceeded = 4,
  not_found = 5,
  permission_denied = 7,
  failed_precondition = 9,
  unavailable = 14,
  unauthenticated = 16,
};

std::string b64encode(std::string_view bytes);
// Throws IoError (naming `what`) when `text` is not padded standard base64.
std::string b64decode(std::string_view text, std::string_view what);

// The int64 at obj[field]: a JSON string or number; 0 when the field is absent.
std::int64_t i64(const json& obj, const char* field);

// {"key", "range_end"} of a range, delete or watch request (range_end omitted when empty).
json key_range(std::string_view key, std::string_view range_end);
KeyValue kv_from(const json& kv);
RangeResult range_from(const json& reply);  // a RangeResponse
json compare_to(const Compare& c);
json op_to(const Op& op);

// An error reply: a unary call's {"error", "message", "code"} or a stream's
// {"error": {"grpc_code", "http_code", "message", "http_status"}}.
struct ErrorReply {
  int code = 0;           // gRPC code (2, unknown, when the reply says none)
  std::string message;    // etcd's text, e.g. "etcdserver: requested lease not found"
};
// The error a reply carries, if any ("error" as an object or next to "code"); nullopt for a result.
std::optional<ErrorReply> error_of(const json& reply);
// Parses an error body of a non-200 answer; a body that is not JSON becomes the message.
ErrorReply error_from_body(long http_status, const std::string& body);

// etcd says our token is no longer valid: fetch another and retry once.
bool token_invalid(const ErrorReply& e);
// etcd refused the user/password, the permission, or needs a user we did not give.
bool auth_refused(const ErrorReply& e);

}  // namespace dtrain::etcd::gw
