// recap CLI — what `recap prepare` keeps for the next prepare (prepare_kept.h).
#include "prepare_kept.h"

#include <errno.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <sys/stat.h>

#include "recap/version.h"

namespace recap_cli {
namespace prepare_kept {

constexpr int kMemoForm = 1;  // the memo's layout; a memo of another is not read

int FormatCode(const std::string& format) {
  if (format == "openai-chat") return 1;
  if (format == "anthropic") return 2;
  if (format == "openai-responses") return 3;
  if (format == "recap") return 4;
  return 0;
}

// Each message's own encoded form in `format` ("" when the format writes nothing of it), as
// the codec keeps it: what the document's messages array joins with ','.
recap::Status EncodeEach(const std::string& format, const recap::Transcript& t,
                         std::vector<std::string>* out) {
  out->clear();
  out->reserve(t.size());
  std::vector<std::string_view> parts;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const recap::Transcript one = t.Slice(i, i + 1);
    recap::Status s;
    if (format == "openai-chat") {
      s = recap::openai_chat::EncodeTranscriptParts(one, 0, &parts);
    } else if (format == "anthropic") {
      s = recap::anthropic::EncodeTranscriptParts(one, 0, &parts);
    } else if (format == "openai-responses") {
      s = recap::openai_responses::EncodeTranscriptParts(one, 0, &parts);
    } else {
      s = recap::native::EncodeTranscriptParts(one, 0, &parts);
    }
    if (!s.ok()) return s;
    out->emplace_back(parts.empty() ? std::string_view() : parts.front());
  }
  return recap::Status::OK();
}

// Standard output, written with write(2) in blocks of 128 KiB; big pieces go out as they are.
class Out {
 public:
  Out() { buffer_.reserve(kBlock); }
  ~Out() { Flush(); }
  void Put(std::string_view s) {
    if (s.size() >= kDirect) {
      Flush();
      Write(s);
      return;
    }
    if (buffer_.size() + s.size() > kBlock) Flush();
    buffer_.append(s.data(), s.size());
  }
  void Flush() {
    Write(buffer_);
    buffer_.clear();
  }
  bool failed() const { return failed_; }

