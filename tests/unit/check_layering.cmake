# Checks the folders of src/ against their order (issue 25): a file of src/A may include
# only headers of A and of folders below A, and the folders' include graph has no cycle.
# Run by ctest as `layering`; by hand:
#   cmake -DROOT=<repository> -P tests/unit/check_layering.cmake
#
# The order is read from docs/design.md, its one place: the first line of that page that
# starts with "util < " lists every folder of src/, lowest first. An include counts when it
# is written with quotes and names a file under src/ ("exec/executor.hpp"); system and
# public headers (<...>, weft/...) do not.
#
# Known exceptions, each a file and the header it includes, with why and until when; an
# exception that no longer occurs is an error too, so that the list only shrinks.
set(exceptions
  # The algorithm's choice moves from runtime/ into tune/ (issue 25, items 2 and 3); until
  # then the tuner reads the selection table where it is.
  "tune/tune.hpp -> runtime/selection_table.hpp"
  "tune/tune.cpp -> runtime/selection.hpp"
)

cmake_minimum_required(VERSION 3.25)  # IN_LIST, list(JOIN)
if(NOT ROOT)
  message(FATAL_ERROR "give -DROOT=<repository>")
endif()
file(STRINGS "${ROOT}/docs/design.md" order_line REGEX "^util < ")
list(LENGTH order_line n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "docs/design.md: want exactly one line starting with 'util < ' (the folder order), found ${n}")
endif()
string(REGEX REPLACE "[ `.]" "" order_line "${order_line}")
string(REPLACE "<" ";" order "${order_line}")
set(rank 0)
foreach(f IN LISTS order)
  if(DEFINED rank_${f})
    message(FATAL_ERROR "docs/design.md: folder '${f}' appears twice in the order")
  endif()
  set(rank_${f} ${rank})
  math(EXPR rank "${rank} + 1")
endforeach()

set(problems "")
file(GLOB folders LIST_DIRECTORIES true RELATIVE "${ROOT}/src" "${ROOT}/src/*")
foreach(f IN LISTS folders)
  if(IS_DIRECTORY "${ROOT}/src/${f}" AND NOT DEFINED rank_${f})
    list(APPEND problems "src/${f} is not in docs/design.md's folder order")
  endif()
endforeach()
foreach(f IN LISTS order)
  if(NOT IS_DIRECTORY "${ROOT}/src/${f}")
    list(APPEND problems "docs/design.md's folder order names '${f}', which is not a folder of src/")
  endif()
endforeach()

set(seen_exceptions "")
set(files_checked 0)
foreach(from IN LISTS order)
  set(edges_${from} "")
  file(GLOB_RECURSE sources RELATIVE "${ROOT}/src" "${ROOT}/src/${from}/*.hpp" "${ROOT}/src/${from}/*.cpp"
       "${ROOT}/src/${from}/*.h" "${ROOT}/src/${from}/*.cu" "${ROOT}/src/${from}/*.cuh" "${ROOT}/src/${from}/*.in")
  foreach(src IN LISTS sources)
    math(EXPR files_checked "${files_checked} + 1")
    file(STRINGS "${ROOT}/src/${src}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*$" "\\1" header "${line}")
      if(NOT header MATCHES "^([a-z_]+)/" OR NOT EXISTS "${ROOT}/src/${header}")
        continue()  # beside the file, a public header (weft/...) or a generated one
      endif()
      set(to "${CMAKE_MATCH_1}")
      if(to STREQUAL from OR NOT DEFINED rank_${to})
        continue()
      endif()
      list(APPEND edges_${from} ${to})
      if(rank_${to} GREATER rank_${from})
        set(e "${src} -> ${header}")
        if(e IN_LIST exceptions)
          list(APPEND seen_exceptions "${e}")
        else()
          list(APPEND problems "src/${src} includes ${header}: ${to} is above ${from} in docs/design.md's order")
        endif()
      endif()
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES edges_${from})
endforeach()
foreach(e IN LISTS exceptions)
  if(NOT e IN_LIST seen_exceptions)
    list(APPEND problems "the exception '${e}' (tests/unit/check_layering.cmake) no longer occurs: remove it")
  endif()
endforeach()

# Cycles between folders (possible only through exceptions): peel off folders that include
# no folder left; what cannot be peeled lies on a cycle.
set(left ${order})
set(progress TRUE)
while(progress)
  set(progress FALSE)
  foreach(f IN LISTS left)
    set(leaf TRUE)
    foreach(t IN LISTS edges_${f})
      if(t IN_LIST left)
        set(leaf FALSE)
        break()
      endif()
    endforeach()
    if(leaf)
      list(REMOVE_ITEM left ${f})
      set(progress TRUE)
    endif()
  endforeach()
endwhile()
if(left)
  set(cycle "")
  foreach(f IN LISTS left)
    set(to "")
    foreach(t IN LISTS edges_${f})
      if(t IN_LIST left)
        list(APPEND to ${t})
      endif()
    endforeach()
    list(JOIN to " and " to)
    list(APPEND cycle "${f} -> ${to}")
  endforeach()
  list(JOIN cycle ", " cycle)
  list(APPEND problems "the folders' includes form a cycle among: ${cycle}")
endif()

if(problems)
  list(JOIN problems "\n  " out)
  message(FATAL_ERROR "src/ breaks its folder order:\n  ${out}")
endif()
list(JOIN order " < " shown)
message(STATUS "${files_checked} files of src/ keep the folder order ${shown}")
