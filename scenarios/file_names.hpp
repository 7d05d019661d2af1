// servesim scenarios: names that become file or folder names (a deployment's output folder,
// out/<scenario name>, a sweep point's folder). Header-only so that readers of servesim's own
// outputs (the report) check the names they join to a folder with the same rule as the scenario
// reader, without linking it.
#pragma once
#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>

namespace servesim {

/// Non-empty, only letters, digits and . _ - +, and not "." or "..": it cannot leave the folder it
/// is joined to. No errors.
inline bool is_safe_file_name(const std::string& name) {
  if (name.empty() || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' || c == '+';
  });
}

/// `path` names a folder: the readers of input files say so instead of "malformed JSON" or "the
/// trace is empty" (std::ifstream opens a folder on Linux and reads nothing; review). No errors.
inline bool is_folder(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) && !ec;
}

/// Why a name is refused, for messages.
inline std::string safe_file_name_rule() { return "use letters, digits and . _ - + only (not \".\" or \"..\" alone), so it stays inside the output folder"; }

}  // namespace servesim
