// servesim report DIR [--out FILE] [--json FILE]: the HTML report of a run's or a sweep's output
// folder (sim/exporters/report/report.hpp says what it draws and from which files).
#pragma once
#include <string>

namespace CLI {
class App;
}

namespace servesim::cli {

struct ReportArgs {
  std::string dir;   ///< a run's or a sweep's output folder
  std::string out;   ///< the HTML file (default DIR/report.html)
  std::string json;  ///< also write the page's data (charts, tables, omitted) as JSON here
};

/// The subcommand and its options (the one line in args.cpp adds it).
CLI::App* add_report(CLI::App& app, ReportArgs& a);
/// 0: written; 2: DIR is not a run's or sweep's output, or a file cannot be written.
int report(const ReportArgs& a);

}  // namespace servesim::cli
