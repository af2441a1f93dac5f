/* A stand-in for the CUDA driver (built as libcuda.so.1) for the build without NCCL: it answers
 * cuPointerGetAttribute so that the bytes of fake_device_memory look like device memory, which lets
 * a GPU-less machine drive the library's device-buffer path. Nothing else of the driver exists. */
#include <stddef.h>
#include <stdint.h>

__attribute__((visibility("default"))) unsigned char fake_device_memory[4096];

__attribute__((visibility("default"))) int cuPointerGetAttribute(void* data, int attribute, unsigned long long ptr) {
  const uintptr_t base = (uintptr_t)fake_device_memory;
  if (ptr < base || ptr >= base + sizeof fake_device_memory) return 1; /* CUDA_ERROR_INVALID_VALUE */
  switch (attribute) {
    case 2: *(unsigned*)data = 2; return 0; /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE: CU_MEMORYTYPE_DEVICE */
    case 8: *(int*)data = 0; return 0;      /* CU_POINTER_ATTRIBUTE_IS_MANAGED */
    case 9: *(int*)data = 0; return 0;      /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */
    default: return 1;
  }
}
