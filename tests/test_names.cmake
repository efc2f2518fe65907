# Test names become CMake list items in ctest: '[', ']' and ';' would split or merge them.
foreach(src ${AOC_TEST_SOURCES})
  file(STRINGS ${src} lines REGEX "TEST_CASE\\(\"")
  foreach(line IN LISTS lines)
    if(line MATCHES "TEST_CASE\\(\"[^\"]*[][;]")
      message(FATAL_ERROR "${src}: a test name must not contain '[', ']' or ';': ${line}")
    endif()
  endforeach()
endforeach()
