# What `cmake --install` puts under the prefix:
#
#   include/pagemalloc/          the public headers (pagemalloc.h, memory_resource.h); the
#                                test-only headers (the fake and fault-injecting OS layers, the
#                                run-manager tracing in pagemap/) stay in the source tree
#   lib/libpagemalloc.so*        the drop-in, with its SONAME (pagemalloc::pagemalloc)
#   lib/libpagemalloc_je.so*     the drop-in with jemalloc's names, when built
#   lib/libpagemalloc_core.a     pm_* only, beside the system malloc (pagemalloc::core)
#   lib/cmake/pagemalloc/        the package for find_package(pagemalloc)
#   lib/pkgconfig/               pagemalloc.pc and pagemalloc-core.pc
#   share/doc/pagemalloc/        LICENSE, README.md, CHANGELOG.md
include(CMakePackageConfigHelpers)

set(pagemalloc_package_dir ${CMAKE_INSTALL_LIBDIR}/cmake/pagemalloc)
set(pagemalloc_installed pagemalloc pagemalloc_core)
if(TARGET pagemalloc_je)
  list(APPEND pagemalloc_installed pagemalloc_je)
  set_target_properties(pagemalloc_je PROPERTIES EXPORT_NAME jemalloc_names)
endif()

install(TARGETS ${pagemalloc_installed} EXPORT pagemallocTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/allocator/include/pagemalloc/pagemalloc.h
              ${PROJECT_SOURCE_DIR}/allocator/include/pagemalloc/memory_resource.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pagemalloc)
install(EXPORT pagemallocTargets NAMESPACE pagemalloc:: DESTINATION ${pagemalloc_package_dir})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/pagemallocConfig.cmake.in
  ${PROJECT_BINARY_DIR}/pagemallocConfig.cmake INSTALL_DESTINATION ${pagemalloc_package_dir})
# Before 1.0 a minor version may break the interface: only 0.1.z satisfies a request for 0.1.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/pagemallocConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/pagemallocConfig.cmake
              ${PROJECT_BINARY_DIR}/pagemallocConfigVersion.cmake
        DESTINATION ${pagemalloc_package_dir})

# The .pc files find the prefix from their own place (${pcfiledir}), so that an installed tree
# may be moved, or installed with `cmake --install --prefix` elsewhere than configured.
file(RELATIVE_PATH pc_to_prefix /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
foreach(pc pagemalloc pagemalloc-core)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${PROJECT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()

install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/README.md
              ${PROJECT_SOURCE_DIR}/CHANGELOG.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
