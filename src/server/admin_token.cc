#include "server/admin_token.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace tessera::server {
namespace {

absl::Status FileError(const std::string& path, absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat("admin token file ", path, ": ", what));
}

absl::StatusOr<std::string> NewToken() {
  char raw[32];
  size_t got = 0;
  while (got < sizeof raw) {
    ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(absl::StrCat("getrandom: ", std::strerror(errno)));
    got += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(absl::string_view(raw, sizeof raw));
}

absl::StatusOr<AdminToken> Create(const std::string& path) {
  absl::StatusOr<std::string> token = NewToken();
  if (!token.ok()) return token.status();
  // O_EXCL: a concurrent first start or a planted file is never overwritten; mode 0600 from the
  // moment the file exists.
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return FileError(path, absl::StrCat("cannot create: ", std::strerror(errno)));
  const std::string line = *token + "\n";
  const bool ok =
      write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && fsync(fd) == 0;
  const int err = errno;
  close(fd);
  if (!ok) {
    unlink(path.c_str());
    return FileError(path, absl::StrCat("cannot write: ", std::strerror(err)));
  }
  return AdminToken{path, *std::move(token), true};
}

}  // namespace

absl::StatusOr<AdminToken> LoadOrCreateAdminToken(const std::string& data_dir) {
  const std::string path = absl::StrCat(data_dir, "/", kAdminTokenFile);
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Create(path);
    return FileError(path, absl::StrCat("cannot read: ", std::strerror(errno)));
  }
  struct stat st;
  std::string text;
  char buf[512];
  ssize_t n = 0;
  const bool stat_ok = fstat(fd, &st) == 0;
  while (stat_ok && (n = read(fd, buf, sizeof buf)) > 0 && text.size() < 4096) text.append(buf, n);
  close(fd);
  if (!stat_ok || n < 0) return FileError(path, "cannot read");
  if (!S_ISREG(st.st_mode)) return FileError(path, "not a regular file");
  if ((st.st_mode & 077) != 0) {
    return FileError(path, absl::StrFormat("group or others may read it (mode %04o); run chmod "
                                           "600 on it, or delete it for a new token",
                                           st.st_mode & 07777));
  }
  std::string token(absl::StripAsciiWhitespace(text));
  if (token.size() < 16 || token.size() > 1024 ||
      token.find_first_of(" \t\r\n") != std::string::npos) {
    return FileError(path, "expected one token of 16 to 1024 characters without spaces");
  }
  return AdminToken{path, std::move(token), false};
}

bool IsLoopbackHost(absl::string_view host) {
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  if (absl::ConsumePrefix(&host, "[")) {
    if (!absl::ConsumeSuffix(&host, "]")) return false;
  }
  const std::string h(host);
  in_addr v4;
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

}  // namespace tessera::server