 private:
  static constexpr std::size_t kBlock = std::size_t{1} << 17;   // stays in the cache
  static constexpr std::size_t kDirect = std::size_t{1} << 14;  // written without a copy
  void Write(std::string_view s) {
    while (!s.empty() && !failed_) {
      const ssize_t n = ::write(STDOUT_FILENO, s.data(), s.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        failed_ = true;
        break;
      }
      s.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  std::string buffer_;
  bool failed_ = false;
};

std::uint64_t Fnv(std::string_view s, std::uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// The memo: what the last prepare left, as kept in the file.
struct Memo {
  std::string key;
  std::uint64_t version = 0;
  std::uint64_t companion = 0;
  std::size_t messages = 0;
  std::size_t chars = 0;               // Transcript::chars of the messages
  std::size_t instructions_chars = 0;  // the stored instructions' size, when counted
  std::size_t trigger_tokens = 0;
  std::size_t trigger_chars = 0;
  std::optional<std::size_t> window;  // the model's window, when the configuration gives it
  std::vector<std::string> open;      // the ids of the calls without a result yet
  std::string head, tail;             // the document around the messages

  std::string Text() const {
    Json j = {{"form", kMemoForm},
              {"key", key},
              {"version", version},
              {"companion", companion},
              {"messages", messages},
              {"chars", chars},
              {"instructions_chars", instructions_chars},
              {"trigger_tokens", trigger_tokens},
              {"trigger_chars", trigger_chars},
              {"window", window ? Json(*window) : Json()},
              {"open", open},
              {"head", head},
              {"tail", tail}};
    return j.dump(-1, ' ', false, Json::error_handler_t::strict);
  }

  // False when the text is not a memo of this form (written by another recap, or damaged).
  bool Read(const std::string& text) {
    const Json j = Json::parse(text, nullptr, false);
    if (!j.is_object()) return false;
    const auto count = [&j](const char* name, std::size_t* out) {
      const auto it = j.find(name);
      if (it == j.end() || !it->is_number_unsigned()) return false;
      *out = it->get<std::size_t>();
      return true;
    };
    const auto text_of = [&j](const char* name, std::string* out) {
      const auto it = j.find(name);
      if (it == j.end() || !it->is_string()) return false;
      *out = it->get<std::string>();
      return true;
    };
    std::size_t form = 0, v = 0, c = 0;
    if (!count("form", &form) || form != kMemoForm || !text_of("key", &key) ||
        !count("version", &v) || !count("companion", &c) || !count("messages", &messages) ||
        !count("chars", &chars) || !count("instructions_chars", &instructions_chars) ||
        !count("trigger_tokens", &trigger_tokens) || !count("trigger_chars", &trigger_chars) ||
        !text_of("head", &head) || !text_of("tail", &tail)) {
      return false;
    }
    version = v;
    companion = c;
    const auto w = j.find("window");
    if (w == j.end()) return false;
    if (w->is_number_unsigned()) {
      window = w->get<std::size_t>();
    } else if (!w->is_null()) {
      return false;
    }
    const auto o = j.find("open");
    if (o == j.end() || !o->is_array()) return false;
    for (const Json& id : *o) {
      if (!id.is_string()) return false;
      open.push_back(id.get<std::string>());
    }
    return true;
  }
};

// The triggers' thresholds as the Compactor computes them (R2.1, R2.2; compaction.threshold
// times the window, or maxContextChars / 4 tokens when the window is unknown).
void Thresholds(const recap::Config& config, const recap::Prepared& p, Memo* memo) {
  const double threshold = config.compaction.threshold;
  const std::size_t window = p.window_tokens ? *p.window_tokens : p.fallback_window_tokens;
  memo->trigger_tokens =
      static_cast<std::size_t>(std::floor(threshold * static_cast<double>(window)));
  memo->trigger_chars = static_cast<std::size_t>(
      std::floor(threshold * static_cast<double>(config.limits.max_context_chars)));
  memo->window = p.window_tokens;
}

// The file, through SQLite itself: the tables the store's schema keeps for the command
// (docs/sqlite-store.md, version 4), beside the store's own connection. The store opened the
// file first (and migrated it); this connection reads and writes only what the command keeps,
// and reads the session's rows for their seqs and the stream.
class KeptFile {
 public:
  // A statement, finalized when it goes.
  class Statement {
   public:
    Statement(sqlite3* db, const char* sql) {
      if (sqlite3_prepare_v2(db, sql, -1, &st_, nullptr) != SQLITE_OK) st_ = nullptr;
    }
    ~Statement() { sqlite3_finalize(st_); }
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;
    sqlite3_stmt* get() const { return st_; }
    void Bind(int i, std::int64_t v) { sqlite3_bind_int64(st_, i, v); }
    void Bind(int i, const std::string& v) {
      sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
    }
    void BindBlob(int i, std::string_view v) {
      // A zero-length blob, not NULL, for an empty encoding.
      sqlite3_bind_blob64(st_, i, v.empty() ? "" : v.data(), v.size(), SQLITE_STATIC);
    }
    int Step() { return st_ == nullptr ? SQLITE_ERROR : sqlite3_step(st_); }
    std::int64_t Int(int i) const { return sqlite3_column_int64(st_, i); }
    std::string Text(int i) const {
      const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st_, i));
      return p == nullptr ? std::string()
                          : std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, i)));
    }
    bool Null(int i) const { return sqlite3_column_type(st_, i) == SQLITE_NULL; }
    std::string_view Blob(int i) const {
      const void* p = sqlite3_column_blob(st_, i);
      return std::string_view(static_cast<const char*>(p),
                              static_cast<std::size_t>(sqlite3_column_bytes(st_, i)));
    }

