// dtrain._torch_backend: the class ProcessGroupDtrain (a subclass of torch's Backend on torch 2.x, of
// its ProcessGroup on 1.13) and the function dtrain.torch's creator calls, which torch.distributed
// calls once per process group this rank belongs to.
#include <torch/csrc/utils/pybind.h>

#include "process_group.hpp"

namespace {

using dtrain_torch::ProcessGroupDtrain;

c10::intrusive_ptr<ProcessGroupDtrain> create(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                              double timeout_s, const std::string& name, const std::string& torch_name,
                                              const std::vector<uint64_t>& global_ranks) {
  dtrain_torch::GroupSpec spec;
  spec.store = store;
  spec.rank = rank;
  spec.size = size;
  spec.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000.0));
  spec.name = name;
  spec.torch_name = torch_name;
  spec.global_ranks = global_ranks;
  auto group = c10::make_intrusive<ProcessGroupDtrain>(std::move(spec));
  ProcessGroupDtrain::track(group);
  return group;
}

}  // namespace

PYBIND11_MODULE(_torch_backend, m) {
  namespace py = pybind11;
  m.doc() = "ProcessGroupDtrain, torch.distributed's backend \"dtrain\" (see dtrain-torch(7))";
  py::class_<ProcessGroupDtrain, dtrain_torch::TorchBackend, c10::intrusive_ptr<ProcessGroupDtrain>>(
      m, "ProcessGroupDtrain", "A process group of the backend \"dtrain\": one dtrain communicator")
      .def("shutdown", &ProcessGroupDtrain::shutdown_group, py::call_guard<py::gil_scoped_release>(),
           "The ops already issued run, then the group's threads and communicator go; later ops are refused")
      .def("abort", &ProcessGroupDtrain::abort_group, py::arg("reason") = "the process group was aborted",
           py::call_guard<py::gil_scoped_release>(),
           "The op in flight and the queued ones fail at once with `reason`; later ops are refused");
  // The group's communicator is made here, collectively through the store: without the GIL.
  m.def("create", &create, py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_s"), py::arg("name"),
        py::arg("torch_name"), py::arg("global_ranks"), py::call_guard<py::gil_scoped_release>(),
        "A process group of `size` ranks over the group's c10d store (collective)");
  m.def("shutdown_all", &ProcessGroupDtrain::shutdown_all, py::call_guard<py::gil_scoped_release>(),
        "Shuts every live group down (at the interpreter's exit)");
  m.def(
      "library_version", [] { return std::string(dtrain_version()); },
      "The version of the libdtrain_collectives the backend runs on");
  m.attr("TORCH_VERSION") = TORCH_VERSION;
  m.attr("TORCH_BACKEND_CLASS") = static_cast<bool>(DTRAIN_TORCH_BACKEND);
  m.attr("CUDA") = dtrain_torch::built_with_cuda();
}
