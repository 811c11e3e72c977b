# install() rules and the exported CMake package:
#   find_package(attnjit REQUIRED)
#   target_link_libraries(app PRIVATE attnjit::attnjit)     # C++ API, static libraries
#   target_link_libraries(app PRIVATE attnjit::attnjit_c)   # C API, libattnjit_c.so
# The layout (docs/building.md):
#   <prefix>/lib/libattnjit_*.a, libattnjit_c.so{,.1,.0.1.0}
#   <prefix>/include/attnjit/{attnjit.h,attnjit_c.h,support,dsl,codegen,runtime,api}/
#   <prefix>/lib/cmake/attnjit/attnjit{Config,ConfigVersion,Targets*}.cmake
#   <prefix>/bin/attnjit-gen, attnjit-aot, attnjit-tune
#   attnjit_add_kernel_bundle(<target> SPECS ... ARCHS ...): kernels compiled ahead of time (docs/aot.md)
include(CMakePackageConfigHelpers)

set(ATTNJIT_LIBS attnjit attnjit_api attnjit_runtime attnjit_codegen attnjit_dsl attnjit_support attnjit_c)
install(TARGETS ${ATTNJIT_LIBS} EXPORT attnjitTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

foreach(dir support dsl codegen runtime api)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attnjit/${dir}
          FILES_MATCHING PATTERN "*.h")
endforeach()
# attnjit-gen: the generated source / plan / params layout of an example spec (tools/).
install(TARGETS attnjit-gen RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# attnjit-aot: kernel bundles (docs/aot.md), exported as attnjit::attnjit-aot for the CMake
# function attnjit_add_kernel_bundle, which the package config includes.
install(TARGETS attnjit-aot EXPORT attnjitTargets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# attnjit-tune: the forward's tile tuned on this GPU into the tuning database (docs/autotune.md).
install(TARGETS attnjit-tune RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/cmake/AttnjitKernelBundle.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/attnjit)

install(FILES ${PROJECT_SOURCE_DIR}/api/attnjit.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attnjit)
# <attnjit/attnjit_c.h>: the C API's one header.
install(FILES ${PROJECT_SOURCE_DIR}/capi/include/attnjit/attnjit_c.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attnjit)

install(EXPORT attnjitTargets NAMESPACE attnjit:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/attnjit)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/attnjitConfig.cmake.in
  ${PROJECT_BINARY_DIR}/attnjitConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/attnjit)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/attnjitConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/attnjitConfig.cmake ${PROJECT_BINARY_DIR}/attnjitConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/attnjit)
