#include "runtime/private_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace attnjit::runtime {

int make_private_dirs(const std::string& path) {
    if (path.empty()) return ENOENT;
    for (size_t end = path.find('/', 1);; end = path.find('/', end + 1)) {
        const std::string prefix = path.substr(0, end);
        if (!prefix.empty() && prefix.back() != '/' && ::mkdir(prefix.c_str(), 0700) != 0 &&
            errno != EEXIST)
            return errno;
        if (end == std::string::npos) break;
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return errno;
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

std::string why_not_private(const std::string& path, bool follow_link) {
    struct stat st {};
    if ((follow_link ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0)
        return std::string("cannot be examined (") + std::strerror(errno) + ")";
    if (S_ISLNK(st.st_mode)) return "is a symbolic link";
    if (!S_ISDIR(st.st_mode)) return "is not a directory";
    if (st.st_uid != ::geteuid())
        return "is owned by uid " + std::to_string(st.st_uid) + ", not by you (uid " +
               std::to_string(::geteuid()) + ")";
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        char mode[8];
        std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
        return std::string("is writable by ") + ((st.st_mode & S_IWOTH) ? "every user" : "its group") +
               " (mode " + mode + ")";
    }
    return "";
}

}  // namespace attnjit::runtime
