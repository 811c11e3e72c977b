// debug(n) << ...: a line on stderr when ATTNJIT_DEBUG >= n.
#pragma once

#include <iostream>
#include <sstream>

#include "support/env.h"

namespace attnjit {

class DebugLine {
public:
    explicit DebugLine(int level) : on_(env::debug_level() >= level) {}
    ~DebugLine() {
        if (on_) std::cerr << "[attnjit] " << s_.str() << "\n";
    }
    template <class T>
    DebugLine& operator<<(const T& x) {
        if (on_) s_ << x;
        return *this;
    }

private:
    bool on_;
    std::ostringstream s_;
};

inline DebugLine debug(int level) { return DebugLine(level); }

}  // namespace attnjit
