// Watch: POST /v3/watch with a create_request; the gateway answers with a chunked stream of JSON
// messages, one a line ({"result": {...}}), the first saying "created". The transfer runs on a curl
// multi handle so that next() waits in curl_multi_poll, which close() breaks with curl_multi_wakeup.
#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>

#include "client.hpp"
#include "dtrain/common/errors.hpp"
#include "gateway.hpp"
#include "endpoint.hpp"

namespace dtrain::etcd {

using gw::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::string_view kPath = "/v3/watch";

int poll_ms(Clock::duration left) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1;
  return int(std::clamp<std::int64_t>(ms, 0, 3600000));
}

// The gRPC code in a cancel_reason such as "rpc error: code = Unauthenticated desc = etcdserver: ...".
int code_in(const std::string& reason) {
  if (reason.find("code = Unauthenticated") != std::string::npos) return int(gw::Code::unauthenticated);
  if (reason.find("code = PermissionDenied") != std::string::npos) return int(gw::Code::permission_denied);
  return 2;
}

}  // namespace

struct Watch::Impl {
  Impl(std::shared_ptr<Endpoint> s, std::string k, std::string end, std::int64_t start)
      : ep(std::move(s)), key(std::move(k)), range_end(std::move(end)), start_revision(start),
        multi(curl_multi_init()) {
    if (multi == nullptr) throw IoError("libcurl could not make a multi handle (curl_multi_init)");
  }
  ~Impl() {
    stop();
    curl_multi_cleanup(multi);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  std::shared_ptr<Endpoint> ep;
  std::string key, range_end;
  std::int64_t start_revision;
  CURLM* multi;
  std::unique_ptr<Handle> h;
  Headers headers;
  std::atomic<bool> closed{false};
  bool created = false;  // etcd confirmed the watch
  bool done = false;     // the transfer ended
  CURLcode result = CURLE_OK;
  std::vector<WatchEvent> pending;

  std::string what() const { return fmt::format("etcd {}: the watch of '{}'", ep->endpoint(), key); }
  void start(const std::string& token);
  void stop();
  void pump(int ms);
  std::optional<json> take_message();
  // Reads a message; returns true for the "created" reply, throws for a cancel or an error.
  bool absorb(const json& m);
  [[noreturn]] void throw_ended();
  void wait_created(Clock::time_point deadline);
  void open();
};

void Watch::Impl::start(const std::string& token) {
  json create = gw::key_range(key, range_end);
  if (start_revision > 0) create["start_revision"] = std::to_string(start_revision);
  h = ep->new_handle(true);
  headers = ep->prepare(*h, kPath, json{{"create_request", create}}.dump(), token);
  done = false;
  result = CURLE_OK;
  if (CURLMcode rc = curl_multi_add_handle(multi, h->curl); rc != CURLM_OK)
    throw IoError(fmt::format("{}: libcurl: {}", what(), curl_multi_strerror(rc)));
}

void Watch::Impl::stop() {
  if (!h) return;
  curl_multi_remove_handle(multi, h->curl);
  h.reset();
  headers.reset();
}

// Waits up to ms for data (or close()), then lets curl read what came.
void Watch::Impl::pump(int ms) {
  int running = 0;
  curl_multi_poll(multi, nullptr, 0, ms, nullptr);
  curl_multi_perform(multi, &running);
  int left = 0;
  while (CURLMsg* m = curl_multi_info_read(multi, &left)) {
    if (m->msg != CURLMSG_DONE) continue;
    done = true;
    result = m->data.result;
  }
}

std::optional<json> Watch::Impl::take_message() {
  auto& buf = h->received;
  auto nl = buf.find('\n');
  if (nl == std::string::npos) return std::nullopt;
  std::string line = buf.substr(0, nl);
  buf.erase(0, nl + 1);
  if (line.find_first_not_of(" \r\t") == std::string::npos) return std::nullopt;
  auto m = json::parse(line, nullptr, false);
  if (m.is_discarded()) throw IoError(fmt::format("{} sent a line that is not JSON: {}", what(), line.substr(0, 200)));
  return m;
}

bool Watch::Impl::absorb(const json& m) {
  if (auto e = gw::error_of(m)) ep->throw_reply(kPath, *e);
  const json& r = m.contains("result") ? m["result"] : m;
  if (r.value("canceled", false)) {
    std::string reason = r.value("cancel_reason", std::string());
    gw::ErrorReply e{code_in(reason), reason};
    if (gw::token_invalid(e) || gw::auth_refused(e)) ep->throw_reply(kPath, e);  // AuthError
    if (std::int64_t compacted = gw::i64(r, "compact_revision"); compacted > 0)
      throw IoError(fmt::format("{} from revision {} was cancelled: etcd compacted its history up to revision {}; "
                                "read the keys again and watch from a current revision",
                                what(), start_revision, compacted));
    throw IoError(fmt::format("{} was cancelled by etcd: {}", what(), reason.empty() ? "(no reason given)" : reason));
  }
  if (auto evs = r.find("events"); evs != r.end() && evs->is_array()) {
    for (const auto& ev : *evs) {
      WatchEvent out;
      out.type = ev.value("type", std::string("PUT")) == "DELETE" ? WatchEvent::Type::erase : WatchEvent::Type::put;
      if (auto kv = ev.find("kv"); kv != ev.end()) out.kv = gw::kv_from(*kv);
      pending.push_back(std::move(out));
    }
  }
  if (r.value("created", false)) created = true;
  return r.value("created", false);
}

void Watch::Impl::throw_ended() {
  long status = 0;
  curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &status);
  if (status != 0 && status != 200) ep->throw_reply(kPath, gw::error_from_body(status, h->received));
  if (auto rest = json::parse(h->received, nullptr, false); !rest.is_discarded() && rest.is_object()) absorb(rest);
  std::string why = result == CURLE_OK ? std::string("etcd closed the stream")
                                       : (h->errbuf[0] != '\0' ? std::string(h->errbuf) : curl_easy_strerror(result));
  if (!created && result != CURLE_OK) ep->throw_transport(*h, result, kPath);  // could not open it
  throw IoError(fmt::format("{} ended ({}); etcd stopped or the connection was lost", what(), why));
}

