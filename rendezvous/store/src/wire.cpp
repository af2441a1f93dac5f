#include "dtrain/rendezvous/store/wire.hpp"

#include <fmt/format.h>

#include <cstring>

namespace dtrain::rdzv::wire {
namespace {

void put_u32(Bytes& out, std::uint32_t v) {
  out.push_back(std::uint8_t(v >> 24));
  out.push_back(std::uint8_t(v >> 16));
  out.push_back(std::uint8_t(v >> 8));
  out.push_back(std::uint8_t(v));
}

std::uint32_t get_u32(const std::uint8_t* p) {
  return std::uint32_t(p[0]) << 24 | std::uint32_t(p[1]) << 16 | std::uint32_t(p[2]) << 8 | std::uint32_t(p[3]);
}

// Parses `count` u32-length fields from [p, end); every byte must be used.
std::vector<Bytes> parse_fields(const std::uint8_t* p, const std::uint8_t* end, std::size_t count,
                                const char* what) {
  // Each field costs at least 4 bytes: a count beyond that is a lie, refuse before reserving.
  if (count > std::size_t(end - p) / 4)
    throw ProtocolError(fmt::format("{} announces {} fields but holds only {} bytes", what, count, end - p));
  std::vector<Bytes> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (end - p < 4) throw ProtocolError(fmt::format("{} truncated in the length of field {}", what, i));
    std::uint32_t len = get_u32(p);
    p += 4;
    if (std::size_t(end - p) < len)
      throw ProtocolError(fmt::format("{} field {} claims {} bytes, only {} left", what, i, len, end - p));
    out.emplace_back(p, p + len);
    p += len;
  }
  if (p != end) throw ProtocolError(fmt::format("{} has {} trailing bytes", what, end - p));
  return out;
}

bool known_op(std::uint8_t v) {
  return (v >= 1 && v <= 4) || (v >= 10 && v <= 16) || (v >= 30 && v <= 37) || (v >= 100 && v <= 103);
}

}  // namespace

const char* op_name(Op op) {
  switch (op) {
    case Op::hello: return "hello";
    case Op::challenge: return "challenge";
    case Op::auth: return "auth";
    case Op::welcome: return "welcome";
    case Op::set: return "set";
    case Op::get: return "get";
    case Op::add: return "add";
    case Op::compare_set: return "compare_set";
    case Op::check: return "check";
    case Op::erase: return "delete";
    case Op::barrier: return "barrier";
    case Op::join: return "join";
    case Op::heartbeat: return "heartbeat";
    case Op::report: return "report";
    case Op::watch: return "watch";
    case Op::leave: return "leave";
    case Op::status: return "status";
    case Op::list_runs: return "list_runs";
    case Op::table: return "table";
    case Op::ok: return "ok";
    case Op::value: return "value";
    case Op::error: return "error";
    case Op::progress: return "progress";
  }
  return "?";
}

Frame& Frame::str(std::string_view s) {
  args.emplace_back(s.begin(), s.end());
  return *this;
}
Frame& Frame::bytes(ByteView b) {
  args.emplace_back(b.begin(), b.end());
  return *this;
}
Frame& Frame::i64(std::int64_t v) {
  args.push_back(i64_bytes(v));
  return *this;
}

std::string_view Frame::str_at(std::size_t i) const {
  if (i >= args.size())
    throw ProtocolError(fmt::format("{} frame lacks argument {} (has {})", op_name(op), i, args.size()));
  return {reinterpret_cast<const char*>(args[i].data()), args[i].size()};
}
ByteView Frame::bytes_at(std::size_t i) const {
  if (i >= args.size())
    throw ProtocolError(fmt::format("{} frame lacks argument {} (has {})", op_name(op), i, args.size()));
  return args[i];
}
std::int64_t Frame::i64_at(std::size_t i) const { return bytes_i64(bytes_at(i)); }

Bytes i64_bytes(std::int64_t v) {
  Bytes b(8);
  auto u = std::uint64_t(v);
  for (int i = 7; i >= 0; --i) {
    b[std::size_t(i)] = std::uint8_t(u);
    u >>= 8;
  }
  return b;
}

