# attnjit_add_kernel_bundle(<target> SPECS <file>... ARCHS <arch>...
#                           [NAME <name>] [BACKWARD auto|yes|no] [GRADS <name>...] [TUNING <dir>]
#                           [C_API])
#
# Compiles at build time, with attnjit-aot, every kernel that the specs (JSON spec files,
# docs/spec_format.md) need on the architectures into a kernel bundle, and links it into
# <target> (an executable or a shared library; in a static library the linker may drop it).
# At run time the program finds those kernels before its disk cache and NVRTC: a process
# whose kernels are all bundled never loads NVRTC (docs/aot.md).
#   NAME      the bundle's name in messages (default: <target>_kernels)
#   BACKWARD  the backward's kernels: auto (specs that return their LSE; the default), yes, no
#   GRADS     the backward's gradients of captured tensors and scalars (CompileOptions.grads)
#   TUNING    a cache directory whose tuning database adds the autotuner's chosen configurations
#             of the specs, and the choices (attnjit-aot --tuning, docs/autotune.md); the database
#             is not a dependency: after tuning again, rebuild the bundle (touch a spec file)
#   C_API     <target> uses libattnjit_c (attnjit::attnjit_c), not the C++ libraries
# <target> must link attnjit::attnjit (or with C_API attnjit::attnjit_c) itself. Building the
# bundle compiles its kernels with NVRTC (through the disk cache, ATTNJIT_CACHE_DIR).
# The bundle directory is <build dir>/<name>.bundle; the generated source <name>_bundle.cpp.
function(attnjit_add_kernel_bundle target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "C_API" "NAME;BACKWARD;TUNING" "SPECS;ARCHS;GRADS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "attnjit_add_kernel_bundle(${target}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "attnjit_add_kernel_bundle: ${target} is not a target; add_executable or add_library it first")
  endif()
  # The generated source is a custom command's output, which only targets of this directory take.
  get_target_property(target_dir ${target} SOURCE_DIR)
  if(NOT target_dir STREQUAL CMAKE_CURRENT_SOURCE_DIR)
    message(FATAL_ERROR "attnjit_add_kernel_bundle(${target}): call it in the directory that creates ${target} "
                        "(${target_dir})")
  endif()
  if(NOT arg_SPECS OR NOT arg_ARCHS)
    message(FATAL_ERROR "attnjit_add_kernel_bundle(${target}): give SPECS (spec files) and ARCHS (e.g. sm_80 sm_90a)")
  endif()
  if(TARGET attnjit::attnjit-aot)
    set(aot attnjit::attnjit-aot)
  elseif(TARGET attnjit-aot)
    set(aot attnjit-aot)
  else()
    message(FATAL_ERROR "attnjit_add_kernel_bundle: no attnjit-aot target; find_package(attnjit) first")
  endif()
  set(name "${arg_NAME}")
  if(NOT name)
    set(name "${target}_kernels")
  endif()
  if(NOT name MATCHES "^[A-Za-z0-9_.-]+$")
    message(FATAL_ERROR "attnjit_add_kernel_bundle(${target}): NAME '${name}' may hold letters, digits, _ . - only")
  endif()
  set(backward "${arg_BACKWARD}")
  if(NOT backward)
    set(backward auto)
  endif()
  set(specs "")
  foreach(spec IN LISTS arg_SPECS)
    get_filename_component(spec "${spec}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND specs "${spec}")
  endforeach()
  list(JOIN arg_ARCHS "," archs)
  set(grads "")
  if(arg_GRADS)
    list(JOIN arg_GRADS "," grads_list)
    set(grads --grads "${grads_list}")
  endif()
  set(tuning "")
  if(arg_TUNING)
    get_filename_component(tuning_dir "${arg_TUNING}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    set(tuning --tuning "${tuning_dir}")
  endif()
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/${name}.bundle")
  set(cpp "${CMAKE_CURRENT_BINARY_DIR}/${name}_bundle.cpp")
  # An instrumented attnjit-aot (attnjit's own sanitizer build) runs without LeakSanitizer's
  # exit-time check, which crashed after NVRTC compiles (tests/nvrtc/CMakeLists.txt).
  set(launch "")
  if(ATTNJIT_SANITIZE)
    set(launch ${CMAKE_COMMAND} -E env "ASAN_OPTIONS=detect_leaks=0")
  endif()
  add_custom_command(OUTPUT "${cpp}" BYPRODUCTS "${dir}/manifest.json"
    COMMAND ${CMAKE_COMMAND} -E rm -rf "${dir}"
    COMMAND ${launch} $<TARGET_FILE:${aot}> --specs ${specs} --arch ${archs} --out "${dir}" --cpp "${cpp}"
            --name "${name}" --backward ${backward} ${grads} ${tuning} --quiet
    DEPENDS ${specs} ${aot}
    COMMENT "attnjit-aot: kernel bundle ${name} (${archs})"
    VERBATIM)
  target_sources(${target} PRIVATE "${cpp}")
  if(arg_C_API)
    set_source_files_properties("${cpp}" PROPERTIES COMPILE_DEFINITIONS ATTNJIT_BUNDLE_C_API)
  endif()
endfunction()
