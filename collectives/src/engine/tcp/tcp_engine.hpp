#pragma once
// TCP engine: every rank of the group over sockets (a Mesh), the algorithms of group.hpp on all of
// them. The user's buffers are staged for the in-place algorithms: allreduce runs on recv (or on a
// float32 copy for float16/bfloat16), reduce_scatter on a scratch copy of send, allgather and
// broadcast straight in recv.
#include "../engine.hpp"
#include "../staging.hpp"
#include "group.hpp"
#include "mesh.hpp"

namespace dtrain::coll::tcp {

class Engine final : public coll::Engine {
 public:
  explicit Engine(const Options& options);  // connects the mesh; throws CollError

  const char* name() const noexcept override { return "tcp"; }
  void barrier(const OpDesc& d) override;
  void allreduce(const OpDesc& d, const void* send, void* recv) override;
  void broadcast(const OpDesc& d, const void* send, void* recv) override;
  void allgather(const OpDesc& d, const void* send, void* recv) override;
  void reduce_scatter(const OpDesc& d, const void* send, void* recv) override;
  void sendrecv(const P2pMsg* out, const P2pMsg* in) override { mesh_.sendrecv(out, in); }
  Peek peek(int peer, std::uint64_t& fp0, std::uint64_t& fp1) override { return mesh_.peek(peer, fp0, fp1); }
  void abort(dtrain_status_t status, const std::string& msg) noexcept override;

  // For the hierarchical engine, which runs its leaders' group over this mesh.
  Mesh& mesh() { return mesh_; }
  Staging& staging() { return staging_; }

 private:
  Mesh mesh_;
  Group all_;
  Staging staging_;
};

}  // namespace dtrain::coll::tcp
