# The NCCL backend of the collectives library. Included by collectives/CMakeLists.txt after
# dtrain_collectives exists (tests/nccl includes it too when it has not been, so it is idempotent):
#   DTRAIN_HAVE_NCCL: static dtrain_nccl_core (the backend, also linked by tests and bench/gpu) and
#                     nccl_backend.cpp (create(), the Comm seam) in dtrain_collectives, linking NCCL + cudart.
#   otherwise:        nccl_stub.cpp, which recognises device buffers through an already loaded
#                     CUDA driver and refuses them with a "built without NCCL" error.
set(_dtrain_nccl_dir ${CMAKE_CURRENT_LIST_DIR})
if(DTRAIN_HAVE_NCCL AND NOT TARGET dtrain_nccl_core)
  add_library(dtrain_nccl_core STATIC ${_dtrain_nccl_dir}/nccl_core.cpp ${_dtrain_nccl_dir}/nccl_bootstrap.cpp
              ${_dtrain_nccl_dir}/nccl_comm.cpp ${_dtrain_nccl_dir}/nccl_p2p.cpp
              ${_dtrain_nccl_dir}/nccl_exchange.cpp ${_dtrain_nccl_dir}/driver_probe.cpp)
  add_library(dtrain::nccl_core ALIAS dtrain_nccl_core)
  target_include_directories(dtrain_nccl_core PUBLIC
    $<BUILD_INTERFACE:${_dtrain_nccl_dir}>
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/collectives/include>)
  target_link_libraries(dtrain_nccl_core
    PUBLIC dtrain::nccl_deps dtrain::rdzv_store dtrain::common ${CMAKE_DL_LIBS}
    PRIVATE dtrain_warnings)
  # Linked into the shared library, whose only exports are the C ABI.
  set_target_properties(dtrain_nccl_core PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
endif()
if(TARGET dtrain_collectives)
  get_target_property(_dtrain_nccl_added dtrain_collectives DTRAIN_NCCL_ADDED)
  if(NOT _dtrain_nccl_added)
    set_target_properties(dtrain_collectives PROPERTIES DTRAIN_NCCL_ADDED ON)
    if(DTRAIN_HAVE_NCCL)
      target_sources(dtrain_collectives PRIVATE ${_dtrain_nccl_dir}/nccl_backend.cpp)
      target_link_libraries(dtrain_collectives PRIVATE dtrain_nccl_core)
    else()
      target_sources(dtrain_collectives PRIVATE ${_dtrain_nccl_dir}/nccl_stub.cpp ${_dtrain_nccl_dir}/driver_probe.cpp)
      target_link_libraries(dtrain_collectives PRIVATE ${CMAKE_DL_LIBS})
    endif()
  endif()
endif()
