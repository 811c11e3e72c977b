#include "runtime/kernel_bundle.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "codegen/template_library.h"
#include "runtime/entry_check.h"
#include "runtime/entry_read.h"
#include "runtime/kernel_key.h"
#include "runtime/safe_file.h"
#include "runtime/tuning_json.h"
#include "support/error.h"

#ifndef ATTNJIT_VERSION_STRING
#error "runtime/CMakeLists.txt defines ATTNJIT_VERSION_STRING from the project version"
#endif

namespace attnjit::runtime {

namespace {

using nlohmann::json;

// A manifest or an entry larger than this is refused unread (a planted file must not make
// a reader allocate gigabytes): a manifest lists a few hundred kernels at most.
constexpr size_t kMaxManifestBytes = size_t(64) << 20;

bool is_hex_key(const std::string& s) {
    return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
}

}  // namespace

std::string to_json(const BundleManifest& m) {
    using ordered = nlohmann::ordered_json;  // keys in the order written: "format" first
    ordered kernels = ordered::array();
    for (const BundleKernel& k : m.kernels)
        kernels.push_back(ordered{{"index_key", k.index_key},
                                  {"name", k.name},
                                  {"arch", k.arch},
                                  {"config", k.config},
                                  {"spec", k.spec}});
    ordered doc = ordered::object();
    doc["format"] = kBundleFormat;
    doc["attnjit_version"] = m.attnjit_version;
    doc["generator_version"] = m.generator_version;
    doc["templates_hash"] = m.templates_hash;
    doc["entry_format"] = m.entry_format;
    doc["toolchain"] = m.toolchain;
    doc["kernels"] = std::move(kernels);
    if (!m.tuning.empty()) {
        ordered tuning = ordered::array();
        for (const BundleTuning& t : m.tuning)
            tuning.push_back(ordered{{"spec", t.key.spec},
                                     {"kind", t.key.kind},
                                     {"device", t.key.device},
                                     {"arch", t.key.arch},
                                     {"generator_version", t.key.generator_version},
                                     {"candidates", t.key.candidates},
                                     {"tuned_with", t.key.toolchain},
                                     {"bucket", t.bucket},
                                     {"result", tuning_result_json(t.result)}});
        doc["tuning"] = std::move(tuning);
    }
    return doc.dump(2) + "\n";
}

BundleManifest bundle_manifest_from_json(const std::string& text, const std::string& where) {
    json doc;
    try {
        doc = json::parse(text);
    } catch (const json::exception& e) {
        user_error << where << " is not JSON (" << e.what() << "); a bundle's manifest.json is written by attnjit-aot";
    }
    user_check(doc.is_object() && doc.contains("format") && doc["format"].is_string())
        << where << " is not an attnjit bundle manifest (no \"format\" key); bundles are written by attnjit-aot";
    const std::string format = doc["format"].get<std::string>();
    user_check(format == kBundleFormat) << where << " has format \"" << format << "\"; this attnjit reads \""
                                        << kBundleFormat << "\": rebuild the bundle with this attnjit's attnjit-aot";
    BundleManifest m;
    try {
        m.attnjit_version = doc.at("attnjit_version").get<std::string>();
        m.generator_version = doc.at("generator_version").get<int>();
        m.templates_hash = doc.at("templates_hash").get<std::string>();
        m.entry_format = doc.at("entry_format").get<int>();
        m.toolchain = doc.at("toolchain").get<std::string>();
        for (const json& k : doc.at("kernels")) {
            BundleKernel b;
            b.index_key = k.at("index_key").get<std::string>();
            b.name = k.at("name").get<std::string>();
            b.arch = k.at("arch").get<std::string>();
            b.config = k.at("config").get<std::string>();
            b.spec = k.at("spec").get<std::string>();
            user_check(is_hex_key(b.index_key))
                << where << ": kernel \"" << b.name << "\" has index_key \"" << b.index_key
                << "\", not 64 lowercase hex digits; the manifest was changed by hand or damaged: rebuild the bundle";
            m.kernels.push_back(std::move(b));
        }
        if (doc.contains("tuning"))
            for (const json& t : doc.at("tuning")) {
                BundleTuning b;
                b.key.spec = t.at("spec").get<std::string>();
                b.key.kind = t.at("kind").get<std::string>();
                b.key.device = t.at("device").get<std::string>();
                b.key.arch = t.at("arch").get<std::string>();
                b.key.generator_version = t.at("generator_version").get<int>();
                b.key.candidates = t.at("candidates").get<std::string>();
                b.key.toolchain = t.at("tuned_with").get<std::string>();
                b.bucket = t.at("bucket").get<std::string>();
                const auto result = tuning_result_from_json(nlohmann::ordered_json(t.at("result")));
                user_check(result.has_value())
                    << where << ": the tuned choice for bucket " << b.bucket << " on " << b.key.device
                    << " is not one attnjit-aot writes; rebuild the bundle";
                b.result = *result;
                m.tuning.push_back(std::move(b));
            }
    } catch (const json::exception& e) {
        user_error << where << " is not a complete bundle manifest (" << e.what()
                   << "); rebuild the bundle with attnjit-aot";
    }
    std::set<std::string> seen;
    for (const BundleKernel& k : m.kernels)
        user_check(seen.insert(k.index_key).second)
            << where << " lists kernel " << k.index_key << " twice; rebuild the bundle with attnjit-aot";
    return m;
}

BundleManifest current_bundle_manifest() {
    BundleManifest m;
    m.attnjit_version = ATTNJIT_VERSION_STRING;
    m.generator_version = codegen::kGeneratorVersion;
    m.templates_hash = codegen::templates_hash();
    m.entry_format = kCompiledKernelFormatVersion;
    return m;
}

std::string why_bundle_is_stale(const BundleManifest& m) {
    const BundleManifest now = current_bundle_manifest();
    if (m.generator_version == now.generator_version && m.templates_hash == now.templates_hash &&
        m.entry_format == now.entry_format)
        return "";
    std::ostringstream os;
    os << "it was made by attnjit " << m.attnjit_version << " (generator " << m.generator_version << ", templates "
       << m.templates_hash.substr(0, 12) << ", entry format " << m.entry_format << ") and this library is attnjit "
       << now.attnjit_version << " (generator " << now.generator_version << ", templates "
       << now.templates_hash.substr(0, 12) << ", entry format " << now.entry_format
       << "), whose kernels it cannot hold; rebuild the bundle with this attnjit's attnjit-aot";
    return os.str();
}

std::shared_ptr<const KernelBundle> KernelBundle::open(const std::string& directory) {
    user_check(!directory.empty()) << "load_bundle: the bundle directory is empty; pass the --out directory of "
                                      "attnjit-aot";
    std::string why;
    const std::string path = directory + "/manifest.json";
    const auto text = read_regular_file(path, kMaxManifestBytes, &why);
    user_check(text.has_value()) << "cannot open kernel bundle " << directory << ": " << why
                                 << "; a bundle is the --out directory of attnjit-aot";
    std::shared_ptr<KernelBundle> b(new KernelBundle());
    b->name_ = directory;
    b->directory_ = directory;
    b->manifest_ = bundle_manifest_from_json(*text, path);
    const std::string stale = why_bundle_is_stale(b->manifest_);
    user_check(stale.empty()) << "kernel bundle " << directory << " cannot be used: " << stale;
    return b;
}

std::shared_ptr<const KernelBundle> KernelBundle::linked(const std::string& name, std::string_view manifest,
                                                         const std::vector<std::string_view>& entries) {
    std::shared_ptr<KernelBundle> b(new KernelBundle());
    b->name_ = name;
    b->manifest_ = bundle_manifest_from_json(std::string(manifest), "the manifest of linked bundle " + name);
    const std::string stale = why_bundle_is_stale(b->manifest_);
    user_check(stale.empty()) << "linked kernel bundle " << name << " cannot be used: " << stale;
    user_check(entries.size() == b->manifest_.kernels.size())
        << "linked kernel bundle " << name << " has " << entries.size() << " entries for "
        << b->manifest_.kernels.size() << " kernels in its manifest";
    b->linked_ = entries;
    return b;
}

std::optional<CompiledKernel> KernelBundle::find(const std::string& index_key, std::string* why_not) const {
    const auto& ks = manifest_.kernels;
    const auto it = std::find_if(ks.begin(), ks.end(), [&](const BundleKernel& k) { return k.index_key == index_key; });
    if (it == ks.end()) return std::nullopt;
    std::string bytes, why, where;
    std::string_view entry;  // a linked entry is read where it is linked
    if (directory_.empty()) {
        entry = linked_[static_cast<size_t>(it - ks.begin())];
        where = "linked bundle " + name_ + ", kernel " + it->name;
    } else {
        where = directory_ + "/kernels/" + index_key + ".kernel";
        RegularFile file(where);
        const Read read = read_entry(file, bytes, why);
        if (read != Read::kDone) {
            if (why_not) *why_not = where + ": " + (read == Read::kCorrupt ? why : "missing or unreadable");
            return std::nullopt;
        }
        entry = bytes;
    }
    std::optional<CompiledKernel> k = deserialize(entry, &why);
    if (!k && why_not) *why_not = where + ": " + why;
    return k;
}

BundleRegistry& BundleRegistry::global() {
    static BundleRegistry* registry = new BundleRegistry();
    return *registry;
}

void BundleRegistry::add(std::shared_ptr<const KernelBundle> bundle) {
    std::lock_guard<std::mutex> lock(mu_);
    bundles_.push_back(std::move(bundle));
}

void BundleRegistry::add_problem(const std::string& problem) {
    std::cerr << "attnjit: warning: " << problem << std::endl;
    std::lock_guard<std::mutex> lock(mu_);
    problems_.push_back(problem);
}

std::optional<TuningResult> BundleRegistry::find_tuning(const TuningKey& key, const std::string& bucket) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& b : bundles_)
        for (const BundleTuning& t : b->manifest().tuning)
            if (t.bucket == bucket && t.key.device == key.device && t.key.same_but_gpu_and_compiler(key))
                return t.result;
    return std::nullopt;
}

