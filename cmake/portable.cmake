# DDPRUN_PORTABLE: ddprun, ddprun-master and libddp_worker.so that need nothing at run time
# but the C library and the kernel (docs/packaging.md): every other library goes in statically.
#   - Debian's static archives (gRPC, Protobuf, Abseil, OpenSSL, c-ares, RE2, zlib, hwloc) are
#     linked in place of its shared libraries: ddprun_link_static_archives() below;
#   - spdlog and fmt have no static archive in Debian: their headers alone (header-only mode);
#   - civetweb and prometheus-cpp have none either: compiled here from their Debian source
#     packages, extracted under DDPRUN_THIRD_PARTY_SOURCES (scripts/release.sh fetches them);
#   - libudev, which hwloc's archive calls for disk serial numbers: answered "no udev"
#     (node/udev_absent.cc); ddprun reads no disk of the topology;
#   - libstdc++ and libgcc: -static-libstdc++ -static-libgcc;
#   - the network half (libddprun_network.so elsewhere) is linked into ddprun itself.
# The glibc floor: with DDPRUN_GLIBC_ROOT, a Debian root of an older release holding libc6-dev,
# the shipped programs link against its C library (ddprun_hold_glibc_floor below).
if(DDPRUN_BUILD_TESTS)
  message(FATAL_ERROR "DDPRUN_PORTABLE builds the shipped programs only: configure it with "
                      "-DDDPRUN_BUILD_TESTS=OFF (scripts/release.sh does)")
endif()
if(NOT DDPRUN_THIRD_PARTY_SOURCES)
  message(FATAL_ERROR "DDPRUN_PORTABLE needs DDPRUN_THIRD_PARTY_SOURCES: a folder holding the "
                      "extracted Debian source packages civetweb/ and prometheus-cpp/ "
                      "(scripts/release.sh makes it with apt-get source)")
endif()

# What find_package and find_library find: archives first.
set(CMAKE_FIND_LIBRARY_SUFFIXES .a)
set(OPENSSL_USE_STATIC_LIBS TRUE)
set(ZLIB_USE_STATIC_LIBS TRUE)
set(Protobuf_USE_STATIC_LIBS ON)
add_link_options(-static-libstdc++ -static-libgcc)
# spdlog and fmt from their headers, in every file alike (one definition of each function).
add_compile_definitions(SPDLOG_FMT_EXTERNAL FMT_HEADER_ONLY)

# RE2, which gRPC's own find module takes from pkg-config as "-lre2" (the shared library):
# its archive instead, defined first so that the module keeps it.
find_library(DDPRUN_RE2_ARCHIVE re2 REQUIRED)
add_library(re2::re2 STATIC IMPORTED)
set_target_properties(re2::re2 PROPERTIES IMPORTED_LOCATION ${DDPRUN_RE2_ARCHIVE})

# Points every imported library target found so far (absl::*, gRPC::*, c-ares, RE2, ...) at the
# static archive beside its shared library: libgrpc.so.29.0.0 -> libgrpc.a. A target without
# one stops the configuration, naming it: a shared library would not be there at run time.
function(ddprun_link_static_archives)
  get_directory_property(imported IMPORTED_TARGETS)
  foreach(target IN LISTS imported)
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(SHARED|UNKNOWN|STATIC)_LIBRARY$")
      continue()
    endif()
    foreach(property IMPORTED_LOCATION IMPORTED_LOCATION_NONE IMPORTED_LOCATION_RELEASE
                     IMPORTED_LOCATION_RELWITHDEBINFO IMPORTED_LOCATION_DEBUG)
      get_target_property(location ${target} ${property})
      if(location AND location MATCHES "^(.*)\\.so(\\.[0-9.]+)?$")
        set(archive "${CMAKE_MATCH_1}.a")
        if(NOT EXISTS "${archive}")
          message(FATAL_ERROR "DDPRUN_PORTABLE: ${target} has no static archive "
                              "(${archive} next to ${location})")
        endif()
        set_target_properties(${target} PROPERTIES ${property} "${archive}")
      endif()
    endforeach()
  endforeach()
endfunction()

# civetweb (the metrics port's HTTP server) as Debian configures it, without TLS, which the
# metrics port does not serve (Debian's copy would dlopen the system's libssl for it).
set(civetweb_dir ${DDPRUN_THIRD_PARTY_SOURCES}/civetweb)
if(NOT EXISTS ${civetweb_dir}/src/civetweb.c)
  message(FATAL_ERROR "DDPRUN_PORTABLE: no civetweb source in ${civetweb_dir}")
