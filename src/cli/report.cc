// recap CLI — `recap report`: a session's timeline as one self-contained HTML page (issue 41,
// docs/report.md). Read from the session's history, which holds every message ever stored and
// what retired it; with --events, the events a host or `recap proxy --events` wrote add what
// each compaction took.
//
// The page has no script and loads nothing: an inline SVG chart (each point and mark a
// `<title>` tooltip), folds made of <details>, and the events' filter made of radio buttons and
// CSS. Every text from the session is escaped, so a message holding `<script>` shows it.
//
// What the page's elements are called (the browser test reads them):
//   svg#chart                      the chart; circle.point[data-turn][data-tokens] per turn;
//                                  line.limit[data-kind=trigger|hard-limit|window];
//                                  g.mark[data-kind=compaction|reduction|undo|provider]
//                                  [data-turn]
//   ol#conversation > li.msg       the conversation as sent now, [data-role]; .checkpoint,
//                                  .clipped, .cleared; a checkpoint holds details.fold
//                                  [data-commit] whose ol.originals are the messages it replaced
//   section.checkpoint-sections    each checkpoint's sections (and "Kept by recap", the ledger)
//   li.event[data-kind]            the events, filtered by input.kind-filter
#include "report.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recap/checkpoint.h"
#include "recap/config.h"
#include "recap/measure.h"
#include "recap/session_store.h"
#include "recap/tail_reducer.h"
#include "recap/version.h"

#include "cli.h"

