# Debian packages with CPack (`cpack -G DEB` in the build folder, or scripts/package.sh):
#   ddprun      /usr/bin/ddprun, /usr/bin/ddprun-master, /usr/lib/ddprun/libddprun_network.so
#               and the worker SDK's shared library
#   ddprun-dev  the SDK's headers, its CMake package and pkg-config file; depends on ddprun
# Dependencies on Debian's gRPC, protobuf, abseil, spdlog, ... come from dpkg-shlibdeps.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ddprun)
set(CPACK_PACKAGE_VENDOR "ddprun")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "ddprun maintainers <ddprun@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "fast, torchrun-compatible launcher for distributed training")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME ddprun)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION utils)
# eu-stack: native workers' stacks in the hang report (docs/hangs.md); ddprun says so without it.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS elfutils)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
  "fast, torchrun-compatible launcher for distributed training
 ddprun starts one worker per GPU with torchrun's options and environment, restarts the
 whole job on every node when a worker fails, and meets other nodes at a gRPC rendezvous
 master (ddprun-master, or hosted by an agent). Includes the worker SDK's library.")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME ddprun-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "ddprun (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_DEV_DESCRIPTION
  "ddprun worker SDK: headers, CMake package and pkg-config file
 Build C++ and C workers that turn ddprun's environment into a ready store and NCCL
 communicator: find_package(ddprun) -> ddprun::worker, or pkg-config ddp-worker.")
include(CPack)
