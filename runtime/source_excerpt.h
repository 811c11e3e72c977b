// Numbered source excerpts for compile errors (jitify's print_with_line_numbers): a
// reader sees the generated lines NVRTC complained about without opening a dump.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace attnjit::runtime {

// Line numbers in `file_name` that NVRTC's log blames: "file(12): error ..." and
// "... at line 12 of file" (errors inside a template instantiated from that file).
// Sorted, unique.
std::vector<int> error_lines(std::string_view log, std::string_view file_name);

// The source with right-aligned line numbers; lines in `marked` start with '>'. When the
// source has more than `max_full_lines` lines, only `context` lines either side of each
// marked line are shown ("..." between gaps), or the first `max_full_lines` lines when
// nothing is marked.
std::string numbered_excerpt(std::string_view source, const std::vector<int>& marked,
                             int context = 3, int max_full_lines = 80);

}  // namespace attnjit::runtime
