#include "runtime/params_packer.h"

#include <cstring>

#include "support/error.h"

namespace attnjit::runtime {
namespace {

void put(std::vector<unsigned char>& bytes, const codegen::ParamsField& f, const void* value, size_t size) {
    internal_check(f.offset >= 0 && f.offset + size <= bytes.size())
        << "params field '" << f.name << "' at offset " << f.offset << " does not fit";
    std::memcpy(bytes.data() + f.offset, value, size);
}

template <class T>
const T& find(const std::map<std::string, T>& m, const std::string& name) {
    auto it = m.find(name);
    internal_check(it != m.end()) << "params field '" << name << "' has no value; arguments must be checked first";
    return it->second;
}

}  // namespace

std::vector<unsigned char> pack_params(const codegen::ParamsLayout& layout, const void* args_block,
                                       size_t args_block_size, const std::map<std::string, double>& scalars,
                                       const std::map<std::string, TensorView>& tensors) {
    std::vector<unsigned char> bytes(layout.size, 0);
    for (const auto& f : layout.fields) {
        using Kind = codegen::ParamsField::Kind;
        switch (f.kind) {
        case Kind::Args:
            internal_check(static_cast<size_t>(f.size) == args_block_size)
                << "argument block of " << args_block_size << " bytes for a field of " << f.size;
            put(bytes, f, args_block, args_block_size);
            break;
        case Kind::FloatScalar: {
            const float v = static_cast<float>(find(scalars, f.name));
            put(bytes, f, &v, sizeof v);
            break;
        }
        case Kind::IntScalar: {
            const int v = static_cast<int>(find(scalars, f.name));
            put(bytes, f, &v, sizeof v);
            break;
        }
        case Kind::Tensor: {
            const TensorView& t = find(tensors, f.name);
            internal_check(f.size == static_cast<int>(8 + 8 * t.strides.size()))
                << "params field '" << f.name << "' has size " << f.size << " for rank " << t.strides.size();
            std::vector<unsigned char> arg(f.size);
            std::memcpy(arg.data(), &t.data, 8);
            for (size_t d = 0; d < t.strides.size(); ++d) {
                const long long s = t.strides[d];
                std::memcpy(arg.data() + 8 + 8 * d, &s, sizeof s);
            }
            put(bytes, f, arg.data(), arg.size());
            break;
        }
        case Kind::Grad:
        case Kind::GradWork:
            break;  // gradient outputs: packed by the backward's launch (api/backward_launch.cpp)
        }
    }
    return bytes;
}

}  // namespace attnjit::runtime
