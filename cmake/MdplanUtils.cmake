# Helpers shared by the mdplan CMake files.

# Warning flags, applied per target (never through CMAKE_CXX_FLAGS).
function(mdplan_set_warnings target)
  # -Wno-redundant-move: GCC flags the std::move that converting an Error
  # into an Expected needs on other compilers.
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-redundant-move>)
endfunction()

# mdplan_add_library(name SOURCES... [LINK libs...])
# A static library of the compiler with the public include directory.
function(mdplan_add_library name)
  cmake_parse_arguments(ARG "" "" "LINK" ${ARGN})
  add_library(${name} STATIC ${ARG_UNPARSED_ARGUMENTS})
  add_library(mdplan::${name} ALIAS ${name})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${MDPLAN_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${name} PUBLIC ${ARG_LINK})
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  mdplan_set_warnings(${name})
  install(TARGETS ${name} EXPORT mdplanTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
endfunction()
