# Unity builds (CMake's UNITY_BUILD, batches of 8 sources) for the targets whose sources compile
# together: the same code in a third to a half of the CPU, since each batch parses the shared
# headers and instantiates fmt's and nlohmann::json's templates once. Measured at -O2 -g1, the
# sources one by one against batches of 8: dtrain 48.7 -> 15.3 s, dtrain_agent 36.7 -> 16.2 s,
# dtrain_config 29.8 -> 17.0 s, dtrain_collectives 6.5 -> 2.1 s, dtrain_common 4.6 -> 1.4 s.
# Left out: targets whose files define helpers of the same name in anonymous namespaces, which a
# unity batch refuses (dtrain_rdzv_store, dtrain_rdzv_membership, dtrain_rdzv_server, dtrain_collectives_core) or, with
# overloads, could resolve differently; the test programs (their files share helper names).
# DTRAIN_UNITY_BUILD: off by default (a unity batch recompiles whole for a change in one of its
# files: slower edit-and-rebuild); on in the demo preset and in scripts/ci-test.sh, which build
# from scratch. A listed target's files must not define two file-local functions of one name.
option(DTRAIN_UNITY_BUILD "Unity builds of the targets listed in cmake/DtrainUnity.cmake" OFF)
if(DTRAIN_UNITY_BUILD)
  foreach(_dtrain_t dtrain dtrain_agent dtrain_config dtrain_common dtrain_collectives)
    if(TARGET ${_dtrain_t})
      set_target_properties(${_dtrain_t} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
    endif()
  endforeach()
endif()
