// failsync.cc — a library the tests preload into delayqd (LD_PRELOAD) to make the disk's fsync
// fail as a failing disk does: while the file named by DELAYQ_FAIL_SYNC exists, fsync() and
// fdatasync() return EIO without syncing anything; otherwise they do what libc does. The test
// creates the file to arm it. Built without sanitizers: it only forwards calls.
#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace {

bool armed() {
  const char* file = std::getenv("DELAYQ_FAIL_SYNC");
  return file != nullptr && ::access(file, F_OK) == 0;
}

using SyncFunction = int (*)(int);

SyncFunction next(const char* name) {
  return reinterpret_cast<SyncFunction>(::dlsym(RTLD_NEXT, name));
}

// EIO while armed, else the real call.
int sync_unless_armed(SyncFunction real, int fd) {
  if (armed()) {
    errno = EIO;
    return -1;
  }
  return real(fd);
}

}  // namespace

extern "C" {

int fsync(int fd) {
  static const SyncFunction real = next("fsync");
  return sync_unless_armed(real, fd);
}

int fdatasync(int fd) {
  static const SyncFunction real = next("fdatasync");
  return sync_unless_armed(real, fd);
}

}  // extern "C"
