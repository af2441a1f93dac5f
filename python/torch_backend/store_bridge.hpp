// dtrain_store_t callbacks over the c10d::Store torch hands a process group (a PrefixStore over the
// job's TCPStore or FileStore), so dtrain_comm_init_config bootstraps through torch's own store.
#pragma once

#include "torch_includes.hpp"

namespace dtrain_torch {

class StoreBridge {
 public:
  explicit StoreBridge(c10::intrusive_ptr<c10d::Store> store);
  StoreBridge(const StoreBridge&) = delete;
  StoreBridge& operator=(const StoreBridge&) = delete;

  // The callback table; valid as long as this object (the communicator keeps using it after init).
  const dtrain_store_t* table() const { return &table_; }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  dtrain_store_t table_{};
};

}  // namespace dtrain_torch
