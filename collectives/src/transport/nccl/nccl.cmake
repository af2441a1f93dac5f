# Included by collectives/CMakeLists.txt after dtrain_collectives exists: adds the NCCL backend when
# DTRAIN_HAVE_NCCL, else the build-without-NCCL implementation that refuses device buffers clearly.
if(DTRAIN_HAVE_NCCL)
  target_sources(dtrain_collectives PRIVATE ${CMAKE_CURRENT_LIST_DIR}/nccl_backend.cpp)
  target_link_libraries(dtrain_collectives PRIVATE dtrain::nccl_deps)
else()
  target_sources(dtrain_collectives PRIVATE ${CMAKE_CURRENT_LIST_DIR}/nccl_stub.cpp)
endif()