namespace recap_cli {
namespace report {

const char* const kHelp =
    "usage: recap report --session ID -o FILE [--db DB] [--events FILE] [options]\n"
    "\n"
    "Writes a session's timeline as one HTML page, readable offline in any browser: the\n"
    "request size per turn as a chart with the trigger, the hard limit and the window, each\n"
    "compaction, clearing, reduction and undo marked where it happened; the conversation as\n"
    "it is sent now, each checkpoint folding the messages it replaced; each checkpoint's\n"
    "sections and what recap kept beside the summarizer (the ledger); the events by kind.\n"
    "Reads the database; changes nothing.\n"
    "\n"
    "options:\n"
    "  --session ID      the session (required)\n"
    "  -o, --output FILE where to write the page (required; `-`: standard output)\n"
    "  --db DB           the database file (default ./recap.db) or a postgresql:// URL\n"
    "  --events FILE     events a host or `recap proxy --events` wrote (JSON lines): the\n"
    "                    page lists this session's, and marks say what each compaction took\n";

// Text as HTML: escaped, control characters shown as escapes, never markup.
std::string Html(const std::string& text) {
  const std::string shown = Shown(text);  // valid UTF-8, control characters escaped
  std::string out;
  out.reserve(shown.size() + shown.size() / 8);
  for (const char c : shown) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// Shown() escapes line breaks and tabs; a message's text keeps them (in a <pre>).
std::string HtmlText(const std::string& text) {
  std::string out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t brk = text.find_first_of("\n\t", start);
    out += Html(text.substr(start, brk == std::string::npos ? std::string::npos : brk - start));
    if (brk == std::string::npos) break;
    out += text[brk];
    start = brk + 1;
  }
  return out;
}

std::string MessageText(const recap::Message& m) {
  std::string out;
  for (const recap::Part& p : m.parts) {
    if (!out.empty()) out += '\n';
    if (const auto* t = std::get_if<recap::Text>(&p)) {
      out += t->text;
    } else if (const auto* c = std::get_if<recap::ToolCall>(&p)) {
      out += "[tool call " + c->name + " " + c->id + "] " + c->arguments;
    } else if (const auto* r = std::get_if<recap::ToolResult>(&p)) {
      out += "[tool result " + r->call_id + (r->is_error ? ", error" : "") + "] ";
      for (const recap::ResultItem& item : r->content) {
        if (const auto* item_text = std::get_if<recap::Text>(&item)) out += item_text->text;
      }
    } else if (const auto* o = std::get_if<recap::Opaque>(&p)) {
      out += "[" + o->kind + "]";
    }
  }
  return out;
}

bool HasText(const recap::Message& m, std::string_view needle) {
  return MessageText(m).find(needle) != std::string::npos;
}

bool IsProviderCheckpoint(const recap::Message& m) {
  for (const recap::Part& p : m.parts) {
    if (const auto* o = std::get_if<recap::Opaque>(&p)) {
      if (o->kind == "compaction") return true;
    }
  }
  return false;
}

struct Mark {
  std::string kind;  // compaction, reduction, undo, provider
  std::string commit;
  std::uint64_t turn = 0;
  std::size_t before_tokens = 0;
  std::size_t after_tokens = 0;
  std::size_t span = 0;  // messages it retired
  std::string detail;    // from the events, when given
};

struct Point {
  std::uint64_t turn = 0;
  std::size_t tokens = 0;
};

std::string Num(std::size_t n) { return recap_cli::Num(n); }

}  // namespace report

recap::Result<std::string> ReportPage(recap::SessionStore& store, const std::string& session,
                                      const recap::Config& config,
                                      const std::vector<nlohmann::json>& events,
                                      int refresh_seconds) {
  namespace rp = report;
  recap::Result<recap::SessionState> state = store.Load(session);
  if (!state.ok()) return state.status();
  std::vector<recap::HistoryEntry> history;
  RECAP_RETURN_IF_ERROR(store.ForEachHistoryEntry(session, [&history](recap::HistoryEntry&& e) {
    history.push_back(std::move(e));
    return recap::Status::OK();
  }));
  // The timeline: every stored message in store order, the active size after each turn.
  std::map<std::string, std::vector<std::size_t>> retired_by;  // commit -> history indexes
  std::map<std::string, std::vector<std::size_t>> by_id;       // message id -> history indexes
  for (std::size_t i = 0; i < history.size(); ++i) {
    if (!history[i].replaced_by.empty()) retired_by[history[i].replaced_by].push_back(i);
    by_id[history[i].message.id].push_back(i);
  }
  std::vector<bool> active(history.size(), false);
  std::size_t active_chars = 0;
  std::vector<rp::Point> points;
  std::vector<rp::Mark> marks;
  std::size_t compactions = 0;
  std::map<std::size_t, std::string> checkpoint_commit;  // history index -> "compaction:k"
  const auto retire = [&](std::size_t j) {
    if (active[j]) {
      active[j] = false;
      active_chars -= recap::MessageChars(history[j].message);
    }
  };
  for (std::size_t i = 0; i < history.size(); ++i) {
    const recap::HistoryEntry& e = history[i];
    const std::size_t before = active_chars;
    rp::Mark* touched = nullptr;  // the mark this entry made or added to
    if (e.message.summary) {
      // The k-th checkpoint stored is the k-th compaction's: it retires that span.
      const std::string commit = "compaction:" + std::to_string(++compactions);
      checkpoint_commit[i] = commit;
      rp::Mark m;
      m.kind = e.replaced_by.rfind("undo:", 0) == 0 ? "undo" : "compaction";
      m.commit = commit;
      m.turn = e.turn;
      m.before_tokens = recap::EstimateTokens(before);
      for (const std::size_t j : retired_by[commit]) {
        if (j < i && active[j]) ++m.span;
        if (j < i) retire(j);
      }
      marks.push_back(m);
      touched = &marks.back();
    } else {
      // A reduced copy (a clipped or cleared message) replaces its original, of the same id.
      for (const std::size_t j : by_id[e.message.id]) {
        if (j >= i || !active[j] || history[j].replaced_by.rfind("reduction:", 0) != 0) continue;
        if (marks.empty() || marks.back().commit != history[j].replaced_by) {
          rp::Mark m;
          m.kind = "reduction";
          m.commit = history[j].replaced_by;
          m.turn = e.turn;
          m.before_tokens = recap::EstimateTokens(active_chars);
          marks.push_back(m);
        }
        ++marks.back().span;
        touched = &marks.back();
        retire(j);
      }
      if (rp::IsProviderCheckpoint(e.message)) {
        rp::Mark m;
        m.kind = "provider";
        m.commit = "provider";
        m.turn = e.turn;
        m.before_tokens = recap::EstimateTokens(active_chars);
        marks.push_back(m);
        touched = &marks.back();
      }
    }
    active[i] = true;
    active_chars += recap::MessageChars(e.message);
    if (touched != nullptr) touched->after_tokens = recap::EstimateTokens(active_chars);
    const std::size_t tokens = recap::EstimateTokens(active_chars);
    if (points.empty() || points.back().turn != e.turn) {
      points.push_back({e.turn, tokens});
    } else {
      points.back().tokens = tokens;
    }
  }
  // What the events say each compaction took (the n-th completed compaction is commit n).
  std::size_t completed = 0;
  for (const nlohmann::json& ev : events) {
    if (ev.value("type", std::string()) != "compaction_completed") continue;
    ++completed;
    const std::string commit = "compaction:" + std::to_string(completed);
    for (rp::Mark& m : marks) {
      if (m.commit == commit) m.detail = ev.dump();
    }
  }

  // The limits' lines.
  const recap::Config& c = config;
  std::vector<std::pair<std::string, std::size_t>> limits;  // kind -> tokens
  limits.emplace_back("hard-limit", recap::EstimateTokens(c.limits.max_context_chars));
  if (c.provider.context_window) {
    limits.emplace_back("window", *c.provider.context_window);
    limits.emplace_back("trigger",
                        static_cast<std::size_t>(c.compaction.threshold *
                                                 static_cast<double>(*c.provider.context_window)));
  } else {
    limits.emplace_back(
        "trigger", static_cast<std::size_t>(
                       c.compaction.threshold *
                       static_cast<double>(recap::EstimateTokens(c.limits.max_context_chars))));
  }

  // --- the page ---
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">";
  if (refresh_seconds > 0)
    h << "<meta http-equiv=\"refresh\" content=\"" << refresh_seconds << "\">";
  h << "<title>recap report: " << rp::Html(session) << "</title>\n<style>\n"
    << "body{font:15px/1.45 system-ui,sans-serif;margin:0;padding:1rem;color:#1d1d1f;"
       "background:#fbfbfd;max-width:1100px;margin:auto}"
       "h1{font-size:1.3rem;word-break:break-all}h2{font-size:1.1rem;margin-top:2rem}"
       ".summary{display:flex;flex-wrap:wrap;gap:.5rem 1.5rem}"
       ".summary div{background:#fff;border:1px solid #ddd;border-radius:6px;padding:.4rem .7rem}"
       "svg{width:100%;height:auto;background:#fff;border:1px solid #ddd;border-radius:6px}"
       ".point{fill:#2f6fde}.line{fill:none;stroke:#2f6fde;stroke-width:2}"
       ".limit{stroke-width:1.5;stroke-dasharray:6 4}.limit.hard-limit{stroke:#c62828}"
       ".limit.trigger{stroke:#ef8f00}.limit.window{stroke:#6a1b9a}"
       ".mark path{stroke:#fff;stroke-width:1}.mark.compaction path{fill:#2e7d32}"
       ".mark.reduction path{fill:#ef8f00}.mark.undo path{fill:#6a1b9a}"
       ".mark.provider path{fill:#00838f}"
       ".legend span{margin-right:.8rem}.chart-wrap{overflow-x:auto}"
       ".checkpoint-sections li,.checkpoint-sections p{overflow-wrap:anywhere}"
       "pre.ledger{white-space:pre-wrap;overflow-wrap:anywhere;font:13px/1.4 ui-monospace,"
       "monospace}"
       "ol{padding-left:1.5rem}li.msg{margin:.4rem 0;background:#fff;border:1px solid #e3e3e8;"
       "border-radius:6px;padding:.35rem .6rem;overflow-wrap:anywhere}"
       "li.msg pre,li.event pre{white-space:pre-wrap;margin:.2rem 0;font:13px/1.4 ui-monospace,"
       "monospace;max-height:18rem;overflow:auto}"
       ".role{font-weight:600;text-transform:uppercase;font-size:.75rem;color:#555}"
       ".badge{font-size:.7rem;border-radius:4px;padding:0 .3rem;margin-left:.4rem;color:#fff}"
       ".b-checkpoint{background:#2e7d32}.b-clipped{background:#ef8f00}"
       ".b-cleared{background:#8d6e63}li.checkpoint{border-color:#2e7d32}"
       "details.fold>summary{cursor:pointer;font-weight:600}"
       ".originals li{opacity:.85}"
       ".kind-filter{position:absolute;opacity:0;pointer-events:none}"
       ".filters label{margin-right:.8rem;white-space:nowrap;cursor:pointer;border:1px solid #ccc;"
       "border-radius:4px;padding:0 .4rem;display:inline-block;margin-bottom:.3rem}"
       "@media (max-width:600px){body{padding:.5rem;font-size:14px}svg#chart{min-width:640px}}\n";
  // The events' filter: one rule per kind.
  std::set<std::string> kinds;
  for (const nlohmann::json& ev : events) kinds.insert(ev.value("type", std::string("?")));
  std::size_t k = 0;
  std::map<std::string, std::size_t> kind_index;
  for (const std::string& kind : kinds) {
    kind_index[kind] = ++k;
    h << "#kind-" << k << ":checked~ol .event:not(.k" << k << "){display:none}"
      << "#kind-" << k << ":checked~.filters label[for=kind-" << k << "]{background:#2f6fde;"
      << "color:#fff}\n";
  }
  h << "#kind-0:checked~.filters label[for=kind-0]{background:#2f6fde;color:#fff}\n"
    << "</style></head><body>\n";
  h << "<h1>recap report: " << rp::Html(session) << "</h1>\n";
  std::size_t checkpoints = 0, clipped = 0, cleared = 0;
  for (const recap::Message& m : state->transcript) {
    if (m.summary) ++checkpoints;
    if (rp::HasText(m, recap::kTruncationMarker)) ++clipped;
    if (rp::HasText(m, recap::kClearedToolResultMarker)) ++cleared;
  }
  h << "<div class=\"summary\"><div>messages sent now: " << rp::Num(state->transcript.size())
    << "</div><div>ever stored: " << rp::Num(history.size())
    << "</div><div>turns: " << rp::Num(points.empty() ? 0 : points.back().turn)
    << "</div><div>tokens sent now: ~" << rp::Num(state->transcript.tokens())
    << "</div><div>compactions: " << rp::Num(compactions)
    << "</div><div>clipped: " << rp::Num(clipped) << "</div><div>cleared: " << rp::Num(cleared)
    << "</div></div>\n";

  // The chart.
  const double width = 960, height = 380, left = 84, right = 20, top = 28, bottom = 40;
  std::size_t max_tokens = 1;
  for (const rp::Point& p : points) max_tokens = std::max(max_tokens, p.tokens);
  for (const auto& [kind, tokens] : limits) max_tokens = std::max(max_tokens, tokens);
  // Up to a round number (1, 2 or 5 × 10^k), in four ticks.
  {
    std::size_t step = 1;
    while (step * 4 < max_tokens + max_tokens / 20) {
      if (step * 2 * 4 >= max_tokens + max_tokens / 20) {
        step *= 2;
      } else if (step * 5 * 4 >= max_tokens + max_tokens / 20) {
        step *= 5;
      } else {
        step *= 10;
      }
    }
    max_tokens = step * 4;
  }
  const std::uint64_t max_turn =
      points.empty() ? 1 : std::max<std::uint64_t>(1, points.back().turn);
  const auto x = [&](std::uint64_t turn) {
    return left +
           (width - left - right) * static_cast<double>(turn) / static_cast<double>(max_turn);
  };
  const auto y = [&](std::size_t tokens) {
    return top + (height - top - bottom) *
                     (1.0 - static_cast<double>(tokens) / static_cast<double>(max_tokens));
  };
  char buf[256];
  h << "<h2>Request size per turn</h2>\n<div class=\"chart-wrap\"><svg id=\"chart\" viewBox=\"0 0 "
    << width << " " << height << "\" role=\"img\" aria-label=\"estimated tokens sent per turn\">\n";
  h << "<line x1=\"" << left << "\" y1=\"" << height - bottom << "\" x2=\"" << width - right
    << "\" y2=\"" << height - bottom << "\" stroke=\"#999\"/>\n";
  for (int i = 0; i <= 4; ++i) {
    const std::size_t v = max_tokens * static_cast<std::size_t>(i) / 4;
    std::snprintf(buf, sizeof buf, "<text x=\"4\" y=\"%.1f\" font-size=\"13\">%s</text>\n",
                  y(v) + 4, rp::Num(v).c_str());
    h << buf;
  }
  std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\">turn %llu</text>\n",
                width - right - 70, height - 8, static_cast<unsigned long long>(max_turn));
  h << buf;
  for (const auto& [kind, tokens] : limits) {
    std::snprintf(buf, sizeof buf,
                  "<line class=\"limit %s\" data-kind=\"%s\" data-tokens=\"%zu\" x1=\"%.1f\" "
                  "y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"><title>",
                  kind.c_str(), kind.c_str(), tokens, left, y(tokens), width - right, y(tokens));
    h << buf << rp::Html(kind) << ": ~" << rp::Num(tokens) << " tokens</title></line>\n";
  }
  if (!points.empty()) {
    // The line goes up to what a turn held before its compactions, then down to what it
    // sent: a compaction is a drop.
    std::map<std::uint64_t, std::size_t> peak;
    for (const rp::Mark& m : marks) peak[m.turn] = std::max(peak[m.turn], m.before_tokens);
    h << "<polyline class=\"line\" points=\"";
    for (const rp::Point& p : points) {
      const auto it = peak.find(p.turn);
      if (it != peak.end() && it->second > p.tokens) {
        std::snprintf(buf, sizeof buf, "%.1f,%.1f ", x(p.turn), y(it->second));
        h << buf;
      }
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", x(p.turn), y(p.tokens));
      h << buf;
    }
    h << "\"/>\n";
  }
  for (const rp::Point& p : points) {
    std::snprintf(buf, sizeof buf,
                  "<circle class=\"point\" data-turn=\"%llu\" data-tokens=\"%zu\" cx=\"%.1f\" "
                  "cy=\"%.1f\" r=\"%s\"><title>turn %llu: ~%s tokens</title></circle>\n",
                  static_cast<unsigned long long>(p.turn), p.tokens, x(p.turn), y(p.tokens),
                  points.size() > 400 ? "1.2" : "3", static_cast<unsigned long long>(p.turn),
                  rp::Num(p.tokens).c_str());
    h << buf;
  }
  for (const rp::Mark& m : marks) {
    // A triangle above the chart, pointing down a dotted line to the turn: it covers no point.
    const double mx = x(m.turn);
    std::snprintf(buf, sizeof buf,
                  "<g class=\"mark %s\" data-kind=\"%s\" data-turn=\"%llu\" data-commit=\"%s\">"
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#bbb\" "
                  "stroke-dasharray=\"2 3\"/><path d=\"M%.1f %.1f l-7 -12 h14 z\"/><title>",
                  m.kind.c_str(), m.kind.c_str(), static_cast<unsigned long long>(m.turn),
                  m.commit.c_str(), mx, top, mx, height - bottom, mx, top);
    h << buf << rp::Html(m.kind) << " at turn " << m.turn;
    if (m.kind != "provider") {
      h << ": ~" << rp::Num(m.before_tokens) << " → ~" << rp::Num(m.after_tokens) << " tokens, "
        << rp::Num(m.span) << " message" << (m.span == 1 ? "" : "s") << " replaced";
    }
    if (!m.detail.empty()) h << "\n" << rp::Html(m.detail);
    h << "</title></g>\n";
  }
  h << "</svg></div>\n<p class=\"legend\"><span>● estimated tokens sent</span> ";
  std::set<std::string> drawn;
  for (const auto& [kind, tokens] : limits) drawn.insert(kind);
  for (const rp::Mark& m : marks) drawn.insert(m.kind);
  const std::pair<const char*, const char*> legend[] = {
      {"trigger", "<span style=\"color:#ef8f00\">- - trigger</span> "},
      {"hard-limit", "<span style=\"color:#c62828\">- - hard limit</span> "},
      {"window", "<span style=\"color:#6a1b9a\">- - window</span> "},
      {"compaction", "<span style=\"color:#2e7d32\">▼ compaction</span> "},
      {"reduction", "<span style=\"color:#ef8f00\">▼ reduction (clearing or clip)</span> "},
      {"undo", "<span style=\"color:#6a1b9a\">▼ compaction undone</span> "},
      {"provider", "<span style=\"color:#00838f\">▼ provider checkpoint</span> "}};
  for (const auto& [kind, html] : legend) {
    if (drawn.count(kind) != 0) h << html;
  }
  h << "</p>\n";