endif()
add_library(ddprun_civetweb STATIC ${civetweb_dir}/src/civetweb.c
            ${civetweb_dir}/src/CivetServer.cpp)
set_target_properties(ddprun_civetweb PROPERTIES UNITY_BUILD OFF)
target_include_directories(ddprun_civetweb PUBLIC ${civetweb_dir}/include)
target_compile_definitions(ddprun_civetweb PRIVATE NO_SSL USE_WEBSOCKET USE_STACK_SIZE=102400)
target_compile_options(ddprun_civetweb PRIVATE -w)
target_link_libraries(ddprun_civetweb PUBLIC Threads::Threads ${CMAKE_DL_LIBS})
set(CIVETWEB_INCLUDE_DIR ${civetweb_dir}/include)
set(CIVETWEB_LIBRARY ddprun_civetweb)
set(CIVETWEB_CPP_LIBRARY "")

# prometheus-cpp's core (the metric types and the text format): all ddprun uses of it.
set(prometheus_dir ${DDPRUN_THIRD_PARTY_SOURCES}/prometheus-cpp/core)
if(NOT EXISTS ${prometheus_dir}/src/registry.cc)
  message(FATAL_ERROR "DDPRUN_PORTABLE: no prometheus-cpp source in ${prometheus_dir}")
