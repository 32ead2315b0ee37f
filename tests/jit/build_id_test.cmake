# build_id_test.cmake — the compiler's build identity (cmake/kiln_build_id.cmake):
#   cmake -DSCRIPT=<kiln_build_id.cmake> -DINPUTS=<build>/kiln_build_id_inputs.txt -DWORK=<dir> -P build_id_test.cmake
# 1. The real build's inputs name the compiler's sources, the lang/lib programs,
#    the flags and the LLVM version.
# 2. On a small tree: identical inputs give identical identities (a reproducible
#    rebuild may share the cache); editing any file, or changing a setting, gives
#    another (a rebuilt compiler misses every old cache entry).
file(READ "${INPUTS}" real)
foreach(want "compiler/codegen/cg_emit.c" "compiler/support/target.c" "lang/parser.y" "lang/lib/attention_fwd.tile"
        "jit/cache.c" "compiler/driver/compile.c" "llvm 19." "-Wall" "--files--")
  string(FIND "${real}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the build identity's inputs lack '${want}'")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/src")
function(identity settings out_var)
  file(WRITE "${WORK}/inputs.txt" "${settings}\n--files--\n${WORK}/src/a.c\n${WORK}/src/b.tile\n")
  execute_process(COMMAND ${CMAKE_COMMAND} -DINPUTS=${WORK}/inputs.txt -DROOT=${WORK} -DOUT=${WORK}/id.c
                  -P "${SCRIPT}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "kiln_build_id.cmake failed (${rc})")
  endif()
  file(READ "${WORK}/id.c" text)
  string(REGEX MATCH "\"([0-9a-f]+)\"" _ "${text}")
  string(LENGTH "${CMAKE_MATCH_1}" n)
  if(NOT n EQUAL 64)
    message(FATAL_ERROR "no 64-digit identity in: ${text}")
  endif()
  set(${out_var} "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()

file(WRITE "${WORK}/src/a.c" "int a;\n")
file(WRITE "${WORK}/src/b.tile" "kernel b() {}\n")
identity("llvm 19.1.0" id1)
identity("llvm 19.1.0" id2)
if(NOT id1 STREQUAL id2)
  message(FATAL_ERROR "identical inputs gave two identities: ${id1} ${id2}")
endif()
file(WRITE "${WORK}/src/b.tile" "kernel b() { }\n")
identity("llvm 19.1.0" id3)
file(WRITE "${WORK}/src/a.c" "int a ;\n")
identity("llvm 19.1.0" id4)
identity("llvm 19.1.1" id5)
foreach(pair "${id1};${id3};lang/lib edit" "${id3};${id4};source edit" "${id4};${id5};LLVM version")
  list(GET pair 0 x)
  list(GET pair 1 y)
  list(GET pair 2 what)
  if(x STREQUAL y)
    message(FATAL_ERROR "a ${what} left the build identity unchanged")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK}")
message(STATUS "build identity: ok")