  // The conversation as sent now, checkpoints folding what they replaced.
  std::map<std::string, std::size_t> active_index_by_id;
  for (std::size_t i = 0; i < history.size(); ++i) {
    if (history[i].state == recap::HistoryState::kActive) {
      active_index_by_id[history[i].message.id] = i;
    }
  }
  const auto message_li = [&](const recap::Message& m, const std::string& extra_class) {
    std::string cls = "msg";
    std::string badges;
    if (rp::HasText(m, recap::kTruncationMarker)) {
      cls += " clipped";
      badges += "<span class=\"badge b-clipped\">clipped</span>";
    }
    if (rp::HasText(m, recap::kClearedToolResultMarker)) {
      cls += " cleared";
      badges += "<span class=\"badge b-cleared\">cleared</span>";
    }
    if (!extra_class.empty()) cls += " " + extra_class;
    std::ostringstream li;
    li << "<li class=\"" << cls << "\" data-role=\"" << recap::RoleName(m.role) << "\" id=\"m-"
       << rp::Html(m.id) << "\"><span class=\"role\">" << recap::RoleName(m.role) << "</span>"
       << badges << "<pre>" << rp::HtmlText(rp::MessageText(m)) << "</pre></li>\n";
    return li.str();
  };
  h << "<h2>The conversation as it is sent now</h2>\n<ol id=\"conversation\">\n";
  // A checkpoint, folding what it replaced — among which an earlier checkpoint folds what it
  // replaced, and so on back to the first.
  std::function<void(std::size_t, const std::string&, int)> checkpoint_li =
      [&](std::size_t index, const std::string& extra_class, int depth) {
        const recap::Message& m = history[index].message;
        const auto c2 = checkpoint_commit.find(index);
        const std::string commit = c2 == checkpoint_commit.end() ? "" : c2->second;
        const std::vector<std::size_t>& originals = retired_by[commit];
        h << "<li class=\"msg checkpoint" << (extra_class.empty() ? "" : " " + extra_class)
          << "\" data-role=\"" << recap::RoleName(m.role)
          << "\"><span class=\"role\">checkpoint</span><span class=\"badge b-checkpoint\">"
          << rp::Html(commit) << "</span><details class=\"fold\" data-commit=\"" << rp::Html(commit)
          << "\"><summary>replaces " << rp::Num(originals.size()) << " message"
          << (originals.size() == 1 ? "" : "s")
          << " — open to see them</summary><ol class=\"originals\">\n";
        for (const std::size_t j : originals) {
          if (history[j].message.summary && depth < 64) {
            checkpoint_li(j, "original", depth + 1);
          } else {
            h << message_li(history[j].message, "original");
          }
        }
        h << "</ol></details><pre>" << rp::HtmlText(rp::MessageText(m)) << "</pre></li>\n";
      };
  for (const recap::Message& m : state->transcript) {
    const auto it = active_index_by_id.find(m.id);
    if (m.summary && it != active_index_by_id.end()) {
      checkpoint_li(it->second, "", 0);
    } else {
      h << message_li(m, "");
    }
  }
  // Every checkpoint written, newest first, for the sections below.
  std::vector<std::pair<std::string, recap::Checkpoint>> sections;
  for (auto it = checkpoint_commit.rbegin(); it != checkpoint_commit.rend(); ++it) {
    const recap::HistoryEntry& e = history[it->first];
    std::string title = it->second;
    if (e.state != recap::HistoryState::kActive) {
      title += e.replaced_by.rfind("undo:", 0) == 0 ? " (undone)" : " (replaced by a later one)";
    }
    sections.emplace_back(title, recap::ParseRenderedCheckpoint(rp::MessageText(e.message)));
  }
  h << "</ol>\n";

