// The C launch arguments -> attnjit::LaunchArgs conversion shared by attnjit_launch and
// attnjit_launch_backward (launch_args.h).
#include "capi/launch_args.h"

#include <algorithm>
#include <array>
#include <ostream>
#include <string_view>
#include <vector>

#include "support/error.h"

namespace attnjit::capi {

std::ostream& operator<<(std::ostream& os, const ArgName& a) {
    os << a.owner << "->" << a.field;
    if (a.index >= 0) os << "[" << a.index << "]";
    if (a.name) os << " ('" << a.name << "')";
    return os;
}

namespace {

// A few kernels per thread (models alternate between variants, e.g. local and global
// layers); the least recently bound slot is rebound when none matches.
constexpr size_t kScratchPerThread = 4;
thread_local std::array<Scratch, kScratchPerThread> scratches;
thread_local size_t next_victim = 0;
thread_local std::vector<unsigned char> seen;  // duplicate detection for named arguments

}  // namespace

Scratch& scratch_for(uint64_t handle_id, const attnjit_spec& spec) {
    for (Scratch& s : scratches)
        if (s.kernel_id == handle_id) return s;
    Scratch& s = scratches[next_victim];
    next_victim = (next_victim + 1) % kScratchPerThread;
    s.kernel_id = 0;  // unbound until fully built (an allocation below may throw)
    s.args.tensors.clear();
    s.args.scalars.clear();
    s.tensor_slots.clear();
    s.scalar_slots.clear();
    for (const auto& t : spec.tensors) s.tensor_slots.push_back(&s.args.tensors[t.name]);
    for (const auto& x : spec.scalars) s.scalar_slots.push_back(&s.args.scalars[x.name]);
    s.kernel_id = handle_id;
    return s;
}

void to_view(const attnjit_tensor& t, const ArgName& what, TensorView& view) {
    user_check(attnjit::capi::is_dtype_code(t.dtype))
        << what << ".dtype is " << t.dtype << "; use an attnjit_dtype value (ATTNJIT_F16 = 0 ... ATTNJIT_U8 = 5)";
    user_check(t.rank >= 0 && t.rank <= ATTNJIT_MAX_RANK)
        << what << ".rank is " << t.rank << "; it must be in [0, " << ATTNJIT_MAX_RANK << "]";
    view.data = t.data;
    view.dtype = attnjit::capi::dtype_from_code(t.dtype);
    view.shape.assign(t.shape, t.shape + t.rank);  // reuses the vector's storage
    view.strides.assign(t.strides, t.strides + t.rank);
}

namespace {

// Index of `name` in the sorted list, or -1.
template <class Input>
int find_input(const std::vector<Input>& inputs, const char* name) {
    const std::string_view n(name);
    auto it = std::lower_bound(inputs.begin(), inputs.end(), n,
                               [](const Input& in, std::string_view key) { return std::string_view(in.name) < key; });
    return it != inputs.end() && it->name == n ? static_cast<int>(it - inputs.begin()) : -1;
}

// The spec's names for messages: "'bias', 'slopes'" or "none".
template <class Input>
struct NameList {
    const std::vector<Input>& inputs;
};
template <class Input>
std::ostream& operator<<(std::ostream& os, const NameList<Input>& l) {
    if (l.inputs.empty()) return os << "none";
    for (size_t i = 0; i < l.inputs.size(); ++i) os << (i ? ", " : "") << "'" << l.inputs[i].name << "'";
    return os;
}

// The fields of attnjit_launch_args that pass one kind of argument, for messages.
struct ListFields {
    const char* kind;    // "captured tensors"
    const char* one;     // "captured tensor"
    const char* count;   // "num_tensors"
    const char* names;   // "tensor_names"
    const char* values;  // "tensors"
    const char* query;   // how the caller can list what the spec reads
};
constexpr ListFields kTensorFields{"captured tensors", "captured tensor", "num_tensors", "tensor_names", "tensors",
                                   "attnjit_spec_num_tensors and attnjit_spec_tensor"};
constexpr ListFields kScalarFields{"runtime scalars", "runtime scalar", "num_scalars", "scalar_names", "scalars",
                                   "attnjit_spec_num_scalars and attnjit_spec_scalar"};

// Checks the count, the arrays and (named form) the names of one kind of argument.
// Returns true for the named form.
template <class Input, class Value>
bool check_list(const ListFields& f, int32_t count, const char* const* names, const Value* values,
                const std::vector<Input>& inputs) {
    const NameList<Input> wanted{inputs};
    const char* kind = f.kind;
    const char* names_field = f.names;
    user_check(count == static_cast<int32_t>(inputs.size()))
        << "args->" << f.count << " is " << count << " but the spec reads " << inputs.size() << " "
        << (inputs.size() == 1 ? f.one : kind)
        << " (" << wanted << (inputs.size() > 1 ? ", in this positional order" : "") << "); pass exactly those ("
        << f.query << " list them)";
    user_check(count == 0 || values) << "args->" << f.values << " is null but args->" << f.count << " is " << count
                                     << "; pass an array of " << count << " values";
    if (!names || count == 0) return false;
    seen.assign(inputs.size(), 0);
    for (int32_t i = 0; i < count; ++i) {
        user_check(names[i]) << "args->" << names_field << "[" << i << "] is null; pass the name of one of the "
                             << kind << " the spec reads (" << wanted << "), or set args->" << names_field
                             << " to NULL to pass them positionally";
        const int at = find_input(inputs, names[i]);
        user_check(at >= 0) << "args->" << names_field << "[" << i << "] is '" << names[i] << "', which the spec "
                            << "does not read; the spec's " << kind << " are " << wanted;
        user_check(!seen[static_cast<size_t>(at)]) << "args->" << names_field << "[" << i << "] '" << names[i]
                                                   << "' is given twice; give each of " << wanted << " once";
        seen[static_cast<size_t>(at)] = 1;
    }
    return true;  // count == inputs.size() and no duplicates: every input is given
}

}  // namespace

void fill(Scratch& s, const attnjit_spec& spec, const attnjit_launch_args& a) {
    to_view(a.q, {"q"}, s.args.q);
    to_view(a.k, {"k"}, s.args.k);
    to_view(a.v, {"v"}, s.args.v);
    to_view(a.o, {"o"}, s.args.o);
    if (a.lse) {
        if (!s.args.lse) s.args.lse.emplace();
        to_view(*a.lse, {"lse"}, *s.args.lse);
    } else {
        s.args.lse.reset();
    }

    const auto& tensors = spec.tensors;
    const bool named_tensors = check_list(kTensorFields, a.num_tensors, a.tensor_names, a.tensors, tensors);
    for (int32_t i = 0; i < a.num_tensors; ++i) {
        const int at = named_tensors ? find_input(tensors, a.tensor_names[i]) : i;
        to_view(a.tensors[i], {"tensors", i, tensors[static_cast<size_t>(at)].name.c_str()},
                *s.tensor_slots[static_cast<size_t>(at)]);
    }

    const auto& scalars = spec.scalars;
    const bool named_scalars = check_list(kScalarFields, a.num_scalars, a.scalar_names, a.scalars, scalars);
    for (int32_t i = 0; i < a.num_scalars; ++i) {
        const int at = named_scalars ? find_input(scalars, a.scalar_names[i]) : i;
        *s.scalar_slots[static_cast<size_t>(at)] = a.scalars[i];
    }
}

}  // namespace attnjit::capi