void Watch::Impl::wait_created(Clock::time_point deadline) {
  for (;;) {
    while (auto m = take_message())
      if (absorb(*m)) return;
    if (done) throw_ended();
    if (closed) throw IoError(fmt::format("{} was closed", what()));
    auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero())
      throw TimeoutError(fmt::format("{}: etcd did not confirm it within {} ms; etcd is overloaded or lost its quorum",
                                     what(), ep->options().request_timeout.count()));
    pump(poll_ms(left));
  }
}

// Opens the stream and waits for "created"; a token that etcd calls invalid is fetched again once.
void Watch::Impl::open() {
  const Options& o = ep->options();
  auto deadline = Clock::now() + o.connect_timeout + o.request_timeout;
  auto unary = ep->new_handle(false);  // for the token, when one is fetched
  std::string token = ep->token(*unary);
  for (bool retried = false;; retried = true) {
    start(token);
    try {
      wait_created(deadline);
      return;
    } catch (const AuthError&) {
      if (retried || o.user.empty()) throw;
    }
    stop();
    token = ep->token(*unary, token);
  }
}

Watch::Watch(const Options& opts, std::string key, std::string range_end, std::int64_t start_revision)
    : impl_(std::make_unique<Impl>(std::make_shared<Endpoint>(opts), std::move(key), std::move(range_end),
                                   start_revision)) {
  impl_->open();
}

Watch::Watch(Client& client, std::string key, std::string range_end, std::int64_t start_revision)
    : impl_(std::make_unique<Impl>(client.shared_endpoint(), std::move(key), std::move(range_end), start_revision)) {
  impl_->open();
}

Watch::~Watch() = default;

std::vector<WatchEvent> Watch::next(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + std::max(timeout, std::chrono::milliseconds(0));
  Impl& w = *impl_;
  for (;;) {
    if (w.closed) throw IoError(fmt::format("{} was closed", w.what()));
    while (auto m = w.take_message()) w.absorb(*m);
    if (!w.pending.empty()) return std::exchange(w.pending, {});
    if (w.done) w.throw_ended();
    auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) return {};
    w.pump(poll_ms(left));
  }
}

void Watch::close() {
  impl_->closed = true;
  curl_multi_wakeup(impl_->multi);
}

bool Watch::closed() const { return impl_->closed; }

}  // namespace dtrain::etcd
