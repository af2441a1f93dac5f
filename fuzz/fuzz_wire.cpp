// libFuzzer target: the rendezvous frame decoder, fed the input in chunks (as read() would return
// it) with the limit before and after a handshake, and the packed records inside each argument.
// A ProtocolError is the expected refusal. Every frame it yields must encode back to the very bytes
// it was decoded from, and never more than one maximal frame may be buffered.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "dtrain/rendezvous/store/wire.hpp"

using namespace dtrain::rdzv;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  std::size_t chunk = 1 + data[0] % 64;  // read() sizes
  std::size_t limit = data[1] % 2 ? wire::kMaxHandshakeFrame : wire::kMaxFrame;
  data += 2;
  size -= 2;
  wire::Decoder dec(limit);
  std::size_t consumed = 0, fed = 0;
  try {
    while (fed < size) {
      std::size_t n = std::min(chunk, size - fed);
      dec.feed(data + fed, n);
      fed += n;
      if (dec.buffered() > limit + wire::kHeaderBytes + chunk) std::abort();  // never more than one frame
      while (auto f = dec.next()) {
        Bytes again = wire::encode(*f);
        if (again.size() > size - consumed || std::memcmp(again.data(), data + consumed, again.size()) != 0)
          std::abort();  // decode and encode disagree
        consumed += again.size();
        for (const auto& a : f->args) {
          try {
            auto fields = wire::unpack(a);
            if (wire::pack(fields) != a) std::abort();
          } catch (const wire::ProtocolError&) {
          }
        }
      }
    }
  } catch (const wire::ProtocolError&) {
  }
  return 0;
}
