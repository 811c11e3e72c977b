#include "runtime/source_excerpt.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace attnjit::runtime {
namespace {

std::vector<std::string_view> split_lines(std::string_view s) {
    std::vector<std::string_view> lines;
    size_t start = 0;
    while (start <= s.size()) {
        size_t end = s.find('\n', start);
        if (end == std::string_view::npos) {
            if (start < s.size()) lines.push_back(s.substr(start));
            break;
        }
        lines.push_back(s.substr(start, end - start));
        start = end + 1;
    }
    return lines;
}

// Parses the digits at `pos`; -1 if there are none.
int number_at(std::string_view s, size_t pos) {
    int v = -1;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
        v = (v < 0 ? 0 : v * 10) + (s[pos] - '0');
        ++pos;
    }
    return v;
}

}  // namespace

std::vector<int> error_lines(std::string_view log, std::string_view file_name) {
    std::set<int> lines;
    const std::string paren = std::string(file_name) + "(";
    for (size_t p = log.find(paren); p != std::string_view::npos; p = log.find(paren, p + 1)) {
        // Only a whole file name: the character before must not continue a path.
        if (p > 0 && log[p - 1] != '\n' && log[p - 1] != ' ' && log[p - 1] != '"') continue;
        if (int n = number_at(log, p + paren.size()); n > 0) lines.insert(n);
    }
    const std::string at = "at line ";
    const std::string of = " of " + std::string(file_name);
    for (size_t p = log.find(at); p != std::string_view::npos; p = log.find(at, p + 1)) {
        size_t q = p + at.size();
        int n = number_at(log, q);
        while (q < log.size() && log[q] >= '0' && log[q] <= '9') ++q;
        if (n > 0 && log.substr(q, of.size()) == of) lines.insert(n);
    }
    return {lines.begin(), lines.end()};
}

std::string numbered_excerpt(std::string_view source, const std::vector<int>& marked,
                             int context, int max_full_lines) {
    auto lines = split_lines(source);
    const int n = static_cast<int>(lines.size());
    std::set<int> mark(marked.begin(), marked.end());
    std::vector<bool> show(n + 1, false);
    if (n <= max_full_lines) {
        std::fill(show.begin(), show.end(), true);
    } else if (mark.empty()) {
        for (int i = 1; i <= max_full_lines; ++i) show[i] = true;
    } else {
        for (int m : mark)
            for (int i = std::max(1, m - context); i <= std::min(n, m + context); ++i)
                show[i] = true;
    }
    const int width = static_cast<int>(std::to_string(n).size());
    std::string out;
    bool gap = false;
    for (int i = 1; i <= n; ++i) {
        if (!show[i]) {
            gap = true;
            continue;
        }
        if (gap && !out.empty()) out += "    ...\n";
        gap = false;
        char prefix[32];
        std::snprintf(prefix, sizeof(prefix), "%c %*d | ", mark.count(i) ? '>' : ' ', width, i);
        out += prefix;
        out += lines[i - 1];
        out += '\n';
    }
    if (gap) out += "    ...\n";
    return out;
}

}  // namespace attnjit::runtime
