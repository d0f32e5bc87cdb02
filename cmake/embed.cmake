# cmake/embed.cmake: what the build steps that compile files into reviewd
# share (services/reviewd/db/rv_embed_sql.cmake for sql/,
# services/reviewd/handlers/rv_embed_console.cmake for console/).  Both
# run as `cmake -P` scripts and include this file by its path.

# Sets out to the bytes of file as C initialiser text, "0x2d,0x2d,...",
# sixteen to a line: no quoting rule of C string literals can be broken
# by the file, whatever it holds.
function(embed_hex out file)
  file(READ "${file}" hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
  string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n    " hex
         "${hex}")
  set(${out} "${hex}" PARENT_SCOPE)
endfunction()

# Writes text to path only when it differs from what is there, so an
# unchanged input rebuilds nothing.
function(embed_write path text)
  set(old "")
  if(EXISTS "${path}")
    file(READ "${path}" old)
  endif()
  if(NOT "${old}" STREQUAL "${text}")
    file(WRITE "${path}" "${text}")
  endif()
endfunction()