  // Each checkpoint's sections, and what recap kept beside the summarizer.
  h << "<h2>Checkpoints</h2>\n";
  if (sections.empty()) h << "<p>No checkpoint is sent now.</p>\n";
  for (const auto& [commit, cp] : sections) {
    h << "<section class=\"checkpoint-sections\" data-commit=\"" << rp::Html(commit) << "\"><h3>"
      << rp::Html(commit) << "</h3>\n";
    const auto list = [&](const char* title, const std::vector<std::string>& items) {
      if (items.empty()) return;
      h << "<h4>" << title << "</h4><ul>";
      for (const std::string& item : items) h << "<li>" << rp::Html(item) << "</li>";
      h << "</ul>\n";
    };
    if (cp.structured) {
      if (!cp.goal.empty()) h << "<h4>Goal</h4><p>" << rp::Html(cp.goal) << "</p>\n";
      list("Instructions", cp.instructions);
      list("Discoveries", cp.discoveries);
      list("Accomplished", cp.accomplished);
      if (!cp.current_state.empty()) {
        h << "<h4>Current state</h4><p>" << rp::Html(cp.current_state) << "</p>\n";
      }
      list("Next steps", cp.next_steps);
      std::vector<std::string> files;
      for (const recap::RelevantFile& f : cp.relevant_files) {
        files.push_back(f.path + (f.why.empty() ? "" : " — " + f.why));
      }
      list("Relevant files", files);
    } else {
      h << "<h4>Summary</h4><pre>" << rp::HtmlText(cp.text) << "</pre>\n";
    }
    h << "<h4>Kept by recap (the ledger)</h4>";
    if (cp.kept_by_recap.empty()) {
      h << "<p class=\"ledger\">Nothing: the summarizer kept everything the ledger asked for.</p>";
    } else {
      h << "<pre class=\"ledger\">" << rp::HtmlText(cp.kept_by_recap) << "</pre>";
    }
    h << "</section>\n";
  }