endif()
file(GLOB prometheus_sources ${prometheus_dir}/src/*.cc ${prometheus_dir}/src/detail/*.cc)
add_library(ddprun_prometheus_core STATIC ${prometheus_sources})
set_target_properties(ddprun_prometheus_core PROPERTIES UNITY_BUILD OFF)
# The header CMake's GenerateExportHeader writes there: nothing to export from an archive.
file(WRITE ${CMAKE_BINARY_DIR}/prometheus/include/prometheus/detail/core_export.h
     "#pragma once\n#define PROMETHEUS_CPP_CORE_EXPORT\n")
target_include_directories(ddprun_prometheus_core
  PUBLIC ${prometheus_dir}/include ${CMAKE_BINARY_DIR}/prometheus/include
  PRIVATE ${prometheus_dir}/src)
target_compile_options(ddprun_prometheus_core PRIVATE -w)
target_link_libraries(ddprun_prometheus_core PUBLIC Threads::Threads)
add_library(prometheus-cpp::core ALIAS ddprun_prometheus_core)

# The shipped programs link against the C library of DDPRUN_GLIBC_ROOT, not the build
# machine's: each glibc symbol they take is then of a version that glibc has. Compiled with
# this machine's headers, so the few symbols of newer glibc that the toolchain's own code
# (libstdc++, libgcc) calls are defined in common/glibc_floor.cc; a call of our own to a
# newer function fails the link, naming it. The root's absolute library links must be made
# relative first (scripts/release.sh does): the linker follows them on this machine.
set(DDPRUN_GLIBC_ROOT "" CACHE PATH
    "Portable builds: a Debian root with libc6-dev whose glibc the programs link against")
function(ddprun_hold_glibc_floor)
  if(NOT DDPRUN_GLIBC_ROOT)
    return()
  endif()
  set(libs ${DDPRUN_GLIBC_ROOT}/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})
  if(NOT EXISTS ${libs}/libc_nonshared.a)
    message(FATAL_ERROR "DDPRUN_GLIBC_ROOT: ${libs} has no libc_nonshared.a (is libc6-dev "
                        "in that root?)")
  endif()
  foreach(target IN LISTS ARGN)
    target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/common/glibc_floor.cc)
    # Alone: it declares pow, log and log2 under names of its own, beside <cmath>'s.
    set_source_files_properties(${PROJECT_SOURCE_DIR}/common/glibc_floor.cc
      TARGET_DIRECTORY ${target} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    # -B: the root's start files; -L and --sysroot: its libc.so and what that script names.
    target_link_options(${target} PRIVATE -B${libs}/ -L${libs} -Wl,--sysroot=${DDPRUN_GLIBC_ROOT}
                        -Wl,--wrap=pow -Wl,--wrap=log2 -Wl,--wrap=log)
    # Older glibc keeps threads, dlopen and timers in libraries of their own.
    target_link_libraries(${target} PRIVATE -lpthread -ldl -lrt -lm)
  endforeach()
endfunction()

# libddp_worker.so carries its libraries too. A shared library takes position-independent
# code only: Debian's archives are that (built as PIE) but for some files that address a
# thread-local (local-exec, R_X86_64_TPOFF32) or the C library's `stderr` (R_X86_64_PC32) as
# an executable does. Those files are compiled again here, with -fPIC, from the same
# versions' source packages; linked first, they leave the archives' copies unused (a file
# missing from this list fails the link, naming it). libstdc++'s archive has one such file
# too: its PIC kit (libstdc++-<gcc>-pic) is linked instead. Only the C API is exported
# (worker_sdk/c_api.map): what the library took in stays inside it.
set(pic_sources
  abseil/absl/base/internal/sysinfo.cc
  abseil/absl/container/internal/raw_hash_set.cc
  abseil/absl/random/internal/pool_urbg.cc
  abseil/absl/strings/internal/cordz_functions.cc
  abseil/absl/strings/internal/str_format/parser.cc
  protobuf/src/google/protobuf/arena.cc
  protobuf/src/google/protobuf/stubs/common.cc)
foreach(file bitstate compile dfa filtered_re2 mimics_pcre nfa onepass parse prefilter
             prefilter_tree re2 regexp set simplify tostring)
  list(APPEND pic_sources re2/re2/${file}.cc)
endforeach()
list(TRANSFORM pic_sources PREPEND ${DDPRUN_THIRD_PARTY_SOURCES}/)
foreach(source IN LISTS pic_sources)
  if(NOT EXISTS ${source})
    message(FATAL_ERROR "DDPRUN_PORTABLE: no ${source} (the abseil, protobuf and re2 source "
                        "packages, of the versions installed, belong in "
                        "DDPRUN_THIRD_PARTY_SOURCES)")
  endif()
endforeach()
add_library(ddprun_pic_thread_locals OBJECT ${pic_sources})
set_target_properties(ddprun_pic_thread_locals PROPERTIES POSITION_INDEPENDENT_CODE ON
                      UNITY_BUILD OFF)
target_include_directories(ddprun_pic_thread_locals PRIVATE
  ${DDPRUN_THIRD_PARTY_SOURCES}/abseil ${DDPRUN_THIRD_PARTY_SOURCES}/protobuf/src
  ${DDPRUN_THIRD_PARTY_SOURCES}/re2)
target_compile_options(ddprun_pic_thread_locals PRIVATE -w)
target_compile_definitions(ddprun_pic_thread_locals PRIVATE HAVE_PTHREAD)

execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++_pic.a
                OUTPUT_VARIABLE libstdcxx_pic OUTPUT_STRIP_TRAILING_WHITESPACE)
function(ddprun_portable_shared_library target version_script)
  if(NOT EXISTS "${libstdcxx_pic}")
    message(FATAL_ERROR "DDPRUN_PORTABLE: ${CMAKE_CXX_COMPILER} has no libstdc++_pic.a for "
                        "${target} (scripts/install-deps.sh --release installs libstdc++-12-pic)")
  endif()
  # -static-libstdc++ asks the linker for libstdc++.a: this folder's is the PIC kit, with
  # the one file the kit leaves to libstdc++.so (compatibility.o, std::istream::ignore(long))
  # from the archive, where it is PIC-safe.
  set(dir ${CMAKE_BINARY_DIR}/libstdc++-pic)
  file(MAKE_DIRECTORY ${dir})
  file(COPY_FILE ${libstdcxx_pic} ${dir}/libstdc++.a)
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.a
                  OUTPUT_VARIABLE libstdcxx OUTPUT_STRIP_TRAILING_WHITESPACE)
  execute_process(COMMAND ${CMAKE_AR} x ${libstdcxx} compatibility.o WORKING_DIRECTORY ${dir}
                  COMMAND_ERROR_IS_FATAL ANY)
  execute_process(COMMAND ${CMAKE_AR} rs libstdc++.a compatibility.o WORKING_DIRECTORY ${dir}
                  COMMAND_ERROR_IS_FATAL ANY)
  target_sources(${target} PRIVATE $<TARGET_OBJECTS:ddprun_pic_thread_locals>)
  target_link_options(${target} PRIVATE -L${dir} -Wl,--exclude-libs,ALL -Wl,--no-undefined
                      -Wl,--version-script=${version_script})
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${version_script})
endfunction()
