#include "driver_probe.hpp"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstring>

namespace dtrain::coll::nccl {
namespace {

std::atomic<bool> g_loaded{false};
std::atomic<unsigned long long> g_adds_scanned{0};

int first_object(dl_phdr_info* info, std::size_t, void* data) {
  *static_cast<unsigned long long*>(data) = info->dlpi_adds;
  return 1;  // dlpi_adds is the same for every object: stop at the first
}

int find_driver(dl_phdr_info* info, std::size_t, void* data) {
  const char* name = info->dlpi_name;
  if (name == nullptr) return 0;
  const char* base = std::strrchr(name, '/');
  base = base != nullptr ? base + 1 : name;
  if (std::strncmp(base, "libcuda.so", 10) == 0) {
    *static_cast<bool*>(data) = true;
    return 1;
  }
  return 0;
}

}  // namespace

bool cuda_driver_loaded() noexcept {
  if (g_loaded.load(std::memory_order_acquire)) return true;
  unsigned long long adds = 0;
  dl_iterate_phdr(first_object, &adds);
  if (adds == g_adds_scanned.load(std::memory_order_acquire)) return false;
  bool found = false;
  dl_iterate_phdr(find_driver, &found);
  g_adds_scanned.store(adds, std::memory_order_release);
  if (found) g_loaded.store(true, std::memory_order_release);
  return found;
}

void* cuda_driver_symbol(const char* name) noexcept {
  if (!cuda_driver_loaded()) return nullptr;
  static void* handle = [] {
    void* h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_NOW);
    if (h == nullptr) h = dlopen("libcuda.so", RTLD_NOLOAD | RTLD_NOW);
    return h;
  }();
  return handle != nullptr ? dlsym(handle, name) : nullptr;
}

}  // namespace dtrain::coll::nccl
