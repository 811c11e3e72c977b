// The exceptions attnjit throws: the public half of the error model (support/error.h, which
// is internal, adds the checks that throw them). Two kinds never mixed (after Halide's
// Error.h):
//  - UserError: the caller did something wrong. The message says what, where, and what
//    to do instead. Subclasses say which stage noticed it.
//  - InternalError: attnjit itself is wrong. The message says so and asks for a report.
//  - EnvironmentError: the driver, NVRTC or the GPU refused something.
#pragma once

#include <stdexcept>

namespace attnjit {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A mistake in how attnjit was used: bad DSL, bad spec, bad launch arguments.
class UserError : public Error {
public:
    using Error::Error;
};

// A bug in attnjit. Never caused by user input.
class InternalError : public Error {
public:
    using Error::Error;
};

// The environment failed: libcuda/libnvrtc missing, a CUDA call failed, NVRTC rejected
// generated code. Carries whatever log the failing component produced.
class EnvironmentError : public Error {
public:
    using Error::Error;
};

}  // namespace attnjit
