# One place for the warning policy of attnjit's own targets.
function(attnjit_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
endfunction()
