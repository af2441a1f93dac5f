// The build without NCCL (nccl_stub.cpp): host buffers are never device buffers, and the NCCL
// backend, when asked for, says the library was built without NCCL.
#include <doctest/doctest.h>

#include <vector>

#include "driver_probe.hpp"
#include "nccl_backend.hpp"

using namespace dtrain::coll::nccl;

TEST_SUITE("nccl::stub") {
  TEST_CASE("host buffers stay with the CPU engine, without loading CUDA") {
    std::vector<double> v(8);
    CHECK_FALSE(built_with_nccl());
    CHECK_FALSE(is_device_pointer(v.data()));
    CHECK_FALSE(is_device_pointer(nullptr));
    CHECK(device_of(v.data()) == -1);
    CHECK_FALSE(cuda_driver_loaded());  // this program never touches CUDA
    CHECK(cuda_driver_symbol("cuPointerGetAttribute") == nullptr);
  }

  TEST_CASE("asking for the NCCL backend is a clear 'built without NCCL' error") {
    Options o;
    dtrain_status_t status = DTRAIN_SUCCESS;
    std::string what;
    try {
      create(o);
    } catch (const Error& e) {
      status = e.status();
      what = e.what();
    }
    CHECK(status == DTRAIN_ERR_UNSUPPORTED);
    CHECK(what.find("built without NCCL") != std::string::npos);
    CHECK(what.find("-DDTRAIN_WITH_NCCL=ON") != std::string::npos);
  }
}