std::int64_t bytes_i64(ByteView b) {
  if (b.size() != 8) throw ProtocolError(fmt::format("integer field has {} bytes, expected 8", b.size()));
  std::uint64_t u = 0;
  for (auto c : b) u = u << 8 | c;
  return std::int64_t(u);
}

void encode(const Frame& f, Bytes& out) {
  if (f.args.size() > kMaxArgs)
    throw ProtocolError(fmt::format("{} frame has {} arguments, limit {}", op_name(f.op), f.args.size(), kMaxArgs));
  std::size_t body = 1 + 1 + 4;
  for (const auto& a : f.args) body += 4 + a.size();
  if (body > kMaxFrame)
    throw ProtocolError(fmt::format("{} frame of {} bytes exceeds the {}-byte frame limit", op_name(f.op), body, kMaxFrame));
  out.reserve(out.size() + 4 + body);
  put_u32(out, std::uint32_t(body));
  out.push_back(kVersion);
  out.push_back(std::uint8_t(f.op));
  put_u32(out, std::uint32_t(f.args.size()));
  for (const auto& a : f.args) {
    put_u32(out, std::uint32_t(a.size()));
    out.insert(out.end(), a.begin(), a.end());
  }
}

Bytes encode(const Frame& f) {
  Bytes out;
  encode(f, out);
  return out;
}

Bytes pack(const std::vector<Bytes>& fields) {
  Bytes out;
  std::size_t n = 4;
  for (const auto& f : fields) n += 4 + f.size();
  out.reserve(n);
  put_u32(out, std::uint32_t(fields.size()));
  for (const auto& f : fields) {
    put_u32(out, std::uint32_t(f.size()));
    out.insert(out.end(), f.begin(), f.end());
  }
  return out;
}

std::vector<Bytes> unpack(ByteView packed) {
  if (packed.size() < 4) throw ProtocolError("packed record shorter than its count");
  return parse_fields(packed.data() + 4, packed.data() + packed.size(), get_u32(packed.data()), "packed record");
}

void Decoder::feed(const std::uint8_t* data, std::size_t n) {
  // Compact once the consumed prefix dominates, so a long-lived connection does not grow.
  if (pos_ > 0 && pos_ >= buf_.size() / 2) {
    buf_.erase(buf_.begin(), buf_.begin() + std::ptrdiff_t(pos_));
    pos_ = 0;
  }
  buf_.insert(buf_.end(), data, data + n);
  check_header();
}

void Decoder::check_header() {
  if (buf_.size() - pos_ < kHeaderBytes) return;
  std::uint32_t len = get_u32(buf_.data() + pos_);
  if (len > max_frame_)
    throw ProtocolError(fmt::format("frame length {} exceeds the {}-byte limit", len, max_frame_));
  if (len < 6) throw ProtocolError(fmt::format("frame length {} is shorter than the 6-byte minimum", len));
  if (buf_.size() - pos_ >= kHeaderBytes + 1 && buf_[pos_ + kHeaderBytes] != kVersion)
    throw ProtocolError(fmt::format("frame version {} (this build speaks version {})",
                                    int(buf_[pos_ + kHeaderBytes]), int(kVersion)));
}

std::optional<Frame> Decoder::next() {
  check_header();
  if (buf_.size() - pos_ < kHeaderBytes) return std::nullopt;
  std::uint32_t len = get_u32(buf_.data() + pos_);
  if (buf_.size() - pos_ < kHeaderBytes + len) return std::nullopt;
  const std::uint8_t* p = buf_.data() + pos_ + kHeaderBytes;
  const std::uint8_t* end = p + len;
  std::uint8_t op = p[1];
  if (!known_op(op)) throw ProtocolError(fmt::format("unknown op {}", int(op)));
  std::uint32_t argc = get_u32(p + 2);
  if (argc > kMaxArgs) throw ProtocolError(fmt::format("frame has {} arguments, limit {}", argc, kMaxArgs));
  Frame f{Op(op)};
  f.args = parse_fields(p + 6, end, argc, "frame");
  pos_ += kHeaderBytes + len;
  if (pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  return f;
}

}  // namespace dtrain::rdzv::wire
