// Constants the kernels and the host must agree on. Plain C++ with no includes (host and
// NVRTC). The kernels compute softmax with exp2 and fold log2(e) into the scale; the host
// computes ForwardArgs::scale_log2 with the same value.
#pragma once

namespace attnjit {

constexpr double kLog2eD = 1.4426950408889634;  // log2(e)
constexpr double kLn2D = 0.6931471805599453;    // ln(2)
constexpr float kLog2e = 1.4426950408889634f;  // the same digits, rounded once
constexpr float kLn2 = 0.6931471805599453f;

}  // namespace attnjit
