// FileCreationWatcher: calls back each time a file of a given name appears in a directory.
//
// Kubelet deletes every socket in the device-plugin directory when it restarts and then creates
// kubelet.sock again; a plugin must then serve again and re-register. This watches the
// directory with inotify (IN_CREATE, IN_MOVED_TO) on a thread of its own.
// Thread safety: the callback runs on the watcher's thread, one call at a time; Stop() (and the
// destructor) wait for a running callback, so the callback must not call Stop().
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace tessera::deviceplugin {

class FileCreationWatcher {
 public:
  static absl::StatusOr<std::unique_ptr<FileCreationWatcher>> Start(
      const std::string& dir, const std::string& name, std::function<void()> on_created);
  ~FileCreationWatcher();

  FileCreationWatcher(const FileCreationWatcher&) = delete;
  FileCreationWatcher& operator=(const FileCreationWatcher&) = delete;

  void Stop();  // idempotent

 private:
  FileCreationWatcher(int inotify_fd, int stop_fd, std::string name,
                      std::function<void()> on_created);
  void Run();

  const int inotify_fd_;
  const int stop_fd_;  // an eventfd; written to stop the thread
  const std::string name_;
  const std::function<void()> on_created_;
  std::thread thread_;
};

}  // namespace tessera::deviceplugin
