// Indented CUDA text, one statement or comment per line: what every emitter writes into.
#pragma once

#include <sstream>
#include <string>

namespace attnjit::codegen {

class SourceWriter {
public:
    void line(const std::string& s = "") { out_ << (s.empty() ? "" : std::string(indent_ * 4, ' ') + s) << "\n"; }
    void open(const std::string& s) {
        line(s + " {");
        ++indent_;
    }
    void close(const std::string& tail = "") {
        --indent_;
        line("}" + tail);
    }
    std::string str() const { return out_.str(); }

private:
    std::ostringstream out_;
    int indent_ = 0;
};

}  // namespace attnjit::codegen