  // The events, filtered by kind with radio buttons and CSS (no script): the buttons come
  // before the list, so that `:checked ~ ol` reaches it.
  h << "<h2>Events</h2>\n<section id=\"events\">\n";
  if (events.empty()) {
    h << "<p>No events given: write them with <code>recap proxy --events FILE</code> or a "
         "host's event sink, and pass the file with <code>--events</code>.</p>\n";
  } else {
    h << "<input class=\"kind-filter\" type=\"radio\" name=\"kind\" id=\"kind-0\" checked>";
    for (const auto& [kind, index] : kind_index) {
      h << "<input class=\"kind-filter\" type=\"radio\" name=\"kind\" id=\"kind-" << index
        << "\" data-kind=\"" << rp::Html(kind) << "\">";
    }
    h << "<div class=\"filters\"><label for=\"kind-0\">all (" << rp::Num(events.size())
      << ")</label>";
    std::map<std::string, std::size_t> per_kind;
    for (const nlohmann::json& ev : events) ++per_kind[ev.value("type", std::string("?"))];
    for (const auto& [kind, index] : kind_index) {
      h << "<label for=\"kind-" << index << "\">" << rp::Html(kind) << " ("
        << rp::Num(per_kind[kind]) << ")</label>";
    }
    h << "</div>\n<ol>\n";
    for (const nlohmann::json& ev : events) {
      const std::string kind = ev.value("type", std::string("?"));
      h << "<li class=\"event k" << kind_index[kind] << "\" data-kind=\"" << rp::Html(kind)
        << "\"><b>" << rp::Html(kind) << "</b><pre>"
        << rp::HtmlText(ev.dump(2, ' ', false, nlohmann::json::error_handler_t::replace))
        << "</pre></li>\n";
    }
    h << "</ol>\n";
  }
  h << "</section>\n";
  h << "<p><small>Written by recap " << rp::Html(std::string(recap::Version()))
    << ". Token counts are recap's estimate (characters / 4) of the messages sent, without "
       "the request's system prompt and tools.</small></p>\n</body></html>\n";

