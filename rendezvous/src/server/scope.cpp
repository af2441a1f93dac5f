#include "scope.hpp"

#include <fmt/format.h>

#include "handlers.hpp"
#include "hub.hpp"

namespace dtrain::rdzv::srv {

Scope::Scope(std::string run, std::int64_t gen, KvLimits limits)
    : run_id(std::move(run)),
      generation(gen),
      kv(limits, fmt::format("run '{}' generation {}", run_id, gen)),
      events(gen) {}

Scope& Scopes::open(const std::string& run, std::int64_t gen, KvLimits limits) {
  auto& p = map_[{run, gen}];
  if (!p) p = std::make_unique<Scope>(run, gen, limits);
  return *p;
}

void Scopes::collect(const std::string& run_ref) {
  std::string run = run_ref;  // a copy: the scope that owns the caller's string may be freed
  std::int64_t newest = -1;
  for (auto& [k, s] : map_)
    if (k.first == run) newest = std::max(newest, k.second);
  for (auto it = map_.begin(); it != map_.end();) {
    if (it->first.first == run && it->first.second < newest && it->second->conns == 0)
      it = map_.erase(it);
    else
      ++it;
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
  Hub& hub = *c.hub;
  c.scope = &hub.scopes.open(c.hs.run_id(), c.hs.generation(), KvLimits{hub.opts.max_keys_per_run, hub.opts.max_bytes_per_run});
  ++c.scope->conns;
  hub.scopes.collect(c.hs.run_id());  // a new generation frees the unused older ones
}

void detach(Conn& c) {
  unpark(c, false);
  Scope* s = c.scope;
  if (s == nullptr) return;
  if (Node* n = c.node) {
    c.node = nullptr;
    if (!s->join.closed()) {
      s->join.remove(*n);
    } else if (!c.hub->stopping && !n->left && !n->lost && !s->exit.finished() && !s->events.fatal()) {
      declare_lost(*s, *n, "its connection closed without leaving (agent killed or host down)");
    }
  }
  c.scope = nullptr;
  if (--s->conns == 0) c.hub->scopes.collect(s->run_id);
}

}  // namespace dtrain::rdzv::srv
