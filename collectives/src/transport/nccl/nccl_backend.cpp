// The Comm seam over nccl_core: exceptions become the C ABI status plus dtrain_last_error() text.
#include "nccl_backend.hpp"

#include <utility>

#include "../../status.hpp"
#include "nccl_core.hpp"

namespace dtrain::coll::nccl {
namespace {

template <class F>
dtrain_status_t guarded(F&& body) noexcept {
  try {
    std::forward<F>(body)();
    return DTRAIN_SUCCESS;
  } catch (const CollError& e) {  // nccl::Error included
    return fail(e.status(), e.what());
  } catch (const ConfigError& e) {
    return fail(DTRAIN_ERR_CONFIG, e.what());
  } catch (const TimeoutError& e) {
    return fail(DTRAIN_ERR_TIMEOUT, e.what());
  } catch (const std::bad_alloc&) {
    return fail(DTRAIN_ERR_SYSTEM, "NCCL backend: out of host memory");
  } catch (const std::exception& e) {
    return fail(DTRAIN_ERR_INTERNAL, e.what());
  }
}

class NcclComm final : public Comm {
 public:
  explicit NcclComm(const Options& options) : comm_(options) {}

  dtrain_status_t allreduce(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op,
                            void* stream) override {
    return guarded([&] { comm_.allreduce(send, recv, count, dtype, op, stream); });
  }
  dtrain_status_t broadcast(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, int root,
                            void* stream) override {
    return guarded([&] { comm_.broadcast(send, recv, count, dtype, root, stream); });
  }
  dtrain_status_t allgather(const void* send, void* recv, std::size_t sendcount, dtrain_dtype_t dtype,
                            void* stream) override {
    return guarded([&] { comm_.allgather(send, recv, sendcount, dtype, stream); });
  }
  dtrain_status_t reduce_scatter(const void* send, void* recv, std::size_t recvcount, dtrain_dtype_t dtype,
                                 dtrain_op_t op, void* stream) override {
    return guarded([&] { comm_.reduce_scatter(send, recv, recvcount, dtype, op, stream); });
  }
  dtrain_status_t barrier() override {
    return guarded([&] { comm_.barrier(); });
  }

 private:
  Communicator comm_;
};

}  // namespace

std::unique_ptr<Comm> create(const Options& options) { return std::make_unique<NcclComm>(options); }

}  // namespace dtrain::coll::nccl
