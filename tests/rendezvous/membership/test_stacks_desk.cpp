// `dtrain status --stacks --rdzv`'s exchange (run_status.hpp's query_stacks, stacks_desk.hpp) over
// real loopback sockets: a node whose session has a stacks source answers each request, a node
// without one is named as not answering once the wait is over; answers read are removed; requests
// made before the desk started are answered when it does; an answer longer than a store value is
// cut at a line's end, saying so. Nodes are threads, each with its own NodeSession.
#include <doctest/doctest.h>

#include <atomic>

#include "dtrain/rendezvous/membership/node_session.hpp"
#include "dtrain/rendezvous/membership/run_status.hpp"
#include "dtrain/rendezvous/store/wire.hpp"
#include "helpers.hpp"
#include "membership_test.hpp"

using namespace rt;
using namespace dtrain::rdzv;

namespace {

NodeSessionOptions node_opts(const TestServer& srv, int rank) {
  NodeSessionOptions o;
  o.store = srv.client("job", 0);
  o.host = "h" + std::to_string(rank);
  o.node_rank = rank;
  o.instances = 2;
  o.spec_hash = "hash-1";
  o.join_timeout = 20s;
  return o;
}

struct TwoNodes {
  TestServer srv;
  std::vector<std::unique_ptr<NodeSession>> s;
  membership_test::Events events;
  TwoNodes() {
    for (int r = 0; r < 2; ++r) s.push_back(std::make_unique<NodeSession>(node_opts(srv, r)));
    membership_test::join_all(s);
  }
  void monitor() {
    for (auto& n : s) n->start_monitoring(events.fn());
  }
  RunStatus status() const { return query_status(srv.client("job"), "job"); }
};

}  // namespace

TEST_SUITE("rendezvous::stacks_desk") {
  TEST_CASE("each node with a source answers; a node without one is named as not answering after the wait") {
    TwoNodes j;
    std::atomic<int> asked{0};
    j.s[0]->set_stacks_source([&] {
      ++asked;
      return std::string("rank 0: time.sleep(120) at w.py:4 in wait_here\n\nrank 0 (pid 7):\n");
    });
    j.monitor();
    auto got = query_stacks(j.srv.client("job"), j.status(), {0, 1}, 1500ms);
    REQUIRE(got.size() == 2);
    REQUIRE(got[0].has_value());
    CHECK(*got[0] == "rank 0: time.sleep(120) at w.py:4 in wait_here\n\nrank 0 (pid 7):\n");
    CHECK_FALSE(got[1].has_value());
    // a second request is a new dump; the first answer was read and removed
    auto again = query_stacks(j.srv.client("job"), j.status(), {0}, 10s);
    REQUIRE(again.at(0).has_value());
    CHECK(asked == 2);
    auto store = j.srv.connect("job", 0);
    CHECK_FALSE(store->check(std::vector<std::string>{stacks_answer_key(1, 0)}));
    CHECK_FALSE(store->check(std::vector<std::string>{stacks_answer_key(2, 0)}));
    for (auto& n : j.s) n->stop_monitoring();
  }

  TEST_CASE("a request made before the desk started is answered when it starts; a long answer is cut") {
    TwoNodes j;
    std::string big;
    while (big.size() <= dtrain::rdzv::wire::kMaxValue) big += "  File \"/a/very/long/path/train.py\", line 42 in step\n";
    j.s[0]->set_stacks_source([&] { return big; });
    j.s[1]->set_stacks_source([] { return std::string("node 1\n"); });
    auto store = j.srv.connect("job", 0);
    std::int64_t early = store->add(kStacksAsked, 1);
    store->set(stacks_ask_key(early), as_bytes("1"));
    j.monitor();
    auto first = store->get(stacks_answer_key(early, 1), 10s);
    CHECK(to_string(first) == "node 1\n");
    std::string cut = to_string(store->get(stacks_answer_key(early, 0), 10s));
    CHECK(cut.size() <= dtrain::rdzv::wire::kMaxValue);
    CHECK(cut.find("(the rest cut: ") != std::string::npos);
    std::string kept = cut.substr(0, cut.find("(the rest cut"));
    CHECK(big.compare(0, kept.size(), kept) == 0);  // whole lines of the dump, then the mark
    CHECK(kept.back() == '\n');
    for (auto& n : j.s) n->stop_monitoring();
  }
}
