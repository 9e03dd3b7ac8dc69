// libudev's calls that Debian's static hwloc makes (its Linux backend reads disks' serial
// numbers through udev), for portable builds (cmake/portable.cmake), which ship no libudev:
// udev_new() answers that there is no udev, which hwloc takes as it takes a host without
// udev, and reads the rest of the topology from sysfs. ddprun uses no disk of the topology.
extern "C" {

struct udev;
struct udev_device;

udev* udev_new() { return nullptr; }
udev* udev_unref(udev*) { return nullptr; }
udev_device* udev_device_new_from_subsystem_sysname(udev*, const char*, const char*) {
  return nullptr;
}
udev_device* udev_device_unref(udev_device*) { return nullptr; }
const char* udev_device_get_property_value(udev_device*, const char*) { return nullptr; }

}  // extern "C"