   private:
    sqlite3_stmt* st_ = nullptr;
  };

  // Null when the file cannot be opened or predates the tables (a version-3 file opened by an
  // older recap, which this command then prepares in full).
  static std::unique_ptr<KeptFile> Open(const std::string& path) {
    recap::Result<recap::SqliteStoreOptions> options = SqliteOptions(Access::kWrite);
    if (!options.ok()) return nullptr;
    std::unique_ptr<KeptFile> f(new KeptFile);
    if (sqlite3_open_v2(path.c_str(), &f->db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                        nullptr) != SQLITE_OK) {
      return nullptr;
    }
    sqlite3_busy_timeout(f->db_, static_cast<int>(options->busy_timeout_ms));
    // The encodings are read once, in order, straight out of the file's pages: mapped rather
    // than read into SQLite's page cache first (a prepare prints every byte of them).
    f->Exec("PRAGMA mmap_size = 1099511627776");
    Statement version(f->db_, "PRAGMA user_version");
    if (version.Step() != SQLITE_ROW || version.Int(0) < 4) return nullptr;
    return f;
  }
  ~KeptFile() { sqlite3_close_v2(db_); }
  KeptFile(const KeptFile&) = delete;
  KeptFile& operator=(const KeptFile&) = delete;

  bool Exec(const char* sql) {
    return sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) == SQLITE_OK;
  }
  sqlite3* db() const { return db_; }

  // The session's id and version, when it exists.
  bool Session(const std::string& name, std::int64_t* id, std::uint64_t* version,
               std::uint64_t* rewrite_version) {
    Statement st(db_, "SELECT session_id, version, rewrite_version FROM sessions WHERE name = ?");
    st.Bind(1, name);
    if (st.Step() != SQLITE_ROW) return false;
    *id = st.Int(0);
    *version = static_cast<std::uint64_t>(st.Int(1));
    if (rewrite_version != nullptr) *rewrite_version = static_cast<std::uint64_t>(st.Int(2));
    return true;
  }

  // Inside a write transaction: the memo for the session's format.
  bool PutMemo(std::int64_t session_id, int format, const std::string& memo) {
    Statement put(db_,
                  "INSERT INTO prepare_memos (session_id, format, memo) VALUES (?, ?, ?) ON "
                  "CONFLICT (session_id, format) DO UPDATE SET memo = excluded.memo");
    put.Bind(1, session_id);
    put.Bind(2, format);
    put.Bind(3, memo);
    return put.Step() == SQLITE_DONE;
  }
  // Inside a write transaction: one message's encoding.
  bool PutEncoding(std::int64_t seq, int format, std::string_view body) {
    if (!insert_) {
      insert_ = std::make_unique<Statement>(
          db_, "INSERT OR IGNORE INTO encodings (key, body) VALUES (?, ?)");
    }
    sqlite3_reset(insert_->get());
    insert_->Bind(1, seq * 4 + (format - 1));
    insert_->BindBlob(2, body);
    return insert_->Step() == SQLITE_DONE;
  }
  // Runs `write` in a write transaction and commits when it returns true.
  bool Write(const std::function<bool()>& write) {
    if (!Exec("BEGIN IMMEDIATE")) return false;
    if (write() && Exec("COMMIT")) return true;
    Exec("ROLLBACK");
    return false;
  }

 private:
  KeptFile() = default;
  sqlite3* db_ = nullptr;
  std::unique_ptr<Statement> insert_;
};

}  // namespace prepare_kept

using prepare_kept::KeptFile;
using prepare_kept::Memo;

std::string ForeignOpaqueKind(const recap::Message& m, const std::string& format) {
  const std::optional<recap::Origin> target = recap::ParseOrigin(format);
  if (!target || m.origin == recap::Origin::kNone || m.origin == *target) return {};
  for (const recap::Part& p : m.parts) {
    if (const auto* o = std::get_if<recap::Opaque>(&p)) return o->kind;
    if (const auto* r = std::get_if<recap::ToolResult>(&p)) {
      for (const recap::ResultItem& item : r->content) {
        if (const auto* o = std::get_if<recap::Opaque>(&item)) return o->kind;
      }
    }
  }
  return {};
}

std::string PrepareKey(const Args& args, const std::string& config_text) {
  std::string key = std::string("recap ") + RECAP_VERSION_STRING;
  for (const char* name : {"format", "max-context-chars", "keep-turns", "provider",
                           "instructions-chars", "tool-catalog-chars"}) {
    key += '\n';
    key += name;
    if (args.Has(name)) key += "=" + args.Get(name);
  }
  key += "\nconfig ";
  // Two hashes of the configuration's text (up to a megabyte): the memo need not hold it.
  char buf[64];
  std::snprintf(
      buf, sizeof buf, "%zu %016llx %016llx", config_text.size(),
      static_cast<unsigned long long>(prepare_kept::Fnv(config_text, 14695981039346656037ULL)),
      static_cast<unsigned long long>(prepare_kept::Fnv(config_text, 0x9e3779b97f4a7c15ULL)));
  return key + buf;
}

