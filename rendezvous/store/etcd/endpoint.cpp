#include "endpoint.hpp"

#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "dtrain/common/errors.hpp"

namespace dtrain::etcd {
namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw IoError("libcurl could not initialise (curl_global_init)");
  });
}

std::size_t on_data(char* data, std::size_t size, std::size_t n, void* user) {
  static_cast<Handle*>(user)->received.append(data, size * n);
  return size * n;
}

// "host:port" with a port of 1..65535 (host may be a bracketed IPv6 address).
bool is_host_port(std::string_view hp) {
  auto colon = hp.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == hp.size()) return false;
  if (hp.find('/') != std::string_view::npos) return false;
  int port = 0;
  auto digits = hp.substr(colon + 1);
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  return ec == std::errc{} && p == digits.data() + digits.size() && port > 0 && port < 65536;
}

void check_readable(const std::string& path, const char* what) {
  if (!path.empty() && ::access(path.c_str(), R_OK) != 0)
    throw ConfigError(fmt::format("etcd {} '{}': {}; give a readable PEM file", what, path, errno_text(errno)));
}

template <class T>
void setopt(CURL* h, CURLoption o, T v) {
  if (curl_easy_setopt(h, o, v) != CURLE_OK) throw IoError(fmt::format("libcurl refused option {}", int(o)));
}

bool contains(std::string_view text, std::string_view what) { return text.find(what) != std::string_view::npos; }

}  // namespace

Handle::Handle() : curl(curl_easy_init()) {
  if (curl == nullptr) throw IoError("libcurl could not make a handle (curl_easy_init)");
}

Handle::~Handle() { curl_easy_cleanup(curl); }

Endpoint::Endpoint(Options opts) : opts_(std::move(opts)) {
  global_init();
  std::string_view ep = opts_.endpoint;
  if (ep.rfind("https://", 0) == 0) {
    https_ = true;
    ep.remove_prefix(8);
  } else if (ep.rfind("http://", 0) == 0) {
    ep.remove_prefix(7);
  }
  while (!ep.empty() && ep.back() == '/') ep.remove_suffix(1);
  if (!is_host_port(ep))
    throw ConfigError(fmt::format("etcd endpoint '{}': expected host:port, http://host:port or https://host:port",
                                  opts_.endpoint));
  endpoint_ = std::string(ep);
  url_ = fmt::format("{}://{}", https_ ? "https" : "http", endpoint_);
  if (!https_ && !(opts_.cacert.empty() && opts_.cert.empty() && opts_.key.empty()))
    throw ConfigError(fmt::format("etcd endpoint '{}' is plain http but TLS files were given; write it as https://{}",
                                  opts_.endpoint, endpoint_));
  if (opts_.cert.empty() != opts_.key.empty())
    throw ConfigError("etcd client certificate and key go together: give both or neither");
  check_readable(opts_.cacert, "CA bundle");
  check_readable(opts_.cert, "client certificate");
  check_readable(opts_.key, "client key");
}

std::unique_ptr<Handle> Endpoint::new_handle(bool stream) const {
  auto h = std::make_unique<Handle>();
  CURL* c = h->curl;
  setopt(c, CURLOPT_NOSIGNAL, 1L);
  setopt(c, CURLOPT_ERRORBUFFER, h->errbuf);
  setopt(c, CURLOPT_WRITEFUNCTION, &on_data);
  setopt(c, CURLOPT_WRITEDATA, h.get());
  setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  setopt(c, CURLOPT_PROXY, "");  // etcd is reached directly, whatever http_proxy says
  setopt(c, CURLOPT_HTTP_VERSION, long(CURL_HTTP_VERSION_1_1));
  setopt(c, CURLOPT_CONNECTTIMEOUT_MS, long(opts_.connect_timeout.count()));
  setopt(c, CURLOPT_TIMEOUT_MS, stream ? 0L : long(opts_.request_timeout.count()));
  // A watch may sit idle for long: keepalive probes notice a peer that vanished without a FIN.
  setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  setopt(c, CURLOPT_TCP_KEEPIDLE, 10L);
  setopt(c, CURLOPT_TCP_KEEPINTVL, 5L);
  if (https_) {
    if (!opts_.cacert.empty()) setopt(c, CURLOPT_CAINFO, opts_.cacert.c_str());
    if (!opts_.cert.empty()) setopt(c, CURLOPT_SSLCERT, opts_.cert.c_str());
    if (!opts_.key.empty()) setopt(c, CURLOPT_SSLKEY, opts_.key.c_str());
  }
  return h;
}

