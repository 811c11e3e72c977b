# Installs the build tree into a scratch prefix, then checks the package:
#  1. the installed CMake files name no path of this machine's CUDA toolkit (no
#     "/usr/local/cuda", nor the toolkit this build used), nor the source or build tree, and
#     carry cxx_std_17 as a usage requirement; bin/attnjit-gen is installed and runs;
#  2. the consumer project (tests/install/consumer) builds and runs against it with
#     find_package(attnjit): the C++ consumer and the C one;
#  3. a consumer that sets no C++ standard (tests/install/consumer_no_std) builds against it
#     with the CUDA toolkit at another prefix (a tree of symlinks under WORK_DIR, passed as
#     CUDAToolkit_ROOT): its compile commands take cuda.h from there and -std=c++17 from
#     the package, and it runs;
#  4. (in 2.) attnjit_add_kernel_bundle from the package links a kernel bundle into a program
#     that then runs with NVRTC unloadable and no disk cache.
# Inputs: BUILD_DIR, SOURCE_DIR, WORK_DIR, CUDA_ROOT (the toolkit the build used),
# CUDA_INCLUDE_DIRS (its include directories; a ;-list passed with | for ;), SANITIZE (the
# build's ATTNJIT_SANITIZE: its installed attnjit-aot runs without LeakSanitizer's exit check).
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()

if(NOT CUDA_ROOT OR NOT IS_DIRECTORY "${CUDA_ROOT}")
  message(FATAL_ERROR "CUDA_ROOT '${CUDA_ROOT}' is not the toolkit's directory")
endif()

# ---- 1. the installed package -------------------------------------------------------------
set(forbidden "/usr/local/cuda" "${SOURCE_DIR}/" "${BUILD_DIR}/")
get_filename_component(cuda_real "${CUDA_ROOT}" REALPATH)
list(APPEND forbidden "${CUDA_ROOT}" "${cuda_real}")
string(REPLACE "|" ";" CUDA_INCLUDE_DIRS "${CUDA_INCLUDE_DIRS}")
list(APPEND forbidden ${CUDA_INCLUDE_DIRS})
list(REMOVE_DUPLICATES forbidden)
file(GLOB package_files ${WORK_DIR}/prefix/lib*/cmake/attnjit/*.cmake)
if(NOT package_files)
  message(FATAL_ERROR "no CMake package files under ${WORK_DIR}/prefix/lib*/cmake/attnjit")
endif()
set(features "")
foreach(f ${package_files})
  file(READ ${f} text)
  foreach(path ${forbidden})
    string(FIND "${text}" "${path}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${f} names '${path}': the installed package must not hard-code a path "
                          "of the machine that built it (CUDA comes from find_dependency(CUDAToolkit))")
    endif()
  endforeach()
  string(APPEND features "${text}")
endforeach()
if(NOT features MATCHES "INTERFACE_COMPILE_FEATURES \"cxx_std_17\"")
  message(FATAL_ERROR "the exported targets carry no INTERFACE_COMPILE_FEATURES cxx_std_17")
endif()
if(NOT features MATCHES "CUDA::toolkit")
  message(FATAL_ERROR "the exported targets do not use CUDA::toolkit for the CUDA headers")
endif()
message("package files name no toolkit, source or build path; cxx_std_17 exported")

execute_process(COMMAND ${WORK_DIR}/prefix/bin/attnjit-gen --list
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc OR out STREQUAL "")
  message(FATAL_ERROR "the installed bin/attnjit-gen --list failed (${rc}):\n${out}\n${err}")
endif()
message("bin/attnjit-gen runs")

# ---- 2. the consumer, as the README tells users to write one -----------------------------
# Configures and builds tests/install/<name> against the installed package, with the
# toolkit at <toolkit>.
function(build_consumer name toolkit)
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/${name} -B ${WORK_DIR}/${name}
                          -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCUDAToolkit_ROOT=${toolkit}
                          -DATTNJIT_SANITIZE=${SANITIZE}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc)
    message(FATAL_ERROR "configuring ${name} failed:\n${out}\n${err}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/${name} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc)
    message(FATAL_ERROR "building ${name} failed:\n${out}\n${err}")
  endif()
endfunction()

build_consumer(consumer ${CUDA_ROOT})
execute_process(COMMAND ${WORK_DIR}/consumer/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}")
if(rc OR NOT out MATCHES "consumer ok")
  message(FATAL_ERROR "the consumer failed (${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND ${WORK_DIR}/consumer/consumer_c RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}")
if(rc OR NOT out MATCHES "c consumer ok")
  message(FATAL_ERROR "the C consumer failed (${rc}):\n${out}\n${err}")
endif()

# The bundled consumer: every kernel from its linked bundle, NVRTC unloadable, no disk cache.
execute_process(COMMAND ${CMAKE_COMMAND} -E env ATTNJIT_LIBNVRTC=/nonexistent/libnvrtc.so ATTNJIT_DISABLE_DISK_CACHE=1
                        ${WORK_DIR}/consumer/consumer_bundled ${SOURCE_DIR}/tests/install/consumer/spec.json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}")
if(rc OR NOT out MATCHES "bundled consumer ok")
  message(FATAL_ERROR "consumer_bundled failed (${rc}):\n${out}\n${err}")
endif()

# ---- 3. no C++ standard set, the toolkit moved --------------------------------------------
set(moved ${WORK_DIR}/toolkit-elsewhere)
file(MAKE_DIRECTORY ${moved})
file(GLOB entries RELATIVE ${cuda_real} ${cuda_real}/*)
foreach(e ${entries})
  file(CREATE_LINK ${cuda_real}/${e} ${moved}/${e} SYMBOLIC)
endforeach()
build_consumer(consumer_no_std ${moved})
file(READ ${WORK_DIR}/consumer_no_std/compile_commands.json commands)
if(NOT commands MATCHES "-std=c\\+\\+17")
  message(FATAL_ERROR "consumer_no_std was not compiled with -std=c++17 from the package:\n${commands}")
endif()
if(NOT commands MATCHES "${moved}/include")
  message(FATAL_ERROR "consumer_no_std did not take the CUDA headers from ${moved}/include:\n${commands}")
endif()
foreach(path "/usr/local/cuda" "${cuda_real}" ${CUDA_INCLUDE_DIRS})
  string(FIND "${commands}" "${path}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "consumer_no_std's compile commands name '${path}', the toolkit of the build, "
                        "not the one it was given (${moved}):\n${commands}")
  endif()
endforeach()
execute_process(COMMAND ${WORK_DIR}/consumer_no_std/consumer_no_std RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}")
if(rc OR NOT out MATCHES "consumer ok")
  message(FATAL_ERROR "consumer_no_std failed (${rc}):\n${out}\n${err}")
endif()
message("consumer_no_std: C++17 from the package, CUDA headers from ${moved}")
