#include "runtime/compile_dump.h"

#include <atomic>
#include <cstring>
#include <iostream>

#include "runtime/private_dir.h"
#include "runtime/safe_file.h"
#include "support/debug.h"
#include "support/env.h"

namespace attnjit::runtime {

std::string compile_dump_stem(const std::string& dir, const codegen::KernelSource& source,
                              const std::string& program_name, const std::string& arch) {
    std::string base = program_name;
    if (base.size() > 3 && base.compare(base.size() - 3, 3, ".cu") == 0) base.resize(base.size() - 3);
    return dir + "/" + base + "." + source.content_hash().substr(0, 16) + "." + arch;
}

std::string write_compile_dump(const std::string& stem, const std::string& source,
                               const std::vector<std::string>& options, const std::string& log) {
    const std::string dir = stem.substr(0, stem.find_last_of('/'));
    if (int err = make_private_dirs(dir))
        return "cannot create directory " + dir + " (" + std::strerror(err) + ")";
    std::string opts;
    for (const auto& o : options) opts += o + "\n";
    const std::pair<const char*, const std::string*> files[] = {
        {".cu", &source}, {".options.txt", &opts}, {".log.txt", &log}};
    for (const auto& [suffix, text] : files) {
        const std::string path = stem + suffix;
        const char* step = "";
        if (int err = replace_file(path, *text, 0644, /*durable=*/false, &step))
            return std::string("cannot ") + step + " " + path + " (" + std::strerror(err) + ")";
    }
    return "";
}

void dump_compile_if_requested(const codegen::KernelSource& source,
                               const std::string& program_name, const std::string& arch,
                               const std::vector<std::string>& options, const std::string& log) {
    auto dir = env::dump_dir();
    if (!dir) return;
    const std::string stem = compile_dump_stem(*dir, source, program_name, arch);
    std::string error = write_compile_dump(stem, source.source, options, log);
    static std::atomic<bool> warned{false};
    if (error.empty())
        debug(1) << "dumped " << stem << ".{cu,options.txt,log.txt}";
    else if (!warned.exchange(true))
        std::cerr << "attnjit: warning: ATTNJIT_DUMP_DIR=" << *dir << ": " << error
                  << "; continuing without compile dumps (further failures are not "
                     "reported)\n";
}

}  // namespace attnjit::runtime
