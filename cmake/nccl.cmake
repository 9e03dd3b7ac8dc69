# Finds CUDA and NCCL for the worker SDK according to DDPRUN_WITH_NCCL.
# Sets DDPRUN_HAVE_NCCL and, when found, the imported target ddprun::nccl.
set(DDPRUN_HAVE_NCCL OFF)
if(NOT DDPRUN_WITH_NCCL STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib)
  endif()
  if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(DDPRUN_HAVE_NCCL ON)
    add_library(ddprun::nccl UNKNOWN IMPORTED)
    set_target_properties(ddprun::nccl PROPERTIES
      IMPORTED_LOCATION "${NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
    message(STATUS "ddprun: NCCL found (${NCCL_LIBRARY}); building the SDK's NCCL parts")
  elseif(DDPRUN_WITH_NCCL STREQUAL "ON")
    message(FATAL_ERROR "DDPRUN_WITH_NCCL=ON but CUDA or NCCL was not found "
                        "(looked for nccl.h and libnccl under the CUDA toolkit). "
                        "Install them or configure with -DDDPRUN_WITH_NCCL=AUTO.")
  else()
    message(STATUS "ddprun: CUDA/NCCL not found; the SDK's NCCL parts are not built")
  endif()
endif()
