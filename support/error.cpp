#include "support/error.h"

namespace attnjit::detail {

template <>
std::string ErrorReporter<UserError>::finish() const {
    return "attnjit: " + msg_.str();
}

template <>
std::string ErrorReporter<InternalError>::finish() const {
    std::ostringstream s;
    s << "attnjit internal error at " << file_ << ":" << line_ << " (" << condition_
      << "): " << msg_.str()
      << "\nThis is a bug in attnjit, not in your code; please report it with this message.";
    return s.str();
}

template <>
std::string ErrorReporter<EnvironmentError>::finish() const {
    return "attnjit: " + msg_.str();
}

}  // namespace attnjit::detail
