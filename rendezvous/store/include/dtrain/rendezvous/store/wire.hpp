#pragma once
// The rendezvous wire format (docs/wire-protocol.md is the full description).
//
// A frame on the TCP stream:
//   u32  length      big-endian, bytes that follow (1 + 1 + 4 + args), at most kMaxFrame
//   u8   version     kVersion
//   u8   op          Op
//   u32  argc        big-endian, at most kMaxArgs
//   argc x { u32 len (big-endian); len bytes }
// Integers travel as arguments of 8 bytes, big-endian two's complement. Nested records (a node of
// the rank table, an event) are packed with pack()/unpack(), the same u32-length list encoding.
//
// Decoder is incremental: feed it whatever read() returned; it yields whole frames and rejects a bad
// length before buffering the body, so a peer cannot make it allocate more than kMaxFrame.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dtrain/rendezvous/store/store.hpp"

namespace dtrain::rdzv::wire {

inline constexpr std::uint8_t kVersion = 2;  // 2: the client proves first (welcome carries the server's proof)
inline constexpr std::size_t kHeaderBytes = 4;
inline constexpr std::size_t kMaxKey = 1024;              // bytes of one key
inline constexpr std::size_t kMaxValue = 1u << 20;        // 1 MiB, one value
inline constexpr std::size_t kMaxFrame = (1u << 21);      // 2 MiB, one frame body
inline constexpr std::size_t kMaxArgs = 65536;
// Before the handshake finished a frame may hold at most this (a hello with a 1 KiB run id fits).
inline constexpr std::size_t kMaxHandshakeFrame = 4096;

enum class Op : std::uint8_t {
  // handshake
  hello = 1,      // C->S  [proto, client_name, run_id, generation, client_nonce, has_token]
  challenge = 2,  // S->C  [server_nonce, token_required]
  auth = 3,       // C->S  [client_proof]
  welcome = 4,    // S->C  [peer_address_seen_by_server, server_proof]  (only after the client's proof checked)
  // store
  set = 10,          // [key, value]                       -> ok
  get = 11,          // [key, timeout_ms]                  -> value [value] | error timeout
  add = 12,          // [key, delta]                       -> value [i64]
  compare_set = 13,  // [key, expected, desired]           -> value [value after]
  check = 14,        // [key...]                           -> value [0|1]
  erase = 15,        // [key]                              -> value [0|1]
  barrier = 16,      // [name, count, timeout_ms]          -> ok | error timeout
  // node coordination (node_session.hpp)
  join = 30,         // [host, node_rank, slots, instances, spec_hash, master_port, advertise_addr,
                     //  heartbeat_timeout_ms, timeout_ms]   -> value [packed JoinReply] (progress frames first)
  heartbeat = 31,    // [state, running, exited, restarts] -> ok | error lost | error not_joined
  report = 32,       // [node, rank, exit_code, signal, message, (kind)] -> ok; kind "stopped": a node stopping on its own
  watch = 33,        // [after_seq, timeout_ms]            -> value [packed Event] | error timeout
  leave = 34,        // [timeout_ms]                       -> ok   (exit barrier; clean exit: not "lost" on close)
  status = 35,       // [run_id]                           -> value [packed RunStatus]
  list_runs = 36,    // []                                 -> value [run_id...]
  table = 37,        // []                                 -> value [packed node entries...]
  // replies
  ok = 100,
  value = 101,
  error = 102,     // [code, message]
  progress = 103,  // [joined, instances, missing text]  (join only; then the final reply follows)
};

enum class ErrorCode : std::int64_t {
  bad_request = 1,
  timeout = 2,
  limit = 3,
  auth = 4,
  duplicate_rank = 5,
  too_many_nodes = 6,
  spec_mismatch = 7,
  lost = 8,
  not_joined = 9,
  shutting_down = 10,
  moved = 11,  // JOIN of an elastic job: join generation <third argument> instead
};

const char* op_name(Op op);

// A malformed frame: the reason says what was wrong (oversize length, bad version, ...).
class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Frame {
  Op op{};
  std::vector<Bytes> args;

  Frame() = default;
  explicit Frame(Op o) : op(o) {}
  Frame& str(std::string_view s);
  Frame& bytes(ByteView b);
  Frame& i64(std::int64_t v);

  // Accessors; throw ProtocolError when the argument is missing or has the wrong size.
  std::string_view str_at(std::size_t i) const;
  ByteView bytes_at(std::size_t i) const;
  std::int64_t i64_at(std::size_t i) const;
};

// Appends the encoded frame (header included) to out. Throws ProtocolError when over the limits.
void encode(const Frame& f, Bytes& out);
Bytes encode(const Frame& f);

// Nested records: a u32 count, then each element as u32 length + bytes.
Bytes pack(const std::vector<Bytes>& fields);
std::vector<Bytes> unpack(ByteView packed);  // throws ProtocolError
Bytes i64_bytes(std::int64_t v);
std::int64_t bytes_i64(ByteView b);  // throws ProtocolError unless 8 bytes

class Decoder {
 public:
  explicit Decoder(std::size_t max_frame = kMaxFrame) : max_frame_(max_frame) {}
  // Appends raw bytes from the stream. Throws ProtocolError at once when a header announces a
  // frame over the limit (the body is never buffered).
  void feed(const std::uint8_t* data, std::size_t n);
  // The next whole frame, if buffered. Throws ProtocolError for a malformed frame.
  std::optional<Frame> next();
  // Bytes of an unfinished frame are buffered (a peer stalled mid-frame keeps this true).
  bool partial() const { return buf_.size() > pos_; }
  // Changes the frame limit (the server raises it once the handshake is done).
  void set_max_frame(std::size_t max_frame) { max_frame_ = max_frame; }
  std::size_t buffered() const { return buf_.size() - pos_; }

 private:
  void check_header();
  std::size_t max_frame_;
  Bytes buf_;
  std::size_t pos_ = 0;
};

}  // namespace dtrain::rdzv::wire
