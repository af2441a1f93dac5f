#include "handshake.hpp"

#include <fmt/format.h>

#include "dtrain/common/errors.hpp"
#include "dtrain/rendezvous/store/auth.hpp"

namespace dtrain::rdzv {

using wire::Frame;
using wire::Op;
using Step = Handshake::Step;

namespace {

Step refuse(std::string reason) { return Step{Step::Kind::refuse, {}, std::move(reason)}; }

}  // namespace

Step Handshake::step(const Frame& f, const ServerOptions& opts) {
  switch (stage_) {
    case Stage::hello: return on_hello(f, opts);
    case Stage::auth: return on_auth(f, opts);
    case Stage::ready: break;
  }
  throw wire::ProtocolError("handshake already finished");
}

Step Handshake::on_hello(const Frame& f, const ServerOptions& opts) {
  if (f.op != Op::hello) throw wire::ProtocolError(fmt::format("sent {} before hello", wire::op_name(f.op)));
  if (f.str_at(0) != "dtrain-rdzv") throw wire::ProtocolError("hello names an unknown protocol");
  name_ = std::string(f.str_at(1).substr(0, 128));
  run_id_ = std::string(f.str_at(2));
  generation_ = f.i64_at(3);
  auto cn = f.bytes_at(4);
  bool has_token = f.i64_at(5) != 0;
  if (run_id_.size() > wire::kMaxKey) throw wire::ProtocolError("run id over the key limit");
  if (cn.size() != auth::kNonceBytes) throw wire::ProtocolError("hello nonce has the wrong size");
  if (generation_ < 0) return refuse(fmt::format("generation {} is negative", generation_));
  if (!opts.run_id.empty() && !run_id_.empty() && run_id_ != opts.run_id)
    return refuse(fmt::format("wrong run id '{}': this rendezvous serves run '{}'", run_id_, opts.run_id));
  if (!opts.token.empty() && !has_token)
    return refuse("this rendezvous requires the shared token and the client has none (give the same token "
                  "file: rendezvous.token_file or --token-file)");
  cnonce_.assign(cn.begin(), cn.end());
  snonce_ = auth::random_nonce();
  stage_ = Stage::auth;
  // Nothing here depends on the token: the server proves itself only in the WELCOME.
  return Step{Step::Kind::reply, Frame(Op::challenge).bytes(snonce_).i64(opts.token.empty() ? 0 : 1), {}};
}

Step Handshake::on_auth(const Frame& f, const ServerOptions& opts) {
  if (f.op != Op::auth) throw wire::ProtocolError(fmt::format("sent {} instead of auth", wire::op_name(f.op)));
  if (!opts.token.empty()) {
    Bytes expect = auth::proof(opts.token, "client", snonce_, cnonce_, run_id_, generation_);
    if (!auth::constant_time_equal(expect, f.bytes_at(0)))
      return refuse("token mismatch: the client's proof does not match this rendezvous's token (use the same "
                    "token file on every node)");
  }
  stage_ = Stage::ready;
  return Step{Step::Kind::ready, {}, {}};
}

Frame Handshake::welcome(std::string_view peer_ip, const ServerOptions& opts) const {
  DTRAIN_CHECK(ready(), "welcome before the client proved the token");
  Bytes proof;
  if (!opts.token.empty()) proof = auth::proof(opts.token, "server", cnonce_, snonce_, run_id_, generation_);
  return Frame(Op::welcome).str(peer_ip).bytes(proof);
}

}  // namespace dtrain::rdzv
