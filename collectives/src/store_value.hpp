#pragma once
// A value under one of the library's store keys that is not what a rank writes there (another job
// or program sharing the store and run id, or a peer gone wrong): the message that names the key,
// what it holds and what was expected. Callers throw it as DTRAIN_ERR_PEER: the value came from
// outside this rank, and nothing of this rank is at fault.
#include <string>
#include <string_view>

#include "dtrain/rendezvous/store/store.hpp"

namespace dtrain::coll {

// "store key 'coll/1/tcp/1' holds \"junk\" (4 bytes), not rank 1's address (\"IP PORT HOST\"); does
// another job or program write this store under the same run id?"
std::string junk_value_text(std::string_view key, rdzv::ByteView value, std::string_view expected);

}  // namespace dtrain::coll