std::optional<BundleRegistry::Hit> BundleRegistry::find(const std::string& index_key,
                                                        const codegen::KernelSource& source,
                                                        const std::string& arch) const {
    std::vector<std::shared_ptr<const KernelBundle>> bundles;
    {
        std::lock_guard<std::mutex> lock(mu_);
        bundles = bundles_;
    }
    for (const auto& b : bundles) {
        std::string why;
        std::optional<CompiledKernel> k = b->find(index_key, &why);
        if (k) {
            // The key the bundle's compiler gave this source: an entry of another spec with the
            // same tile (the same symbol, sizes and config) differs here.
            why = k->key == kernel_key(source, arch, b->manifest().toolchain)
                      ? why_entry_does_not_match(*k, source, arch)
                      : "it was compiled from another source (its key differs)";
            if (why.empty()) return Hit{std::move(*k), b->name()};
            why = "kernel bundle " + b->name() + " holds an entry for " + source.name + " that is not it: " + why;
        }
        if (why.empty()) continue;  // not in this bundle
        std::lock_guard<std::mutex> lock(mu_);
        if (std::find(warned_.begin(), warned_.end(), why) == warned_.end()) {
            warned_.push_back(why);
            std::cerr << "attnjit: warning: not using a bundled kernel: " << why
                      << " (the kernel is taken from the disk cache or compiled instead)" << std::endl;
        }
    }
    return std::nullopt;
}

