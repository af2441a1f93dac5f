#pragma once
// One etcd endpoint as libcurl reaches it, shared by a Client and the Watches opened through it:
// the parsed endpoint, the options every transfer carries (TLS files, timeouts, TCP keepalive, no
// proxy, HTTP/1.1), the authentication token, the unary POST of a JSON request, and the mapping of
// a failed transfer or an error reply to dtrain's exceptions (client.hpp says which is which).
#include <curl/curl.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "client.hpp"
#include "gateway.hpp"

namespace dtrain::etcd {

// A curl easy handle with its error buffer and the bytes its transfer received.
struct Handle {
  Handle();  // throws IoError when libcurl cannot make one
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  CURL* curl = nullptr;
  char errbuf[CURL_ERROR_SIZE] = {};
  std::string received;
};

struct SlistFree {
  void operator()(curl_slist* l) const noexcept { curl_slist_free_all(l); }
};
using Headers = std::unique_ptr<curl_slist, SlistFree>;

class Endpoint {
 public:
  // Throws ConfigError for an endpoint that is not [http[s]://]host:port, TLS files that cannot be
  // read, a certificate without its key, or TLS files with an http endpoint.
  explicit Endpoint(Options opts);

  const Options& options() const { return opts_; }
  const std::string& endpoint() const { return endpoint_; }  // "host:port"
  const std::string& url() const { return url_; }            // "http://host:port"

  // A handle with the options every transfer shares. `stream`: no whole-transfer time limit (a
  // watch); otherwise options().request_timeout bounds each request.
  std::unique_ptr<Handle> new_handle(bool stream) const;
  // Points h at POST url()+path with `body` and the token; the headers must outlive the transfer.
  Headers prepare(Handle& h, std::string_view path, const std::string& body, const std::string& token) const;

  // The token to send ("" without a user), fetched on first use. `stale`: a token etcd just called
  // invalid; a new one is fetched unless another thread already did.
  std::string token(Handle& h, const std::string& stale = {});

  // POSTs body to path and returns the parsed reply; fetches a new token and retries once when etcd
  // says the token is invalid. An error reply with gRPC code `tolerated` returns null instead.
  gw::json call(Handle& h, std::string_view path, const gw::json& body, int tolerated = -1);
  // GET path (e.g. "/version"), no token; the body of a 200 answer.
  std::string get(Handle& h, std::string_view path);

  // The exception for a transfer that failed (curl's code) or for etcd's error reply.
  [[noreturn]] void throw_transport(const Handle& h, CURLcode rc, std::string_view path) const;
  [[noreturn]] void throw_reply(std::string_view path, const gw::ErrorReply& e) const;

 private:
  long perform(Handle& h, std::string_view path, const std::string& body, const std::string& token);
  std::string authenticate(Handle& h);

  Options opts_;
  std::string endpoint_, url_;
  bool https_ = false;
  std::mutex token_mu_;
  std::string token_;
};

}  // namespace dtrain::etcd