bool MayKeep(const PrepareCall& call) {
  const char* env = std::getenv("RECAP_PREPARE_CACHE");
  if (env != nullptr && (std::strcmp(env, "off") == 0 || std::strcmp(env, "0") == 0)) {
    return false;
  }
  const Args& args = *call.args;
  // --json prints a result object; a terminal gets the document indented.
  if (args.json() || ::isatty(STDOUT_FILENO) == 1) return false;
  if (args.Get("provider", "offline") != "offline") return false;
  if (IsPostgresUrl(args.Get("db", kDefaultDb))) return false;
  return prepare_kept::FormatCode(call.format) != 0;
}

bool ServeKept(const PrepareCall& call, int* exit_code) {
  const std::string db = call.args->Get("db", kDefaultDb);
  struct stat st {};
  if (::stat(db.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) return false;
  // The store opens (and migrates) the file first; what it cannot open, the full prepare says.
  recap::Result<std::shared_ptr<recap::SessionStore>> store = OpenStore(db, Access::kWrite);
  if (!store.ok()) return false;
  std::unique_ptr<KeptFile> file = KeptFile::Open(db);
  if (!file) return false;
  const int format = prepare_kept::FormatCode(call.format);

  // One read transaction: the session's row, the memo, the messages appended since and the
  // kept encodings are one state of the file. The appended messages come from the store
  // (LoadChanges, its own connection) and must be of that very version.
  if (!file->Exec("BEGIN")) return false;
  struct ReadTransaction {
    KeptFile* f;
    bool open = true;
    void End() {
      if (open) f->Exec("ROLLBACK");
      open = false;
    }
    ~ReadTransaction() { End(); }
  } reading{file.get()};
  std::int64_t session_id = 0;
  std::uint64_t version = 0, rewrite_version = 0;
  if (!file->Session(call.session, &session_id, &version, &rewrite_version)) return false;
  std::uint64_t companion = 0;  // 0: the session has no instructions
  std::int64_t companion_id = 0;
  (void)file->Session(kInstructionsPrefix + call.session, &companion_id, &companion, nullptr);
  Memo memo;
  std::size_t active = 0;
  {
    KeptFile::Statement st(file->db(),
                           "SELECT memo FROM prepare_memos WHERE session_id = ? AND format = ?");
    st.Bind(1, session_id);
    st.Bind(2, format);
    if (st.Step() != SQLITE_ROW || !memo.Read(st.Text(0))) return false;
    KeptFile::Statement count(
        file->db(), "SELECT count(*) FROM messages WHERE session_id = ? AND position IS NOT NULL");
    count.Bind(1, session_id);
    if (count.Step() != SQLITE_ROW) return false;
    active = static_cast<std::size_t>(count.Int(0));
  }
  if (memo.key != call.key || memo.companion != companion || memo.version > version ||
      rewrite_version > memo.version) {
    return false;
  }
  recap::Result<recap::SessionChanges> changes = (*store)->LoadChanges(call.session, memo.version);
  if (!changes.ok() || !changes->appended_only || changes->version != version ||
      !changes->learned.empty() || active != memo.messages + changes->appended.size()) {
    return false;
  }
  recap::Transcript added;
  for (recap::Message& m : changes->appended) {
    if (recap::FindProviderCheckpoint(m) || !ForeignOpaqueKind(m, call.format).empty())
      return false;
    added.Append(std::move(m));
  }
  // Their rows, in order.
  std::vector<std::int64_t> seqs;
  {
    KeptFile::Statement st(file->db(),
                           "SELECT seq, message_id FROM messages WHERE session_id = ? AND "
                           "position IS NOT NULL AND stored_version > ? ORDER BY position");
    st.Bind(1, session_id);
    st.Bind(2, static_cast<std::int64_t>(memo.version));
    int rc = SQLITE_ROW;
    while ((rc = st.Step()) == SQLITE_ROW) {
      if (seqs.size() >= added.size() || st.Text(1) != added[seqs.size()].id) return false;
      seqs.push_back(st.Int(0));
    }
    if (rc != SQLITE_DONE || seqs.size() != added.size()) return false;
  }
  // Every new result answers a call before it, and the calls still open are known: judged as
  // the transcript judges it, on the open calls followed by the new messages.
  recap::Transcript probe;
  if (!memo.open.empty()) {
    recap::Message calls;
    calls.role = recap::Role::kAssistant;
    calls.id = "recap-cli.open-calls";
    for (const std::string& id : memo.open)
      calls.parts.emplace_back(recap::ToolCall{id, "", "{}", ""});
    probe.Append(std::move(calls));
  }
  for (const recap::Message& m : added) probe.Append(m);
  if (probe.pairing() == recap::Transcript::Pairing::kUnknown) return false;

  // What Prepare decides (R2, R5): nothing, when no trigger is reached and the request is
  // within the hard limit and the window.
  const recap::Config& config = call.config;
  const std::size_t instructions =
      call.instructions_given ? call.sizes.instructions_chars : memo.instructions_chars;
  const std::size_t chars = memo.chars + added.chars();
  const std::size_t full = instructions + chars + call.sizes.tool_catalog_chars;
  if (config.compaction.auto_compact &&
      (recap::EstimateTokens(full) >= memo.trigger_tokens || full >= memo.trigger_chars)) {
    return false;
  }
  if (instructions + chars > config.limits.max_context_chars) return false;
  if (memo.window && recap::EstimateTokens(full) > *memo.window) return false;
  std::vector<std::string> encoded;
  if (!prepare_kept::EncodeEach(call.format, added, &encoded).ok()) return false;

  // Printed as the full prepare prints it: the text before the messages, their kept encodings
  // and the new ones joined by ',', the text after, a newline. The new messages are the last
  // rows; any other row without an encoding means the file was changed by something else than
  // recap.
  prepare_kept::Out out;
  out.Put(memo.head);
  bool first = true;
  const auto element = [&](std::string_view e) {
    if (e.empty()) return;
    if (!first) out.Put(",");
    out.Put(e);
    first = false;
  };
  bool damaged = false;
  std::size_t k = 0;
  {
    KeptFile::Statement st(file->db(),
                           "SELECT m.seq, e.body FROM messages m LEFT JOIN encodings e ON e.key "
                           "= m.seq * 4 + ? WHERE m.session_id = ? AND m.position IS NOT NULL "
                           "ORDER BY m.position");
    st.Bind(1, format - 1);
    st.Bind(2, session_id);
    int rc = SQLITE_ROW;
    while ((rc = st.Step()) == SQLITE_ROW) {
      const std::int64_t seq = st.Int(0);
      if (k < seqs.size() && seq == seqs[k]) {
        element(encoded[k++]);
      } else if (!st.Null(1) && k == 0) {
        element(st.Blob(1));
      } else {
        damaged = true;
        break;
      }
    }
    damaged = damaged || rc != SQLITE_DONE || k != seqs.size();
  }
  if (damaged) {
    out.Flush();
    reading.End();
    file->Write([&] {
      KeptFile::Statement drop(file->db(),
                               "DELETE FROM prepare_memos WHERE session_id = ? AND format = ?");
      drop.Bind(1, session_id);
      drop.Bind(2, format);
      return drop.Step() == SQLITE_DONE;
    });
    *exit_code =
        Failure(*call.args, "what recap keeps in " + Shown(db) + " to prepare session '" +
                                Shown(call.session) +
                                "' quickly is incomplete (the file was changed by something else "
                                "than recap), so the document printed is incomplete: do not send "
                                "it. It was forgotten; run the same command again");
    return true;
  }
  out.Put(memo.tail);
  out.Put("\n");
  out.Flush();
  if (out.failed()) {
    *exit_code = Failure(*call.args, "could not write the document to standard output (" +
                                         std::string(std::strerror(errno)) + ")");
    return true;
  }
  reading.End();  // it only read
  if (const char* env = std::getenv("RECAP_PREPARE_CACHE");
      env != nullptr && std::strcmp(env, "trace") == 0) {
    std::cerr << "recap prepare: printed from what the last prepare kept\n";
  }
  *exit_code = kExitOk;
  // Kept for the next prepare, unless the memo holds as it is; a failure here only makes the
  // next one run in full.
  if (added.empty() && version == memo.version) return true;
  Memo next = memo;
  next.version = version;
  next.messages = memo.messages + added.size();
  next.chars = chars;
  next.open.clear();
  for (const auto& c : probe.open_calls()) next.open.push_back(c.id);
  file->Write([&] {
    std::int64_t id = 0;
    std::uint64_t now = 0;
    if (!file->Session(call.session, &id, &now, nullptr) || now != version) return false;
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      if (!file->PutEncoding(seqs[i], format, encoded[i])) return false;
    }
    return file->PutMemo(id, format, next.Text());
  });
  return true;
}

