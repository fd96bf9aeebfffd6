# loader_cache.cmake: which library files the dynamic loader finds by itself,
# from its cache (`ldconfig -p`), by real path. CMakeLists.txt's
# cs_use_library leaves such a file's directory off the engine's RUNPATH (see
# there); tests: loader_cache_test.cmake (engine/loader_cache_test.go).
# if(IN_LIST) needs policy CMP0057: cmake_minimum_required 3.3 or later.

# cs_loader_cache(OUT): the real paths of every file in the loader's cache
# ("" where ldconfig is missing: every directory then stays on the RUNPATH).
function(cs_loader_cache out)
  find_program(CS_LDCONFIG ldconfig PATHS /sbin /usr/sbin)
  set(_cache "")
  if(CS_LDCONFIG)
    execute_process(COMMAND ${CS_LDCONFIG} -p OUTPUT_VARIABLE _ldp ERROR_QUIET)
    string(REGEX MATCHALL "=> [^\n]+" _paths "${_ldp}")
    foreach(_p ${_paths})
      string(REGEX REPLACE "^=> " "" _p "${_p}")
      get_filename_component(_p "${_p}" REALPATH)
      list(APPEND _cache "${_p}")
    endforeach()
  endif()
  set(${out} "${_cache}" PARENT_SCOPE)
endfunction()

# cs_loader_finds(LIB CACHE OUT): OUT true when LIB (any path to it: a
# libfoo.so link, the versioned file) is a file the loader finds by itself.
function(cs_loader_finds lib cache out)
  get_filename_component(_real "${lib}" REALPATH)
  if(_real IN_LIST cache)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()
