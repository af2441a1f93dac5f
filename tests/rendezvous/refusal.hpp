#pragma once
// Test helper for the pure server pieces: what a call refused with.
#include <optional>
#include <string>

#include "dtrain/rendezvous/store/refused.hpp"

namespace rt {

struct Refusal {
  dtrain::rdzv::wire::ErrorCode code;
  std::string what;
};

// The Refused a call threw, or nullopt when it returned.
template <class F>
std::optional<Refusal> refusal_of(F&& fn) {
  try {
    fn();
  } catch (const dtrain::rdzv::Refused& e) {
    return Refusal{e.code, e.what()};
  }
  return std::nullopt;
}

}  // namespace rt