std::string BundleRegistry::describe() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::ostringstream os;
    for (const auto& b : bundles_) {
        std::map<std::string, int> per_arch;
        for (const BundleKernel& k : b->manifest().kernels) ++per_arch[k.arch];
        os << (os.tellp() > 0 ? "; " : "") << "bundle " << b->name() << " (";
        bool first = true;
        for (const auto& [arch, n] : per_arch) {
            os << (first ? "" : ", ") << n << " for " << arch;
            first = false;
        }
        os << (per_arch.empty() ? "no kernels)" : ")");
    }
    for (const std::string& p : problems_) os << (os.tellp() > 0 ? "; " : "") << p;
    return os.str();
}

size_t BundleRegistry::size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bundles_.size();
}

void BundleRegistry::clear() {
    std::lock_guard<std::mutex> lock(mu_);
    bundles_.clear();
    problems_.clear();
    warned_.clear();
}

void write_bundle(const std::string& directory, const BundleManifest& manifest,
                  const std::vector<CompiledKernel>& kernels) {
    internal_check(kernels.size() == manifest.kernels.size())
        << "write_bundle: " << kernels.size() << " entries for " << manifest.kernels.size() << " manifest kernels";
    // The directory and its missing parents.
    for (size_t slash = directory.find('/', 1);; slash = directory.find('/', slash + 1)) {
        const std::string dir = slash == std::string::npos ? directory : directory.substr(0, slash);
        if (!dir.empty() && ::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
            environment_error << "cannot create directory " << dir << ": " << std::strerror(errno);
        if (slash == std::string::npos) break;
    }
    const std::string kernels_dir = directory + "/kernels";
    if (::mkdir(kernels_dir.c_str(), 0755) != 0 && errno != EEXIST)
        environment_error << "cannot create directory " << kernels_dir << ": " << std::strerror(errno);
    // Entries an earlier bundle left there that this one does not list go.
    std::set<std::string> listed;
    for (const BundleKernel& k : manifest.kernels) listed.insert(k.index_key + ".kernel");
    if (DIR* d = ::opendir(kernels_dir.c_str())) {
        while (const dirent* e = ::readdir(d)) {
            const std::string name = e->d_name;
            if (name.size() > 7 && name.compare(name.size() - 7, 7, ".kernel") == 0 && !listed.count(name))
                ::unlink((kernels_dir + "/" + name).c_str());
        }
        ::closedir(d);
    }
    auto write = [](const std::string& path, const std::string& data) {
        const char* step = "";
        if (const int err = replace_file(path, data, 0644, /*durable=*/false, &step))
            environment_error << "cannot write " << path << " (" << step << ": " << std::strerror(err) << ")";
    };
    for (size_t i = 0; i < kernels.size(); ++i)
        write(directory + "/kernels/" + manifest.kernels[i].index_key + ".kernel", serialize(kernels[i]));
    write(directory + "/manifest.json", to_json(manifest));  // last: a bundle is whole once it has one
}

size_t load_bundle(const std::string& directory) {
    auto bundle = KernelBundle::open(directory);
    const size_t n = bundle->manifest().kernels.size();
    BundleRegistry::global().add(std::move(bundle));
    return n;
}

void register_linked_bundle(const char* name, const char* manifest, size_t manifest_size,
                            const unsigned char* const* entries, const size_t* entry_sizes, size_t count) noexcept {
    const std::string bundle_name = name ? name : "(unnamed)";
    try {
        user_check(manifest && (count == 0 || (entries && entry_sizes)))
            << "register_linked_bundle: a null manifest, entries or sizes";
        std::vector<std::string_view> views;
        for (size_t i = 0; i < count; ++i)
            views.emplace_back(reinterpret_cast<const char*>(entries[i]), entry_sizes[i]);
        BundleRegistry::global().add(KernelBundle::linked(bundle_name, std::string_view(manifest, manifest_size), views));
    } catch (const std::exception& e) {
        try {
            BundleRegistry::global().add_problem(std::string("linked kernel bundle ") + bundle_name +
                                                 " is not used: " + e.what());
        } catch (...) {
        }
    }
}

}  // namespace attnjit::runtime
