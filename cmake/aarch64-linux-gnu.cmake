# Cross-building for aarch64 with Debian's cross compiler (g++-aarch64-linux-gnu) and the
# :arm64 development packages, which Debian's multiarch puts in /usr/lib/aarch64-linux-gnu
# (scripts/release.sh): cmake -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake ...
# protoc and gRPC's plugin are the build machine's own.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# pkg-config (OpenSSL is found through it) reads the arm64 packages' files, not this machine's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
# Programs the build runs (ddprun-docgen) run under qemu where binfmt_misc does not.
find_program(DDPRUN_QEMU_AARCH64 qemu-aarch64-static)
if(DDPRUN_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${DDPRUN_QEMU_AARCH64})
endif()
