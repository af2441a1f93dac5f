#include "scope.hpp"

#include <fmt/format.h>

#include "handlers.hpp"
#include "dtrain/rendezvous/store/refused.hpp"
#include "server_state.hpp"

namespace dtrain::rdzv::srv {

Scope::Scope(std::string run, std::int64_t gen, KvLimits limits, Budget* run_budget)
    : run_id(std::move(run)),
      generation(gen),
      budget(run_budget),
      kv(limits, fmt::format("run '{}' generation {}", run_id, gen), run_budget),
      events(gen) {}

Scope::~Scope() { budget->release(0, event_bytes); }

void Scope::charge_event(std::size_t bytes) {
  if (events.events().size() >= kMaxEventsPerScope)
    throw Refused(wire::ErrorCode::limit, fmt::format("run '{}' generation {} holds {} events, the limit", run_id,
                                                      generation, kMaxEventsPerScope));
  budget->charge(0, std::ptrdiff_t(bytes));
  event_bytes += bytes;
}

bool Scope::disposable() const {
  if (conns != 0) return false;
  if (join.closed()) return true;
  return join.joined() == 0 && kv.size() == 0 && events.events().empty();
}

Scopes::Scopes(KvLimits per_run, KvLimits total) : per_run_(per_run), total_(total, "this rendezvous (all runs)") {}

Scope& Scopes::open(const std::string& run, std::int64_t gen) {
  auto& p = map_[{run, gen}];
  if (!p) {
    Run& r = runs_[run];
    if (!r.budget) r.budget = std::make_unique<Budget>(per_run_, fmt::format("run '{}' (all generations)", run), &total_);
    p = std::make_unique<Scope>(run, gen, per_run_, r.budget.get());
    ++r.scopes;
  }
  return *p;
}

void Scopes::collect(const std::string& run_ref) {
  std::string run = run_ref;  // a copy: the scope that owns the caller's string may be freed
  std::int64_t newest = -1;
  for (auto& [k, s] : map_)
    if (k.first == run) newest = std::max(newest, k.second);
  for (auto it = map_.begin(); it != map_.end();) {
    const Scope& s = *it->second;
    if (it->first.first == run && s.conns == 0 && (it->first.second < newest || s.disposable())) {
      it = map_.erase(it);
      auto r = runs_.find(run);
      if (r != runs_.end() && --r->second.scopes == 0) runs_.erase(r);
    } else {
      ++it;
    }
  }
}

Scope* Scopes::latest_with_nodes(const std::string& run) {
  Scope* best = nullptr;
  for (auto& [k, s] : map_)
    if (k.first == run && s->join.joined() > 0) best = s.get();
  return best;
}

std::vector<std::string> Scopes::runs_with_nodes() const {
  std::vector<std::string> runs;
  std::string last;
  for (auto& [k, s] : map_)
    if (k.first != last && s->join.joined() > 0) runs.push_back(last = k.first);
  return runs;
}

void attach(Conn& c) {
  ServerState& server = *c.server;
  c.scope = &server.scopes.open(c.hs.run_id(), c.hs.generation());
  ++c.scope->conns;
  server.scopes.collect(c.hs.run_id());  // a new generation frees the unused older ones
}

void detach(Conn& c) {
  unpark(c, false);
  Scope* s = c.scope;
  if (s == nullptr) return;
  if (Node* n = c.node) {
    c.node = nullptr;
    if (!s->join.closed()) {
      s->join.remove(*n);
    } else if (!c.server->stopping && !n->left && !n->lost && !s->exit.finished() && !s->events.fatal()) {
      declare_lost(*s, *n, "its connection closed without leaving (agent killed or host down)");
    }
  }
  c.scope = nullptr;
  if (--s->conns == 0) c.server->scopes.collect(s->run_id);
}

}  // namespace dtrain::rdzv::srv