  return h.str();
}

std::string HtmlEscape(const std::string& text) { return report::Html(text); }

int RunReport(const std::vector<std::string>& words) {
  namespace rp = report;
  std::vector<OptionSpec> specs = {
      {"session", true}, {"output", true}, {"o", true}, {"db", true}, {"events", true}};
  for (const OptionSpec& s : ConfigOptions()) specs.push_back(s);
  Args args;
  args.command = "report";
  std::string error;
  // `-o FILE` as well as `--output FILE`.
  std::vector<std::string> normalized;
  for (const std::string& w : words) normalized.push_back(w == "-o" ? "--o" : w);
  if (!ParseArgs(normalized, specs, &args, &error)) return UsageError(args, error);
  if (args.Has("help")) {
    std::cout << rp::kHelp << "\n" << kConfigHelp;
    return kExitOk;
  }
  if (!args.Has("session")) {
    return UsageError(args, "--session ID is required: recap report --session ID -o report.html");
  }
  const std::string output = args.Has("output") ? args.Get("output") : args.Get("o");
  if (output.empty()) {
    return UsageError(args, "name the page to write with -o FILE, e.g. -o report.html");
  }
  const std::string session = args.Get("session");
  if (!ValidSessionId(session, &error)) return UsageError(args, error);
  bool usage = false;
  recap::Result<recap::Config> config = BuildConfig(args, &usage);
  if (!config.ok()) {
    return usage ? UsageError(args, config.status().message()) : Failure(args, config.status());
  }
  const std::string db = args.Get("db", kDefaultDb);
  if (!CheckDb(db, &error)) return UsageError(args, error);
  recap::Result<std::shared_ptr<recap::SessionStore>> store = OpenStore(db, Access::kRead);
  if (!store.ok()) return Failure(args, store.status());
  recap::Result<recap::SessionState> state = LoadExisting(**store, db, session);
  if (!state.ok()) return Failure(args, state.status());

  // The events of this session, from --events.
  std::vector<nlohmann::json> events;
  if (args.Has("events")) {
    std::string text;
    if (!ReadBounded(args.Get("events"), kDefaultMaxInputBytes,
                     "the events file '" + Shown(args.Get("events")) + "' (--events)",
                     "--max-input-bytes", "Check the path given with --events", &text, &error)) {
      return Failure(args, error);
    }
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
      if (e.is_object() && e.value("session", std::string()) == session) {
        events.push_back(std::move(e));
      }
    }
  }

  recap::Result<std::string> built = ReportPage(**store, session, *config, events);
  if (!built.ok()) return Failure(args, built.status());
  const std::string& page = *built;
  if (output == "-") {
    std::cout << page;
    std::cout.flush();
    if (!std::cout) return Failure(args, "could not write the page to standard output");
  } else {
    std::ofstream out(output, std::ios::binary | std::ios::trunc);
    out << page;
    out.close();
    if (!out) {
      return Failure(args, "could not write '" + Shown(output) +
                               "': check that its folder exists and can be written");
    }
    std::cerr << "recap report: wrote " << Shown(output) << " (" << Bytes(page.size()) << ")\n";
  }
  return kExitOk;
}

}  // namespace recap_cli
