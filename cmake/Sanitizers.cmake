# Sanitizer and fuzzing builds (scripts/sanitize.sh, tests/fuzz/README.md).
#
#   -DATTNJIT_SANITIZE=ON   every target (libraries, tests, tools, examples) with
#                           AddressSanitizer + UndefinedBehaviorSanitizer; a UB report aborts
#                           (-fno-sanitize-recover) so that a test cannot pass over one.
#   -DATTNJIT_LIBFUZZER=ON  (clang only, implies ATTNJIT_SANITIZE) the fuzz target links
#                           libFuzzer and everything is instrumented for its coverage.
#
# libcuda and libnvrtc are dlopen'ed and not instrumented; scripts/sanitize.sh sets the
# ASAN_OPTIONS they need and says why.
option(ATTNJIT_SANITIZE "Build everything with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(ATTNJIT_LIBFUZZER "Build tests/fuzz as a libFuzzer target (clang; implies ATTNJIT_SANITIZE)" OFF)

if(ATTNJIT_LIBFUZZER)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "ATTNJIT_LIBFUZZER needs clang (-fsanitize=fuzzer); configure with "
                        "-DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14, or leave it OFF: "
                        "the fuzz target then builds as a standalone program over a fixed corpus")
  endif()
  set(ATTNJIT_SANITIZE ON CACHE BOOL "" FORCE)
endif()

if(ATTNJIT_SANITIZE)
  # float-cast-overflow: clang's -fsanitize=undefined has it and gcc's does not; int(x) of a
  # huge float is undefined behaviour in C++, so both compilers check it.
  set(ATTNJIT_SANITIZER_FLAGS -fsanitize=address,undefined,float-cast-overflow)
  add_compile_options(${ATTNJIT_SANITIZER_FLAGS} -fno-sanitize-recover=undefined,float-cast-overflow
                      -fno-omit-frame-pointer)
  add_link_options(${ATTNJIT_SANITIZER_FLAGS})
  if(ATTNJIT_LIBFUZZER)
    # Coverage counters everywhere; only tests/fuzz links the libFuzzer main().
    add_compile_options(-fsanitize=fuzzer-no-link)
  endif()
  message(STATUS "attnjit: sanitizers on (${ATTNJIT_SANITIZER_FLAGS})")

  # A program not built with the sanitizers (python3 loading libattnjit_c through ctypes)
  # must preload the ASan runtime, which has to come first, and libstdc++: ASan looks up
  # the real __cxa_throw when it starts, and aborts at the first C++ exception if no
  # libstdc++ was loaded then. gcc's runtime is libasan (UBSan's, libubsan, follows as a
  # dependency of the library); clang's shared ASan runtime carries UBSan's.
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    set(asan_runtime libclang_rt.asan-x86_64.so)
  else()
    set(asan_runtime libasan.so)
  endif()
  set(ATTNJIT_SANITIZER_PRELOAD "")
  foreach(lib ${asan_runtime} libstdc++.so)
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=${lib} OUTPUT_VARIABLE path
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT IS_ABSOLUTE "${path}")
      message(FATAL_ERROR "ATTNJIT_SANITIZE: ${CMAKE_CXX_COMPILER} does not know where ${lib} is")
    endif()
    string(APPEND ATTNJIT_SANITIZER_PRELOAD " ${path}")
  endforeach()
  string(STRIP "${ATTNJIT_SANITIZER_PRELOAD}" ATTNJIT_SANITIZER_PRELOAD)
endif()

# Instrumented static libraries need the sanitizer runtime in whatever links them, so an
# installed sanitizer build tells its consumers (find_package) to link it too.
function(attnjit_sanitizer_interface target)
  if(ATTNJIT_SANITIZE)
    target_link_options(${target} INTERFACE ${ATTNJIT_SANITIZER_FLAGS})
  endif()
endfunction()
