// Directories whose files attnjit later trusts (the kernel cache): created 0700, and
// trusted only when owned by this user and writable by nobody else, because whoever
// can write there can plant a kernel that this process would load and run.
#pragma once

#include <string>

namespace attnjit::runtime {

// Creates `path` and its missing parents with mode 0700; existing directories are left
// as they are. Returns 0, or the errno of the first component that could not be made.
int make_private_dirs(const std::string& path);

// "" when `path` is a directory owned by the effective user and writable by neither its
// group nor others; otherwise why not, as words for a warning ("is owned by uid 65534,
// not by you (uid 1000)"). `follow_link`: whether `path` itself may be a symbolic link
// to such a directory (the root a user names may be; directories inside it may not).
std::string why_not_private(const std::string& path, bool follow_link);

}  // namespace attnjit::runtime
