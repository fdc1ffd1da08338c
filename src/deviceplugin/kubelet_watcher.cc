#include "deviceplugin/kubelet_watcher.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tessera::deviceplugin {

absl::StatusOr<std::unique_ptr<FileCreationWatcher>> FileCreationWatcher::Start(
    const std::string& dir, const std::string& name, std::function<void()> on_created) {
  int ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (ifd < 0) return absl::InternalError(absl::StrCat("inotify_init1: ", std::strerror(errno)));
  if (inotify_add_watch(ifd, dir.c_str(), IN_CREATE | IN_MOVED_TO) < 0) {
    const int err = errno;
    ::close(ifd);
    return absl::FailedPreconditionError(
        absl::StrCat("watching directory ", dir, ": ", std::strerror(err)));
  }
  int sfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (sfd < 0) {
    const int err = errno;
    ::close(ifd);
    return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(err)));
  }
  std::unique_ptr<FileCreationWatcher> w(
      new FileCreationWatcher(ifd, sfd, name, std::move(on_created)));
  w->thread_ = std::thread([p = w.get()] { p->Run(); });
  return w;
}

FileCreationWatcher::FileCreationWatcher(int inotify_fd, int stop_fd, std::string name,
                                         std::function<void()> on_created)
    : inotify_fd_(inotify_fd),
      stop_fd_(stop_fd),
      name_(std::move(name)),
      on_created_(std::move(on_created)) {}

FileCreationWatcher::~FileCreationWatcher() {
  Stop();
  ::close(inotify_fd_);
  ::close(stop_fd_);
}

void FileCreationWatcher::Stop() {
  if (!thread_.joinable()) return;
  const uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof(one));
  thread_.join();
}

void FileCreationWatcher::Run() {
  alignas(struct inotify_event) char buf[4096];
  while (true) {
    pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    bool created = false;
    while (true) {
      const ssize_t n = ::read(inotify_fd_, buf, sizeof(buf));
      if (n <= 0) break;
      for (ssize_t off = 0; off < n;) {
        const auto* ev = reinterpret_cast<const struct inotify_event*>(buf + off);
        if (ev->len > 0 && name_ == ev->name) created = true;
        off += sizeof(struct inotify_event) + ev->len;
      }
    }
    if (created) on_created_();
  }
}

}  // namespace tessera::deviceplugin
