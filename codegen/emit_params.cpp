#include "codegen/emit_params.h"

namespace attnjit::codegen {

void emit_params(SourceWriter& w, const ParamsLayout& layout) {
    w.line("// Field order and offsets: codegen::ParamsLayout (the host packs this struct byte for byte).");
    w.open("struct Params");
    for (const auto& f : layout.fields) {
        std::string comment = f.kind == ParamsField::Kind::Args
                                  ? ""
                                  : "  // " + std::string(params_field_kind_name(f.kind)) + " '" + f.name + "'";
        w.line(f.c_type + " " + f.c_name + ";" + comment);
    }
    w.close(";");
    // NVRTC has no offsetof, so each field's size and alignment are checked instead:
    // with the field order above, C's layout rules then give exactly ParamsLayout's
    // offsets (each is the previous end rounded up to the field's alignment).
    for (const auto& f : layout.fields)
        w.line("static_assert(sizeof(" + f.c_type + ") == " + std::to_string(f.size) + " && alignof(" + f.c_type +
               ") == " + std::to_string(f.align) + ", \"Params::" + f.c_name + " (offset " +
               std::to_string(f.offset) + ") differs from codegen::ParamsLayout\");");
    w.line("static_assert(sizeof(Params) == " + std::to_string(layout.size) + " && alignof(Params) == " +
           std::to_string(layout.align) + ", \"sizeof(Params) differs from codegen::ParamsLayout\");");
}

}  // namespace attnjit::codegen