void KeepForNext(const PrepareCall& call, const recap::Prepared& prepared,
                 const std::optional<recap::Message>& instructions,
                 std::uint64_t instructions_version, const std::string& doc) {
  const recap::Transcript& t = prepared.messages;
  if (t.empty() || prepared.over_window || !prepared.orphan_results.empty() ||
      t.pairing() == recap::Transcript::Pairing::kUnknown ||
      (prepared.window_source != "config" && prepared.window_source != "fallback")) {
    return;
  }
  for (const recap::Message& m : t) {
    if (recap::FindProviderCheckpoint(m)) return;
  }
  std::vector<std::string> encoded;
  if (!prepare_kept::EncodeEach(call.format, t, &encoded).ok()) return;
  std::string joined;
  for (const std::string& e : encoded) {
    if (e.empty()) continue;
    if (!joined.empty()) joined += ',';
    joined += e;
  }
  if (joined.empty() || encoded[0].empty()) return;
  const std::size_t at = doc.find(joined);
  if (at == std::string::npos) return;
  Memo memo;
  memo.head = doc.substr(0, at);
  memo.tail = doc.substr(at + joined.size());
  // The split holds for another transcript too: the document of the first message alone is the
  // same text around that message's encoding.
  {
    recap::Conversation one;
    one.instructions = instructions;
    one.messages.push_back(t[0]);
    recap::Result<std::string> alone = EncodeDocument(call.format, one);
    if (!alone.ok() || *alone != memo.head + encoded[0] + memo.tail) return;
  }
  memo.key = call.key;
  memo.version = prepared.version;
  memo.companion = instructions_version;
  memo.messages = t.size();
  memo.chars = t.chars();
  memo.instructions_chars = instructions ? recap::MessageChars(*instructions) : 0;
  prepare_kept::Thresholds(call.config, prepared, &memo);
  for (const auto& c : t.open_calls()) memo.open.push_back(c.id);

  std::unique_ptr<KeptFile> file = KeptFile::Open(call.args->Get("db", kDefaultDb));
  if (!file) return;
  const int format = prepare_kept::FormatCode(call.format);
  std::unordered_map<std::string_view, std::string_view> by_id;
  by_id.reserve(t.size());
  for (std::size_t i = 0; i < t.size(); ++i) by_id.emplace(t[i].id, encoded[i]);
  file->Write([&] {
    std::int64_t id = 0;
    std::uint64_t version = 0;
    if (!file->Session(call.session, &id, &version, nullptr) || version != prepared.version) {
      return false;
    }
    // The session's active messages without an encoding in the format, then their inserts (a
    // statement is not stepped while another writes what it reads).
    std::vector<std::pair<std::int64_t, std::string_view>> missing;
    {
      KeptFile::Statement rows(file->db(),
                               "SELECT m.seq, m.message_id FROM messages m LEFT JOIN encodings e "
                               "ON e.key = m.seq * 4 + ? WHERE m.session_id = ? AND m.position IS "
                               "NOT NULL AND e.key IS NULL");
      rows.Bind(1, format - 1);
      rows.Bind(2, id);
      int rc = SQLITE_ROW;
      while ((rc = rows.Step()) == SQLITE_ROW) {
        const auto it = by_id.find(rows.Text(1));
        if (it == by_id.end()) return false;  // a message this prepare did not print
        missing.emplace_back(rows.Int(0), it->second);
      }
      if (rc != SQLITE_DONE) return false;
    }
    for (const auto& m : missing) {
      if (!file->PutEncoding(m.first, format, m.second)) return false;
    }
    // The retired messages' encodings go (a compaction's span, a clipped original).
    KeptFile::Statement drop(file->db(),
                             "DELETE FROM encodings WHERE key IN (SELECT seq * 4 + ? FROM "
                             "messages WHERE session_id = ? AND position IS NULL)");
    drop.Bind(1, format - 1);
    drop.Bind(2, id);
    if (drop.Step() != SQLITE_DONE) return false;
    return file->PutMemo(id, format, memo.Text());
  });
}

}  // namespace recap_cli
