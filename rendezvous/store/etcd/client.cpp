// Client: etcd's unary KV and lease calls through the JSON gateway, each on a pooled curl handle
// (one connection kept alive per handle).
#include "client.hpp"

#include <mutex>
#include <vector>

#include "dtrain/common/errors.hpp"
#include "gateway.hpp"
#include "endpoint.hpp"

namespace dtrain::etcd {

using gw::json;

struct Client::Impl {
  explicit Impl(const Options& o) : ep(std::make_shared<Endpoint>(o)) {}
  std::shared_ptr<Endpoint> ep;
  std::mutex mu;
  std::vector<std::unique_ptr<Handle>> idle;  // handles (and their connections) between calls
  static constexpr std::size_t kMaxIdle = 8;

  // A handle for one call, back to the pool when the call ends (or dropped with its connection
  // when the call failed: the connection may be in an unknown state).
  class Borrowed {
   public:
    explicit Borrowed(Impl& impl) : impl_(impl) {
      {
        std::lock_guard lock(impl_.mu);
        if (!impl_.idle.empty()) {
          h_ = std::move(impl_.idle.back());
          impl_.idle.pop_back();
        }
      }
      if (!h_) h_ = impl_.ep->new_handle(false);
    }
    ~Borrowed() {
      if (std::uncaught_exceptions() > exceptions_) return;
      std::lock_guard lock(impl_.mu);
      if (impl_.idle.size() < kMaxIdle) impl_.idle.push_back(std::move(h_));
    }
    Borrowed(const Borrowed&) = delete;
    Borrowed& operator=(const Borrowed&) = delete;
    Handle& operator*() { return *h_; }

   private:
    Impl& impl_;
    std::unique_ptr<Handle> h_;
    int exceptions_ = std::uncaught_exceptions();
  };

  json call(std::string_view path, const json& body, int tolerated = -1) {
    Borrowed h(*this);
    return ep->call(*h, path, body, tolerated);
  }
};

namespace {

std::int64_t header_revision(const json& reply) {
  auto h = reply.find("header");
  return h == reply.end() ? 0 : gw::i64(*h, "revision");
}

}  // namespace

Client::Client(Options opts) : opts_(std::move(opts)), impl_(std::make_unique<Impl>(opts_)) {}

Client::~Client() = default;

std::shared_ptr<Endpoint> Client::shared_endpoint() const { return impl_->ep; }

std::string Client::endpoint() const { return impl_->ep->endpoint(); }
std::string Client::url() const { return impl_->ep->url(); }

RangeResult Client::range(std::string_view key, std::string_view range_end) {
  return gw::range_from(impl_->call("/v3/kv/range", gw::key_range(key, range_end)));
}

std::int64_t Client::put(std::string_view key, std::string_view value, std::int64_t lease) {
  json body{{"key", gw::b64encode(key)}, {"value", gw::b64encode(value)}};
  if (lease != 0) body["lease"] = std::to_string(lease);
  return header_revision(impl_->call("/v3/kv/put", body));
}

std::int64_t Client::erase(std::string_view key, std::string_view range_end) {
  return gw::i64(impl_->call("/v3/kv/deleterange", gw::key_range(key, range_end)), "deleted");
}

TxnResult Client::txn(const std::vector<Compare>& compares, const std::vector<Op>& success,
                      const std::vector<Op>& failure) {
  json body{{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
  for (const auto& c : compares) body["compare"].push_back(gw::compare_to(c));
  for (const auto& op : success) body["success"].push_back(gw::op_to(op));
  for (const auto& op : failure) body["failure"].push_back(gw::op_to(op));
  json reply = impl_->call("/v3/kv/txn", body);
  TxnResult r;
  r.succeeded = reply.value("succeeded", false);
  r.revision = header_revision(reply);
  if (auto rs = reply.find("responses"); rs != reply.end() && rs->is_array()) {
    for (const auto& one : *rs) {
      auto range = one.find("response_range");
      if (range == one.end()) continue;
      r.ranges.push_back(gw::range_from(*range));
      if (r.ranges.back().revision == 0) r.ranges.back().revision = r.revision;
    }
  }
  return r;
}

std::int64_t Client::lease_grant(std::chrono::seconds ttl) {
  json reply = impl_->call("/v3/lease/grant", json{{"TTL", std::to_string(ttl.count())}, {"ID", "0"}});
  if (auto e = reply.find("error"); e != reply.end() && e->is_string() && !e->get_ref<const std::string&>().empty())
    throw IoError(fmt::format("etcd {}: lease grant refused: {}", endpoint(), e->get<std::string>()));
  std::int64_t id = gw::i64(reply, "ID");
  if (id == 0) throw IoError(fmt::format("etcd {}: lease grant answered without a lease id", endpoint()));
  return id;
}

void Client::lease_keepalive(std::int64_t lease) {
  json reply = impl_->call("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}});
  const json& result = reply.contains("result") ? reply["result"] : reply;
  if (gw::i64(result, "TTL") <= 0)
    throw IoError(fmt::format("etcd {}: lease {} has expired (etcd no longer knows it): its keys are gone; grant a "
                              "new lease and write them again",
                              endpoint(), lease));
}

void Client::lease_revoke(std::int64_t lease) {
  impl_->call("/v3/lease/revoke", json{{"ID", std::to_string(lease)}}, int(gw::Code::not_found));
}

std::string Client::local_address() {
  Impl::Borrowed h(*impl_);
  impl_->ep->get(*h, "/version");
  char* ip = nullptr;
  if (curl_easy_getinfo((*h).curl, CURLINFO_LOCAL_IP, &ip) != CURLE_OK || ip == nullptr || *ip == '\0')
    throw IoError(fmt::format("etcd {}: libcurl does not know our address on the connection", endpoint()));
  return ip;
}

}  // namespace dtrain::etcd
