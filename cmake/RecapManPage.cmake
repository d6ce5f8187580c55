# cmake -DPROGRAM=<recap> -DOUTPUT=<dir>/recap.1.gz -DVERSION=<x.y.z> [-DGZIP=<gzip>]
#       -P RecapManPage.cmake
#
# Writes the recap command's manual page (man 1 recap) from the program's own `recap --help`,
# so that it says what the command says and never falls behind it. Run by the build
# (src/cli/CMakeLists.txt) after the program is linked; installed with the command. The page is
# compressed with gzip -9n (no name or time stamp inside), as Debian ships manual pages.
foreach(var PROGRAM OUTPUT VERSION)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "RecapManPage.cmake: ${var} is not set")
  endif()
endforeach()

execute_process(COMMAND "${PROGRAM}" --help
  OUTPUT_VARIABLE help RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR help STREQUAL "")
  message(FATAL_ERROR "RecapManPage.cmake: `${PROGRAM} --help` failed (${rc}): ${err}")
endif()

# The text as it is, in a no-fill block: a backslash is troff's escape (\e prints one), and a
# line that starts with a dot or a quote would be read as a request (\& in front keeps it text).
string(REPLACE "\\" "\\e" help "${help}")
string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" help "${help}")
string(REGEX REPLACE "\n+$" "" help "${help}")

set(page ".TH RECAP 1 \"\" \"recap ${VERSION}\" \"User Commands\"
.SH NAME
recap \\- keeps an LLM agent's conversation inside its context window
.SH SYNOPSIS
.B recap
.I command
.RI [ options ]
.SH DESCRIPTION
What
.B recap \\-\\-help
prints:
.PP
.nf
${help}
.fi
.PP
Each command describes itself and its options:
.BI \"recap \" command \" \\-\\-help\"\\fR.
.SH SEE ALSO
The recap documentation: docs/cli.md (the commands) and docs/proxy.md
.RB ( \"recap proxy\" )
in recap's source.
")

string(REGEX REPLACE "\\.gz$" "" plain "${OUTPUT}")
file(WRITE "${plain}" "${page}")
if(NOT GZIP)
  set(GZIP gzip)
endif()
execute_process(COMMAND "${GZIP}" -9nc "${plain}" OUTPUT_FILE "${OUTPUT}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "RecapManPage.cmake: gzip failed (${rc})")
endif()
