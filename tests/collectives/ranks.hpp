#pragma once
// Ranks as threads: the one runner every threaded collectives test uses (harness.hpp puts
// Communicators on it, c_ranks.hpp communicators of the C ABI, the engine and unit tests their own
// objects). Failures are collected per rank and checked on the main thread (doctest asserts stay
// there). And a wait on a state the test can read, with a deadline, for the tests that must let
// something happen first.
#include <doctest/doctest.h>

#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace dtrain::coll::test {

// Runs body(rank) on n threads, one per rank, and returns each rank's failure text: what body
// returned (a std::string body; "" when fine) or the text of the exception it threw.
template <class Body>
std::vector<std::string> on_threads(int n, Body&& body) {
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto& e = errors[static_cast<std::size_t>(r)];
      try {
        if constexpr (std::is_convertible_v<std::invoke_result_t<Body&, int>, std::string>)
          e = body(r);
        else
          body(r);
      } catch (const std::exception& ex) {
        e = ex.what();
        if (e.empty()) e = "an exception without a message";
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

// Checks that no rank failed.
inline void no_errors(const std::vector<std::string>& errors) {
  for (std::size_t r = 0; r < errors.size(); ++r) {
    CAPTURE(r);
    CHECK(errors[r] == "");
  }
}

// Polls ready() every `poll` until it holds or `timeout` passes; returns whether it held.
template <class Ready>
bool wait_until(Ready&& ready, std::chrono::milliseconds timeout,
                std::chrono::milliseconds poll = std::chrono::milliseconds(2)) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(poll);
  }
  return true;
}

}  // namespace dtrain::coll::test
