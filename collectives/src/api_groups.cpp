// The C ABI of groups: dtrain_comm_split (the CPU communicator's split, plus ncclCommSplit when every
// rank of the parent already has an NCCL communicator; otherwise the new communicator creates its
// own on its first device call, through the group's own store keys) and
// dtrain_comm_init_group_from_env (a split of one world communicator per process, created on the
// first call and shared, reference-counted, by every group made from the environment).
#include <mutex>

#include <fmt/format.h>

#include "handle.hpp"
#include "group_layout.hpp"
#include "scoped_store.hpp"

namespace dtrain::coll {
namespace {

// The split's result as a C handle; nccl (when split there) goes with it.
dtrain_comm_t wrap(std::unique_ptr<Communicator> cpu, std::unique_ptr<nccl::Comm> nccl) {
  auto c = std::make_unique<dtrain_comm>();
  c->nccl_store = std::make_unique<ScopedStore>(*cpu->store(), cpu->key_prefix());
  c->cpu = std::move(cpu);
  c->nccl = std::move(nccl);
  return c.release();
}

dtrain_status_t split(dtrain_comm_t comm, int color, int key, dtrain_comm_t* out) {
  if (out == nullptr) throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, "comm_split: out (the output pointer) is NULL");
  *out = nullptr;
  Communicator& c = cpu_of(comm);
  const bool have_nccl = comm->nccl != nullptr && !comm->nccl_failed;
  Communicator::Split s = c.split(color, key, have_nccl);
  std::unique_ptr<nccl::Comm> device;
  if (s.all_flag) {  // every rank: ncclCommSplit is collective over the parent's NCCL communicator
    nccl::Options o;
    o.rank = s.comm ? s.comm->rank() : -1;
    o.size = s.comm ? s.comm->size() : 0;
    o.local_rank = c.local_rank();
    o.timeout = c.timeout();
    dispatch(comm, Buffers{nullptr, nullptr, true}, [](Communicator&) {},
             [&](nccl::Comm& n, Communicator&) { device = n.split(color, key, o); });
  }
  if (s.comm) *out = wrap(std::move(s.comm), std::move(device));
  return DTRAIN_SUCCESS;
}

// The world communicator the groups from the environment are split from: one per process, alive
// while any of them is.
std::shared_ptr<dtrain_comm> shared_world() {
  static std::mutex mu;
  static std::weak_ptr<dtrain_comm> world;
  std::lock_guard lock(mu);
  if (auto w = world.lock()) return w;
  dtrain_comm_t raw = nullptr;
  init_world_from_env(&raw);
  std::shared_ptr<dtrain_comm> w(raw, [](dtrain_comm_t c) { dtrain_comm_destroy(c); });
  world = w;
  return w;
}

dtrain_status_t group_from_env(dtrain_group_kind_t kind, dtrain_comm_t* out) {
  if (out == nullptr) throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, "comm (the output pointer) is NULL");
  *out = nullptr;
  const GroupColor g = group_color(static_cast<int>(kind), [](const char* name) { return env_or(name); });
  std::shared_ptr<dtrain_comm> world = shared_world();
  Communicator::Split s = world->cpu->split(g.color, g.key, false);
  DTRAIN_CHECK(s.comm && s.comm->size() == g.size && s.comm->rank() == g.key,
               "group of kind {}: rank {} of {} where the layout says {} of {}", static_cast<int>(kind),
               s.comm ? s.comm->rank() : -1, s.comm ? s.comm->size() : 0, g.key, g.size);
  *out = wrap(std::move(s.comm), nullptr);
  (*out)->world = std::move(world);
  return DTRAIN_SUCCESS;
}

}  // namespace
}  // namespace dtrain::coll

using namespace dtrain::coll;

extern "C" {

dtrain_status_t dtrain_comm_split(dtrain_comm_t comm, int color, int key, dtrain_comm_t* out) {
  return guard([&] { return split(comm, color, key, out); });
}

dtrain_status_t dtrain_comm_init_group_from_env(dtrain_group_kind_t kind, dtrain_comm_t* out) {
  return guard([&] { return group_from_env(kind, out); });
}

}  // extern "C"