Headers Endpoint::prepare(Handle& h, std::string_view path, const std::string& body, const std::string& token) const {
  Headers hdrs;
  auto add = [&](const std::string& line) {
    curl_slist* l = curl_slist_append(hdrs.get(), line.c_str());
    if (l == nullptr) throw IoError("libcurl could not build the request headers");
    (void)hdrs.release();
    hdrs.reset(l);
  };
  add("Content-Type: application/json");
  add("Expect:");  // no 100-continue round trip before a large body
  if (!token.empty()) add("Authorization: " + token);
  h.received.clear();
  h.errbuf[0] = '\0';
  setopt(h.curl, CURLOPT_URL, (url_ + std::string(path)).c_str());
  setopt(h.curl, CURLOPT_HTTPHEADER, hdrs.get());
  setopt(h.curl, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.size()));
  setopt(h.curl, CURLOPT_COPYPOSTFIELDS, body.c_str());
  return hdrs;
}

long Endpoint::perform(Handle& h, std::string_view path, const std::string& body, const std::string& token) {
  Headers hdrs = prepare(h, path, body, token);
  CURLcode rc = curl_easy_perform(h.curl);
  curl_easy_setopt(h.curl, CURLOPT_HTTPHEADER, nullptr);
  if (rc != CURLE_OK) throw_transport(h, rc, path);
  long status = 0;
  curl_easy_getinfo(h.curl, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

std::string Endpoint::get(Handle& h, std::string_view path) {
  h.received.clear();
  h.errbuf[0] = '\0';
  setopt(h.curl, CURLOPT_URL, (url_ + std::string(path)).c_str());
  setopt(h.curl, CURLOPT_HTTPGET, 1L);
  CURLcode rc = curl_easy_perform(h.curl);
  if (rc != CURLE_OK) throw_transport(h, rc, path);
  long status = 0;
  curl_easy_getinfo(h.curl, CURLINFO_RESPONSE_CODE, &status);
  if (status != 200) throw_reply(path, gw::error_from_body(status, h.received));
  return h.received;
}

gw::json Endpoint::call(Handle& h, std::string_view path, const gw::json& body, int tolerated) {
  std::string text = body.dump();
  std::string tok = token(h);
  for (bool retried = false;; retried = true) {
    long status = perform(h, path, text, tok);
    std::optional<gw::ErrorReply> err;
    if (status == 200) {
      auto reply = gw::json::parse(h.received, nullptr, false);
      if (reply.is_discarded())
        throw IoError(fmt::format("etcd {} ({}): the reply is not JSON: {}", endpoint_, path, h.received.substr(0, 200)));
      err = gw::error_of(reply);
      if (!err) return reply;
    } else {
      err = gw::error_from_body(status, h.received);
    }
    if (err->code == tolerated) return nullptr;
    if (retried || opts_.user.empty() || !gw::token_invalid(*err)) throw_reply(path, *err);
    tok = token(h, tok);  // the token expired (or etcd restarted): fetch another, once
  }
}

std::string Endpoint::token(Handle& h, const std::string& stale) {
  if (opts_.user.empty()) return {};
  std::lock_guard lock(token_mu_);
  if (token_.empty() || token_ == stale) token_ = authenticate(h);
  return token_;
}

std::string Endpoint::authenticate(Handle& h) {
  static constexpr std::string_view kPath = "/v3/auth/authenticate";
  long status = perform(h, kPath, gw::json{{"name", opts_.user}, {"password", opts_.password}}.dump(), {});
  auto reply = gw::json::parse(h.received, nullptr, false);
  std::optional<gw::ErrorReply> err = status == 200 ? gw::error_of(reply) : gw::error_from_body(status, h.received);
  if (err) {
    if (contains(err->message, "authentication is not enabled"))
      throw AuthError(fmt::format("etcd {} does not have authentication enabled, but user '{}' was given: enable it "
                                  "(etcdctl auth enable) or give no user",
                                  endpoint_, opts_.user));
    if (gw::auth_refused(*err))
      throw AuthError(fmt::format("etcd {} refused user '{}': {}; check the etcd user name and password", endpoint_,
                                  opts_.user, err->message));
    throw_reply(kPath, *err);
  }
  if (!reply.is_object() || !reply.contains("token") || !reply["token"].is_string())
    throw IoError(fmt::format("etcd {} ({}): the reply has no token", endpoint_, kPath));
  return reply["token"].get<std::string>();
}

void Endpoint::throw_transport(const Handle& h, CURLcode rc, std::string_view path) const {
  std::string why = h.errbuf[0] != '\0' ? std::string(h.errbuf) : curl_easy_strerror(rc);
  auto where = fmt::format("etcd {} ({})", endpoint_, path);
  curl_off_t connected_us = 0;
  curl_easy_getinfo(h.curl, CURLINFO_CONNECT_TIME_T, &connected_us);
  const std::string tls_hint =
      "check the CA bundle that signed etcd's certificate, and the client certificate and key etcd expects";
  switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
      if (connected_us == 0)
        throw IoError(fmt::format("{}: could not connect within {} ms ({}); check that etcd runs there and that this "
                                  "host reaches it",
                                  where, opts_.connect_timeout.count(), why));
      throw TimeoutError(fmt::format("{}: no answer within {} ms ({}); etcd is overloaded or lost its quorum", where,
                                     opts_.request_timeout.count(), why));
    case CURLE_COULDNT_RESOLVE_HOST:
      // the join's waiting line shows a why that says "does not resolve" (rdzv::kDoesNotResolve) as it is
      throw IoError(fmt::format("{}: the host name does not resolve ({}); check the endpoint", where, why));
    case CURLE_COULDNT_CONNECT:
      throw IoError(fmt::format("{}: cannot connect ({}); is etcd running there? check the endpoint", where, why));
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
      throw AuthError(fmt::format("{}: TLS handshake failed ({}); {}", where, why, tls_hint));
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
      // TLS 1.3 reports a refused client certificate as an alert on the first read
      if (https_ && contains(why, "alert")) throw AuthError(fmt::format("{}: etcd refused us ({}); {}", where, why, tls_hint));
      throw IoError(fmt::format("{}: connection lost ({}); etcd stopped or the network failed", where, why));
    case CURLE_GOT_NOTHING:  // what etcd serving TLS answers to plain http
      throw IoError(fmt::format("{}: {}{}", where, why,
                                https_ ? "" : "; if etcd serves TLS, write the endpoint as https://host:port"));
    default: throw IoError(fmt::format("{}: {}", where, why));
  }
}

void Endpoint::throw_reply(std::string_view path, const gw::ErrorReply& e) const {
  if (gw::auth_refused(e) || gw::token_invalid(e))
    throw AuthError(fmt::format("etcd {} ({}) refused {}: {}; check the etcd user, password and the user's role",
                                endpoint_, path, opts_.user.empty() ? std::string("us (no user given)") : "user '" + opts_.user + "'",
                                e.message));
  throw IoError(fmt::format("etcd {} ({}): {} (gRPC code {})", endpoint_, path, e.message, e.code));
}

}  // namespace dtrain::etcd
