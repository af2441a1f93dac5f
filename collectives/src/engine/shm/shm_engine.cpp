// The shared-memory engine: each call routed to the collaborator that runs it (shm_engine.hpp).
#include "shm_engine.hpp"

#include "../../reduce.hpp"
#include "dtrain/common/system.hpp"

namespace dtrain::coll::shm {

Engine::Engine(const Options& o)
    : segment_(o.segment),
      peers_(segment_, o.segment.global_ranks),
      waiter_(o.spin_us, segment_.local_size() > sys::usable_cpus()),
      barrier_(segment_, peers_, waiter_),
      boxes_(segment_, peers_, waiter_),
      slots_(segment_, barrier_),
      rings_(segment_, peers_, waiter_) {}

Engine::~Engine() { peers_.leave(); }

template <class F>
void Engine::call(const OpDesc& d, F&& body) {
  peers_.begin(d);
  body();
  peers_.end();
}

void Engine::barrier(const OpDesc& d) {
  call(d, [&] { barrier_.sync(d); });
}

void Engine::allreduce(const OpDesc& d, const void* send_v, void* recv_v) {
  const std::size_t bytes = d.count * dtype_size(d.dtype);
  const auto* send = static_cast<const std::uint8_t*>(send_v);
  auto* recv = static_cast<std::uint8_t*>(recv_v);
  call(d, [&] {
    if (local_size() == 1 || bytes == 0) {
      barrier_.sync(d);
      if (bytes != 0) {
        const void* one[1] = {send};
        reduce_n(one, 1, recv, nullptr, d.count, d.dtype, d.op, 1);
      }
    } else if (bytes <= kBoxBytes) {
      boxes_.allreduce(d, send, recv);
    } else {
      slots_.allreduce(d, send, recv);
    }
  });
}

void Engine::broadcast(const OpDesc& d, const void* send, void* recv) {
  call(d, [&] { slots_.broadcast(d, static_cast<const std::uint8_t*>(send), static_cast<std::uint8_t*>(recv)); });
}

void Engine::allgather(const OpDesc& d, const void* send, void* recv) {
  call(d, [&] { slots_.allgather(d, static_cast<const std::uint8_t*>(send), static_cast<std::uint8_t*>(recv)); });
}

void Engine::reduce_scatter(const OpDesc& d, const void* send, void* recv) {
  call(d, [&] {
    slots_.reduce_scatter(d, static_cast<const std::uint8_t*>(send), static_cast<std::uint8_t*>(recv));
  });
}

}  // namespace dtrain::coll::shm
