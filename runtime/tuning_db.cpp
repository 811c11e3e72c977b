#include "runtime/tuning_db.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "runtime/compiled_kernel.h"
#include "runtime/file_lock.h"
#include "runtime/private_dir.h"
#include "runtime/safe_file.h"
#include "runtime/tuning_json.h"
#include "support/env.h"
#include "support/sha256.h"

namespace attnjit::runtime {

namespace {

using nlohmann::ordered_json;

constexpr const char* kTuningFormat = "attnjit.tuning/1";
constexpr size_t kMaxDocumentBytes = size_t(16) << 20;  // thousands of buckets; a planted file is refused
constexpr std::chrono::milliseconds kLockTimeout{10000};

}  // namespace

std::string TuningKey::id() const {
    // Each field on its own line: no two keys run together into the same text.
    return sha256_hex(std::string(kTuningFormat) + "\n" + spec + "\n" + kind + "\n" + device + "\n" + arch + "\n" +
                      toolchain + "\n" + std::to_string(generator_version) + "\n" + candidates);
}

TuningDb::TuningDb(std::string root) {
    if (!root.empty()) dir_ = root + "/v" + std::to_string(kCompiledKernelFormatVersion) + "/tuning";
}

std::string TuningDb::root_from_env() { return env::disk_cache_disabled() ? std::string() : env::cache_dir(); }

std::string TuningDb::path(const TuningKey& key) const {
    if (dir_.empty()) return "";
    const std::string id = key.id();
    return dir_ + "/" + id.substr(0, 2) + "/" + id + ".json";
}

bool TuningDb::usable() const {
    if (dir_.empty()) return false;
    if (usable_ < 0) {
        const int err = make_private_dirs(dir_);
        const std::string why = err ? std::string("cannot be created (") + std::strerror(err) + ")"
                                    : why_not_private(dir_, false);
        usable_ = why.empty() ? 1 : 0;
        if (!why.empty() && !warned_) {
            warned_ = true;
            std::cerr << "attnjit: warning: not using the tuning database at " << dir_ << ": it " << why
                      << "; tuning results are kept in memory only (set ATTNJIT_CACHE_DIR to a directory only you "
                         "own and can write)\n";
        }
    }
    return usable_ == 1;
}

namespace {

// The document of tuning file `id` under `dir`, when it is one of this format for that key.
std::optional<ordered_json> read_document(const std::string& dir, const std::string& id) {
    const auto text = read_regular_file(dir + "/" + id.substr(0, 2) + "/" + id + ".json", kMaxDocumentBytes);
    if (!text) return std::nullopt;
    ordered_json doc = ordered_json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (!doc.is_object() || doc.value("format", "") != kTuningFormat || doc.value("key", "") != id ||
        !doc.contains("buckets") || !doc["buckets"].is_object())
        return std::nullopt;
    return doc;
}

std::map<std::string, TuningResult> buckets_of(const ordered_json& doc) {
    std::map<std::string, TuningResult> out;
    for (const auto& [bucket, j] : doc["buckets"].items())
        if (auto r = tuning_result_from_json(j)) out[bucket] = *r;
    return out;
}

}  // namespace

std::map<std::string, TuningResult> TuningDb::read(const std::string& id) const {
    const std::string path = dir_ + "/" + id.substr(0, 2) + "/" + id + ".json";
    if (RegularFile(path).status() == RegularFile::Status::kAbsent) return {};
    const auto doc = read_document(dir_, id);
    if (!doc) {
        if (!warned_) {
            warned_ = true;
            std::cerr << "attnjit: warning: ignoring the tuning file " << path
                      << ": it is not a tuning document of this key (damaged, or written by hand); the next "
                         "tuning result replaces it\n";
        }
        return {};
    }
    return buckets_of(*doc);
}

std::vector<TuningDb::Entry> TuningDb::entries() const {
    std::vector<Entry> out;
    std::lock_guard<std::mutex> lock(mu_);
    struct stat st {};
    if (dir_.empty() || ::stat(dir_.c_str(), &st) != 0 || !usable()) return out;  // reading makes nothing
    std::vector<std::string> files;
    if (DIR* top = ::opendir(dir_.c_str())) {
        while (const dirent* sub = ::readdir(top)) {
            const std::string prefix = sub->d_name;
            if (prefix.size() != 2) continue;
            if (DIR* d = ::opendir((dir_ + "/" + prefix).c_str())) {
                while (const dirent* f = ::readdir(d)) {
                    const std::string name = f->d_name;
                    if (name.size() == 64 + 5 && name.compare(64, 5, ".json") == 0 && name.compare(0, 2, prefix) == 0)
                        files.push_back(name.substr(0, 64));
                }
                ::closedir(d);
            }
        }
        ::closedir(top);
    }
    std::sort(files.begin(), files.end());
    for (const std::string& id : files) {
        const auto doc = read_document(dir_, id);  // read once: its fields and its buckets
        if (!doc || !(*doc).contains("what") || !(*doc)["what"].is_object()) continue;
        const auto& w = (*doc)["what"];
        Entry e;
        e.key = TuningKey{w.value("spec", ""), w.value("kind", ""), w.value("device", ""), w.value("arch", ""),
                          w.value("toolchain", ""), w.value("generator_version", 0), w.value("candidates", "")};
        if (e.key.id() != id) continue;  // the recorded fields are not the ones the name hashes
        e.buckets = buckets_of(*doc);
        out.push_back(std::move(e));
    }
    return out;
}

std::map<std::string, TuningResult> TuningDb::buckets(const TuningKey& key) const {
    const std::string id = key.id();
    std::lock_guard<std::mutex> lock(mu_);
    auto it = memory_.find(id);
    if (it == memory_.end()) it = memory_.emplace(id, usable() ? read(id) : std::map<std::string, TuningResult>{}).first;
    return it->second;
}

std::optional<TuningResult> TuningDb::find(const TuningKey& key, const std::string& bucket) const {
    const auto all = buckets(key);
    const auto it = all.find(bucket);
    if (it == all.end()) return std::nullopt;
    return it->second;
}

void TuningDb::store(const TuningKey& key, const std::string& bucket, const TuningResult& result) {
    const std::string id = key.id();
    std::lock_guard<std::mutex> lock(mu_);
    memory_[id][bucket] = result;
    if (!usable()) return;
    const std::string sub = dir_ + "/" + id.substr(0, 2);
    if ((::mkdir(sub.c_str(), 0700) != 0 && errno != EEXIST) || !why_not_private(sub, false).empty()) return;
    const std::string path = sub + "/" + id + ".json";
    // Under the key's lock: what other processes stored since, then ours, written whole.
    const FileLock file_lock = FileLock::acquire(path + ".lock", kLockTimeout);
    std::map<std::string, TuningResult> merged = read(id);
    merged[bucket] = result;
    for (const auto& [b, r] : memory_[id]) merged.emplace(b, r);  // ours that are not on disk
    memory_[id] = merged;
    ordered_json buckets = ordered_json::object();
    for (const auto& [b, r] : merged) buckets[b] = tuning_result_json(r);
    const ordered_json doc{{"format", kTuningFormat},
                           {"key", id},
                           {"what",
                            {{"spec", key.spec},
                             {"kind", key.kind},
                             {"device", key.device},
                             {"arch", key.arch},
                             {"toolchain", key.toolchain},
                             {"generator_version", key.generator_version},
                             {"candidates", key.candidates}}},
                           {"buckets", buckets}};
    const char* step = "";
    if (const int err = replace_file(path, doc.dump(2) + "\n", 0600, /*durable=*/true, &step); err && !warned_) {
        warned_ = true;
        std::cerr << "attnjit: warning: cannot write the tuning file " << path << " (" << step << ": "
                  << std::strerror(err) << "); tuning results are kept in memory\n";
    }
}

}  // namespace attnjit::runtime
