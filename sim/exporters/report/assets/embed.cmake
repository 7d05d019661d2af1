# cmake -DIN=file -DOUT=file.cpp -DNAME=symbol -P embed.cmake: the file's bytes as a C++ string_view
# (a raw string literal) in namespace servesim::report, for report.html (report_html.cpp).
file(READ "${IN}" content)
string(FIND "${content}" ")servesim_asset\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter")
endif()
get_filename_component(name "${IN}" NAME)
file(WRITE "${OUT}" "// generated at build time from ${name} by embed.cmake: do not edit\n#include <string_view>\nnamespace servesim::report {\nextern const std::string_view ${NAME};\nconst std::string_view ${NAME} = R\"servesim_asset(${content})servesim_asset\";\n}  // namespace servesim::report\n")
