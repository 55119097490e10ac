# Checks that the files README.md, docs/*.md and the sources under src/ and include/ name
# exist in the repository (issue 19: say only what the code does). Run by ctest as
# `docs_references`; by hand: cmake -DROOT=<repository> -P tests/unit/ir/check_references.cmake
#  - Markdown links [text](target) in README.md and docs/*.md, relative to the file, unless
#    they are URLs or anchors;
#  - paths from the repository root (src/..., docs/..., tests/..., include/..., ...) with a
#    file extension, anywhere in those files and in source comments;
#  - paths from src/ (util/x.hpp, ir/plan.hpp, ...) in the same places.
if(NOT ROOT)
  message(FATAL_ERROR "give -DROOT=<repository>")
endif()
file(GLOB docs "${ROOT}/README.md" "${ROOT}/docs/*.md")
file(GLOB_RECURSE sources "${ROOT}/src/*.hpp" "${ROOT}/src/*.cpp" "${ROOT}/src/*.cu" "${ROOT}/src/*.cuh"
     "${ROOT}/src/*.h" "${ROOT}/include/*.h")
set(ext "md|hpp|cpp|h|cu|cuh|rccl|json|py|sh|cmake|xml|txt")
set(missing "")
foreach(f IN LISTS docs sources)
  file(READ "${f}" text)
  string(REPLACE ";" "," text " ${text} ")  # a ';' would split CMake's lists
  string(REPLACE "[" "{" text "${text}")   # and brackets confuse them
  string(REPLACE "]" "}" text "${text}")
  file(RELATIVE_PATH rel "${ROOT}" "${f}")
  get_filename_component(dir "${f}" DIRECTORY)
  if(f MATCHES "\\.md$")
    string(REGEX MATCHALL "}\\([^)# ]+" links "${text}")
    foreach(l IN LISTS links)
      string(SUBSTRING "${l}" 2 -1 target)
      if(target MATCHES "^(https?|mailto):" OR NOT target MATCHES "[./]")  # a URL, or a formula
        continue()
      endif()
      if(NOT EXISTS "${dir}/${target}")
        list(APPEND missing "${rel}: link (${target})")
      endif()
    endforeach()
  endif()
  string(REGEX MATCHALL "[^A-Za-z0-9_/.~$-](src|docs|tests|include|algorithms|topologies|scripts|bench|examples)/[A-Za-z0-9_/.-]*\\.(${ext})[^A-Za-z0-9_]"
         paths "${text}")
  foreach(p IN LISTS paths)
    string(REGEX REPLACE "^.(.*).$" "\\1" p "${p}")
    if(NOT EXISTS "${ROOT}/${p}")
      list(APPEND missing "${rel}: ${p}")
    endif()
  endforeach()
  string(REGEX MATCHALL "[^A-Za-z0-9_/.~$<-](util|ir|lang|compile|plan|sim|tune|bootstrap|proxy|exec|gen|net|runtime|part|nccl|device|cli)/[A-Za-z0-9_]+\\.(hpp|cpp|cu|cuh|h)[^A-Za-z0-9_]"
         paths "${text}")
  foreach(p IN LISTS paths)
    string(REGEX REPLACE "^.(.*).$" "\\1" p "${p}")
    if(NOT EXISTS "${ROOT}/src/${p}" AND NOT EXISTS "${ROOT}/include/weft/${p}")
      list(APPEND missing "${rel}: ${p} (from src/)")
    endif()
  endforeach()
  if(text MATCHES "[^A-Za-z0-9_/.-]DESIGN\\.md" AND NOT EXISTS "${ROOT}/DESIGN.md")
    list(APPEND missing "${rel}: DESIGN.md (not in the repository: docs/design.md is)")
  endif()
endforeach()
# Every variable `weft env` lists (the registry in src/util/config.cpp) is read by some code,
# and every WEFT_* name the documents give is declared or read somewhere outside them.
file(READ "${ROOT}/src/util/config.cpp" registry)
string(REGEX MATCHALL "{\"WEFT_[A-Z0-9_]+\", Type::" declared "${registry}")
file(GLOB_RECURSE code "${ROOT}/src/*.cpp" "${ROOT}/src/*.hpp" "${ROOT}/src/*.cu" "${ROOT}/src/*.cuh" "${ROOT}/src/*.txt")
list(REMOVE_ITEM code "${ROOT}/src/util/config.cpp")
set(code_text "")
foreach(f IN LISTS code)
  file(READ "${f}" t)
  string(APPEND code_text "${t}")
endforeach()
foreach(d IN LISTS declared)
  string(REGEX REPLACE "^{\"(WEFT_[A-Z0-9_]+)\".*" "\\1" name "${d}")
  string(FIND "${code_text}" "\"${name}\"" at)
  if(at EQUAL -1)
    list(APPEND missing "src/util/config.cpp: ${name} is listed by weft env but no code reads it")
  endif()
endforeach()
file(GLOB_RECURSE elsewhere "${ROOT}/tests/*.cpp" "${ROOT}/tests/*.hpp" "${ROOT}/tests/*.txt" "${ROOT}/tests/*.sh"
     "${ROOT}/tests/*.py" "${ROOT}/tests/*.cu" "${ROOT}/scripts/*" "${ROOT}/CMakeLists.txt" "${ROOT}/.ci/*"
     "${ROOT}/bench/*.cpp" "${ROOT}/bench/*.cu" "${ROOT}/bench/*.sh" "${ROOT}/include/*.h" "${ROOT}/include/*.hpp"
     "${ROOT}/python/*.py")
foreach(f IN LISTS elsewhere)
  file(READ "${f}" t)
  string(APPEND code_text "${t}")
endforeach()
string(APPEND code_text "${registry}")
foreach(f IN LISTS docs)
  file(READ "${f}" t)
  string(REGEX MATCHALL "WEFT_[A-Z0-9_]*[A-Z0-9]" names "${t}")
  list(REMOVE_DUPLICATES names)
  file(RELATIVE_PATH rel "${ROOT}" "${f}")
  foreach(name IN LISTS names)
    string(FIND "${code_text}" "${name}" at)
    if(at EQUAL -1)
      list(APPEND missing "${rel}: ${name} is documented but nothing declares or reads it")
    endif()
  endforeach()
endforeach()

list(REMOVE_DUPLICATES missing)
if(missing)
  list(JOIN missing "\n  " out)
  message(FATAL_ERROR "named but not in the repository:\n  ${out}")
endif()
list(LENGTH docs nd)
list(LENGTH sources ns)
message(STATUS "references of ${nd} documents and ${ns} sources all exist")
