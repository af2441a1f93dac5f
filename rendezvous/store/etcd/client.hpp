#pragma once
// A client of etcd's v3 API through its JSON gateway (etcd 3.4: POST /v3/kv/range, /v3/kv/put,
// /v3/kv/deleterange, /v3/kv/txn, /v3/lease/grant, /v3/lease/keepalive, /v3/lease/revoke,
// /v3/watch, /v3/auth/authenticate), over HTTP/1.1 with libcurl; keys and values travel base64
// encoded, int64 fields as JSON strings. TLS (https endpoints: CA bundle, client certificate and
// key) and etcd's user/password authentication (a token fetched on first use and again when etcd
// says it expired) are passed through.
//
// Part of the etcd rendezvous plugin (libdtrain_etcd.so), loaded only when a job names the etcd
// backend, so a plain launch never loads libcurl.
//
// Threading: a Client may be shared by threads; each call is one request on a connection of its
// own (a small pool, reused). A Watch belongs to one thread except close(), which any thread may
// call to break a next() that waits.
//
// Errors: IoError (etcd not reachable, connection lost, a gRPC error in the reply: the message
// names the endpoint and etcd's text), AuthError (etcd refused the user/password or the
// certificate), TimeoutError (a request passed options.request_timeout).
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::etcd {

struct Options {
  std::string endpoint;          // "host:port" (http), "http://host:port" or "https://host:port"
  std::string cacert;            // https: CA bundle (PEM) that signed etcd's certificate; "": the system's
  std::string cert, key;         // https with client-certificate auth: this client's certificate and key (PEM)
  std::string user, password;    // etcd authentication; "" user: none
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds request_timeout{10000};
};

struct KeyValue {
  std::string key, value;
  std::int64_t create_revision = 0, mod_revision = 0, version = 0, lease = 0;
};

struct RangeResult {
  std::vector<KeyValue> kvs;
  std::int64_t revision = 0;  // the store's revision when the range was read (header.revision)
  std::int64_t count = 0;
};

// One comparison of a transaction: key's target (version, create or mod revision, value) against a
// number or a value.
struct Compare {
  enum class Target { version, create, mod, value };
  enum class Result { equal, greater, less, not_equal };
  std::string key;
  Target target = Target::version;
  Result result = Result::equal;
  std::int64_t number = 0;  // version / create / mod targets
  std::string value;        // value target
};

// One operation of a transaction branch.
struct Op {
  enum class Kind { put, range, erase };
  Kind kind = Kind::put;
  std::string key, value;
  std::string range_end;  // range/erase: [key, range_end), "" a single key (prefix_end() for a prefix)
  std::int64_t lease = 0; // put: attach to this lease (0: none)
  static Op put(std::string k, std::string v, std::int64_t lease = 0) { return {Kind::put, std::move(k), std::move(v), {}, lease}; }
  static Op range(std::string k, std::string end = {}) { return {Kind::range, std::move(k), {}, std::move(end), 0}; }
  static Op erase(std::string k, std::string end = {}) { return {Kind::erase, std::move(k), {}, std::move(end), 0}; }
};

struct TxnResult {
  bool succeeded = false;
  std::int64_t revision = 0;
  std::vector<RangeResult> ranges;  // one per range op of the branch taken, in order
};

struct WatchEvent {
  enum class Type { put, erase };
  Type type = Type::put;
  KeyValue kv;  // for erase: the key and mod_revision only
};

// The range_end that covers every key starting with `prefix` (etcd's rule: the prefix with its last
// byte below 0xff incremented and the rest dropped).
std::string prefix_end(std::string_view prefix);

class Endpoint;  // internal (endpoint.hpp)

class Client {
 public:
  explicit Client(Options opts);  // does not connect yet
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // [key, range_end); range_end "" : the key alone.
  RangeResult range(std::string_view key, std::string_view range_end = {});
  RangeResult range_prefix(std::string_view prefix) { return range(prefix, prefix_end(prefix)); }
  std::int64_t put(std::string_view key, std::string_view value, std::int64_t lease = 0);  // the new revision
  std::int64_t erase(std::string_view key, std::string_view range_end = {});  // keys deleted
  TxnResult txn(const std::vector<Compare>& compares, const std::vector<Op>& success,
                const std::vector<Op>& failure = {});

  std::int64_t lease_grant(std::chrono::seconds ttl);  // the lease id
  // Renews the lease once; throws IoError naming the lease when etcd says it expired (TTL 0).
  void lease_keepalive(std::int64_t lease);
  void lease_revoke(std::int64_t lease);  // a lease already gone is not an error

  const Options& options() const { return opts_; }
  std::string endpoint() const;        // "host:port" as given, for messages
  std::string url() const;             // "http://host:port"
  // Our IP address on a connection to etcd (the interface that reaches it), e.g. "10.0.0.2".
  std::string local_address();

 private:
  friend class Watch;  // a watch opened through a client shares its endpoint and token
  std::shared_ptr<Endpoint> shared_endpoint() const;
  struct Impl;
  Options opts_;
  std::unique_ptr<Impl> impl_;
};

// A watch of [key, range_end) from start_revision (0: from now): events in revision order.
class Watch {
 public:
  // Returns once etcd confirmed the watch ("created"); throws as a Client call does (IoError,
  // AuthError, TimeoutError after options.request_timeout). A start_revision that etcd already
  // compacted away is reported by the first next() (IoError naming the compacted revision): etcd
  // confirms such a watch and cancels it just after.
  Watch(const Options& opts, std::string key, std::string range_end, std::int64_t start_revision);
  // The same through a client: its endpoint, TLS files and token (no authentication of its own).
  Watch(Client& client, std::string key, std::string range_end, std::int64_t start_revision);
  ~Watch();
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  // The events that arrived since the last call; waits up to `timeout` for the first (empty when
  // none came). Throws IoError when the stream ends (etcd gone, the revision compacted) or after
  // close().
  std::vector<WatchEvent> next(std::chrono::milliseconds timeout);
  void close();  // any thread: a next() in progress returns promptly (throwing IoError)
  bool closed() const;  // close() was called (tells a closed watch's IoError from a lost etcd)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtrain::etcd
