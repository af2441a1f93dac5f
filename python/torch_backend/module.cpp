// dtrain._torch_backend: makes ProcessGroupDtrain objects for dtrain.torch's creator function,
// which torch.distributed calls once per process group this rank belongs to.
#include <torch/csrc/utils/pybind.h>

#include "process_group.hpp"

namespace {

c10::intrusive_ptr<c10d::ProcessGroup> create(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                              double timeout_s, const std::string& name) {
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000.0));
  return c10::make_intrusive<dtrain_torch::ProcessGroupDtrain>(store, rank, size, timeout, name);
}

}  // namespace

PYBIND11_MODULE(_torch_backend, m) {
  m.doc() = "ProcessGroupDtrain, torch.distributed's backend \"dtrain\" (see dtrain-torch(7))";
  // The group's communicator is made here, collectively through the store: without the GIL.
  m.def("create", &create, pybind11::arg("store"), pybind11::arg("rank"), pybind11::arg("size"),
        pybind11::arg("timeout_s"), pybind11::arg("name"), pybind11::call_guard<pybind11::gil_scoped_release>(),
        "A process group of `size` ranks over the group's c10d store (collective)");
  m.def(
      "library_version", [] { return std::string(dtrain_version()); },
      "The version of the libdtrain_collectives the backend runs on");
}
