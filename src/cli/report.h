// recap CLI — a session's timeline as one HTML page (`recap report`, and `recap proxy`'s
// /recap/ pages; docs/report.md).
#ifndef RECAP_CLI_REPORT_H_
#define RECAP_CLI_REPORT_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recap/config.h"
#include "recap/session_store.h"
#include "recap/status.h"

namespace recap_cli {

// The page of `session` in `store`: its history replayed as a chart, its conversation as sent
// now with each checkpoint folding what it replaced, its checkpoints' sections, and `events`
// (this session's, as the event sinks wrote them). `config` places the chart's lines.
// `refresh_seconds` > 0 makes the page reload itself that often (a live page, without script).
recap::Result<std::string> ReportPage(recap::SessionStore& store, const std::string& session,
                                      const recap::Config& config,
                                      const std::vector<nlohmann::json>& events,
                                      int refresh_seconds = 0);

// Text as HTML: escaped, control characters shown as escapes, never markup.
std::string HtmlEscape(const std::string& text);

}  // namespace recap_cli

#endif  // RECAP_CLI_REPORT_H_
