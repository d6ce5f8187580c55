#include "support/pg_server.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include <libpq-fe.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

extern char** environ;

namespace recap::testing {
namespace {

namespace fs = std::filesystem;

// Files of ours inside a server's directory.
constexpr const char* kMarkerFile = "recap-pg-cluster";  // "this harness made this cluster"
constexpr const char* kOwnerFile = "owner";              // "<pid> <start time>" of the owner
constexpr const char* kStateFileName = "conninfo.json";
constexpr const char* kDirPrefix = "recap-pg-";

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

bool IsFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool IsExecutable(const std::string& path) {
  return IsFile(path) && ::access(path.c_str(), X_OK) == 0;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void WriteFile(const std::string& path, const std::string& text, mode_t mode = 0644) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) throw std::runtime_error(Errno("cannot write " + path));
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string error = Errno("cannot write " + path);
      ::close(fd);
      throw std::runtime_error(error);
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

// The last `count` lines of a file ("" when it cannot be read).
std::string Tail(const std::string& path, std::size_t count) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (lines.size() > count) lines.pop_front();
  }
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

// --- Where the PostgreSQL binaries are ---------------------------------------------------------

// The directory holding initdb and pg_ctl: $RECAP_PG_BINDIR, else the newest
// /usr/lib/postgresql/N/bin, else the PATH. Throws when there is none.
const std::string& BinDir() {
  // Never destroyed: the shared server is stopped by a static destructor at exit, which may run
  // after this one's would.
  static const std::string& dir = *new std::string([]() -> std::string {
    auto has_tools = [](const std::string& d) {
      return IsExecutable(d + "/initdb") && IsExecutable(d + "/pg_ctl");
    };
    if (const char* env = std::getenv("RECAP_PG_BINDIR"); env != nullptr && *env != '\0') {
      if (has_tools(env)) return env;
    }
    int best_version = -1;
    std::string best;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
      const int version = std::atoi(name.c_str());
      const std::string bin = entry.path().string() + "/bin";
      if (version > best_version && has_tools(bin)) {
        best_version = version;
        best = bin;
      }
    }
    if (!best.empty()) return best;
    if (const char* path = std::getenv("PATH"); path != nullptr) {
      std::stringstream parts(path);
      std::string d;
      while (std::getline(parts, d, ':')) {
        if (!d.empty() && has_tools(d)) return d;
      }
    }
    return "";
  }());
  if (dir.empty()) {
    throw std::runtime_error(
        "PostgresTestServer: the PostgreSQL server binaries (initdb, pg_ctl) are not installed "
        "(looked in $RECAP_PG_BINDIR, /usr/lib/postgresql/*/bin and PATH): "
        "apt-get install postgresql");
  }
  return dir;
}

// --- Running the tools, as the postgres user when we are root ------------------------------------

struct Identity {
  bool switch_user = false;  // root: run as postgres
  uid_t uid = 0;
  gid_t gid = 0;
};

const Identity& ServerIdentity() {
  static const Identity id = [] {
    Identity result;
    if (::geteuid() != 0) return result;
    struct passwd pw;
    struct passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (::getpwnam_r("postgres", &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
      throw std::runtime_error(
          "PostgresTestServer: running as root, and PostgreSQL refuses to run as root, but there "
          "is no `postgres` system user to run it as (apt-get install postgresql creates it)");
    }
    result.switch_user = true;
    result.uid = pw.pw_uid;
    result.gid = pw.pw_gid;
    return result;
  }();
  return id;
}

// Gives `path` to the user the server runs as (when that is not us).
void GiveToServer(const std::string& path) {
  const Identity& id = ServerIdentity();
  if (id.switch_user && ::chown(path.c_str(), id.uid, id.gid) != 0) {
    throw std::runtime_error(Errno("PostgresTestServer: chown " + path + " to postgres"));
  }
}

struct ToolResult {
  int exit_code = -1;  // -1: killed by a signal or not run
  std::string output;  // stdout and stderr together
};

// Runs `argv` (argv[0] a full path) in `cwd` as the server's user, stdin from /dev/null and
// stdout+stderr into a scratch file, in a session of its own with no other descriptor of ours
// (a server it starts must not hold a pipe of the test runner's open), and waits for it.
ToolResult RunTool(const std::vector<std::string>& argv, const std::string& cwd) {
  const Identity& id = ServerIdentity();

  // Everything the child needs is made before fork(): between fork and exec only system calls.
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The environment, without PG* variables (PGDATA, PGPORT, ... would change what the tools do)
  // and with the C locale.
  std::vector<std::string> env_strings;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string var = *e;
    if (var.rfind("PG", 0) == 0 || var.rfind("LC_", 0) == 0 || var.rfind("LANG=", 0) == 0) continue;
    env_strings.push_back(var);
  }
  env_strings.emplace_back("LC_ALL=C");
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (const std::string& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  char out_path[] = "/tmp/recap-pgtool-XXXXXX";
  const int out_fd = ::mkostemp(out_path, O_CLOEXEC);
  if (out_fd < 0) throw std::runtime_error(Errno("PostgresTestServer: mkostemp"));
  ::unlink(out_path);  // the descriptor is enough

  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(out_fd);
    throw std::runtime_error(Errno("PostgresTestServer: fork"));
  }
  if (pid == 0) {
    ::setsid();
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::dup2(out_fd, 1);
    ::dup2(out_fd, 2);
    if (::close_range(3, ~0U, 0) != 0) {
      for (int fd = 3; fd < 4096; ++fd) ::close(fd);
    }
    const char* fail = nullptr;
    if (::chdir(cwd.c_str()) != 0) {
      fail = "PostgresTestServer: chdir failed\n";
    } else if (id.switch_user &&
               (::setgroups(0, nullptr) != 0 || ::setgid(id.gid) != 0 || ::setuid(id.uid) != 0)) {
      fail = "PostgresTestServer: could not switch to the postgres user\n";
    } else {
      ::execve(args[0], args.data(), envp.data());
      fail = "PostgresTestServer: exec failed\n";
    }
    const ssize_t ignored = ::write(2, fail, std::strlen(fail));
    (void)ignored;
    ::_exit(127);
  }

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      status = -1;
      break;
    }
  }
  ToolResult result;
  if (status != -1 && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  ::lseek(out_fd, 0, SEEK_SET);
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(out_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    result.output.append(buf, static_cast<std::size_t>(n));
  }
  ::close(out_fd);
  return result;
}

// --- Server processes --------------------------------------------------------------------------

// The postmaster's pid from the cluster's postmaster.pid (0 when there is none).
long PostmasterPid(const std::string& data_dir) {
  std::ifstream in(data_dir + "/postmaster.pid");
  long pid = 0;
  if (!(in >> pid)) return 0;
  return pid;
}

// Whether process `pid` exists and is not a zombie (a postmaster that exited after its pg_ctl
// did waits for init to reap it).
bool Alive(long pid) {
  if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM)) return false;
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const std::size_t close_paren = stat.rfind(')');
  return close_paren == std::string::npos || stat.compare(close_paren, 3, ") Z") != 0;
}

bool ClusterRunning(const std::string& data_dir) { return Alive(PostmasterPid(data_dir)); }

// A process's start time (clock ticks since boot, /proc/PID/stat field 22; "" when gone), which
// tells a live owner from a new process that got a dead owner's pid.
std::string StartTime(long pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const std::size_t close_paren = stat.rfind(')');
  if (close_paren == std::string::npos) return "";
  std::istringstream fields(stat.substr(close_paren + 1));
  std::string field;
  for (int i = 3; i <= 22 && (fields >> field); ++i) {
    if (i == 22) return field;
  }
  return "";
}

std::string OwnerLine() {
  const long pid = static_cast<long>(::getpid());
  return std::to_string(pid) + " " + StartTime(pid) + "\n";
}

// Whether the process named in dir/owner is still alive (no owner file: treated as alive, the
// directory is someone's on purpose).
bool OwnerAlive(const std::string& dir) {
  std::ifstream in(dir + "/" + kOwnerFile);
  long pid = 0;
  std::string start;
  if (!(in >> pid)) return true;
  in >> start;
  if (!Alive(pid)) return false;
  return start.empty() || StartTime(pid) == start;
}

// Stops the cluster with pg_ctl; when that fails, SIGQUITs the postmaster itself (what an
// immediate shutdown is). Returns "" once it is down, else what went wrong.
std::string StopCluster(const std::string& data_dir, const char* mode) {
  std::string error;
  try {
    const ToolResult r = RunTool(
        {BinDir() + "/pg_ctl", "stop", "-w", "-t", "60", "-s", "-D", data_dir, "-m", mode}, "/");
    if (r.exit_code == 0 || !ClusterRunning(data_dir)) return "";
    error = "pg_ctl stop -m " + std::string(mode) + " failed (exit " + std::to_string(r.exit_code) +
            "): " + r.output;
  } catch (const std::exception& e) {
    error = e.what();
  }
  const long pid = PostmasterPid(data_dir);
  if (Alive(pid)) ::kill(static_cast<pid_t>(pid), SIGQUIT);
  for (int i = 0; i < 100 && Alive(pid); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Alive(pid)
             ? error + "; the postmaster (pid " + std::to_string(pid) + ") outlived SIGQUIT too"
             : "";
}

// Stops and removes the private servers of test processes that died without doing it.
void SweepOrphans(const std::string& except) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/tmp", ec)) {
    const std::string name = entry.path().filename().string();
    const std::string dir = entry.path().string();
    if (name.rfind(kDirPrefix, 0) != 0 || dir == except) continue;
    if (!IsFile(dir + "/" + kMarkerFile) || !IsFile(dir + "/" + kOwnerFile)) continue;
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0) continue;
    if (::geteuid() != 0 && st.st_uid != ::geteuid()) continue;
    if (OwnerAlive(dir)) continue;
    try {
      PostgresTestServer::Destroy(dir);
    } catch (const std::exception&) {
      // Someone else's problem to report; ours is to start a server.
    }
  }
}

// --- Connection strings ------------------------------------------------------------------------

// A libpq conninfo value, quoted when it has to be.
std::string ConnValue(const std::string& value) {
  const bool plain = !value.empty() && value.find_first_of(" \t\n'\\") == std::string::npos;
  if (plain) return value;
  std::string out = "'";
  for (char c : value) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

std::string PercentEncode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

using ConnPtr = std::unique_ptr<PGconn, decltype(&PQfinish)>;
using ResultPtr = std::unique_ptr<PGresult, decltype(&PQclear)>;

ConnPtr Connect(const std::string& conninfo) {
  ConnPtr conn(PQconnectdb((conninfo + " connect_timeout=10").c_str()), &PQfinish);
  if (conn == nullptr) throw std::runtime_error("PostgresTestServer: PQconnectdb: out of memory");
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    throw std::runtime_error("PostgresTestServer: connecting (" + conninfo +
                             ") failed: " + PQerrorMessage(conn.get()));
  }
  return conn;
}

}  // namespace

// --- The server ----------------------------------------------------------------------------------

PostgresTestServer::PostgresTestServer(std::string dir)
    : dir_(std::move(dir)), owner_pid_(static_cast<long>(::getpid())) {
  Init();
}

PostgresTestServer::PostgresTestServer(AdoptTag, std::string dir, std::string socket_dir, int port,
                                       std::string password)
    : dir_(std::move(dir)),
      socket_dir_(std::move(socket_dir)),
      port_(port),
      password_(std::move(password)),
      adopted_(true),
      owner_pid_(static_cast<long>(::getpid())) {}

void PostgresTestServer::Init() {
  BinDir();          // throws first when PostgreSQL is not installed
  ServerIdentity();  // ... or when we are root and there is no postgres user
  bool created_dir = false;
  if (dir_.empty()) {
    std::string tmpl = std::string("/tmp/") + kDirPrefix + "XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      throw std::runtime_error(Errno("PostgresTestServer: mkdtemp(" + tmpl + ")"));
    }
    dir_ = tmpl;
    created_dir = true;
  } else {
    while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
    std::error_code ec;
    if (!fs::exists(dir_, ec)) {
      fs::create_directories(dir_, ec);
      if (ec)
        throw std::runtime_error("PostgresTestServer: cannot create " + dir_ + ": " + ec.message());
      created_dir = true;
    }
  }
  socket_dir_ = dir_ + "/s";
  const bool reuse = IsFile(dir_ + "/" + kMarkerFile) && IsFile(data_dir() + "/PG_VERSION");

  try {
    // sun_path holds 108 bytes with the terminating NUL.
    const std::string socket_file = socket_dir_ + "/.s.PGSQL." + std::to_string(port_);
    if (socket_file.size() > 107) {
      throw std::runtime_error("PostgresTestServer: the socket path " + socket_file + " is " +
                               std::to_string(socket_file.size()) +
                               " bytes, more than a Unix socket path holds (107): use a "
                               "shorter directory");
    }
    if (dir_.find('\'') != std::string::npos) {
      throw std::runtime_error("PostgresTestServer: no quote in the directory, please: " + dir_);
    }
    if (!reuse && !created_dir && !fs::is_empty(dir_)) {
      throw std::runtime_error("PostgresTestServer: " + dir_ +
                               " is neither empty nor a cluster made by this harness");
    }
    WriteFile(dir_ + "/" + kOwnerFile, OwnerLine());
    SweepOrphans(dir_);

    if (!reuse) {
      // The server's user needs the directory (initdb creates d/ in it, pg_ctl writes the log)
      // and the socket directory; clients of any user need to reach the socket.
      ::chmod(dir_.c_str(), 0755);
      if (::mkdir(socket_dir_.c_str(), 0755) != 0 && errno != EEXIST) {
        throw std::runtime_error(Errno("PostgresTestServer: mkdir " + socket_dir_));
      }
      GiveToServer(dir_);
      GiveToServer(socket_dir_);
      const std::string pwfile = dir_ + "/pwfile";
      WriteFile(pwfile, password_ + "\n", 0600);
      GiveToServer(pwfile);
      const ToolResult r = RunTool(
          {BinDir() + "/initdb", "-D", data_dir(), "-U", kUser, "--pwfile=" + pwfile,
           "--auth=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"},
          dir_);
      ::unlink(pwfile.c_str());
      if (r.exit_code != 0) {
        throw std::runtime_error(
            Fail("initdb failed (exit " + std::to_string(r.exit_code) + ")", r.output));
      }
      Configure();
      WriteFile(dir_ + "/" + kMarkerFile, "a PostgreSQL cluster of recap's PostgresTestServer\n");
    }
    Start();
  } catch (...) {
    std::error_code ec;
    if (ClusterRunning(data_dir())) StopCluster(data_dir(), "immediate");
    if (created_dir) {
      fs::remove_all(dir_, ec);
    } else {
      fs::remove(dir_ + "/" + kOwnerFile, ec);
    }
    throw;
  }
}

void PostgresTestServer::Configure() const {
  std::ofstream conf(data_dir() + "/postgresql.conf", std::ios::app);
  conf << "\n# recap's PostgresTestServer: a throwaway server on a Unix socket, tuned for speed.\n"
       << "listen_addresses = ''\n"
       << "port = " << port_ << "\n"
       << "unix_socket_directories = '" << socket_dir_ << "'\n"
       << "unix_socket_permissions = 0777\n"
       << "max_connections = 100\n"
       << "shared_buffers = 16MB\n"
       << "fsync = off\n"
       << "synchronous_commit = off\n"
       << "full_page_writes = off\n"
       << "wal_level = minimal\n"
       << "max_wal_senders = 0\n"
       << "jit = off\n"
       << "timezone = 'UTC'\n"
       << "log_timezone = 'UTC'\n"
       << "logging_collector = off\n";
  if (!conf)
    throw std::runtime_error("PostgresTestServer: cannot write " + data_dir() + "/postgresql.conf");
}

PostgresTestServer::~PostgresTestServer() {
  if (detached_ || adopted_ || static_cast<long>(::getpid()) != owner_pid_) return;
  try {
    if (ClusterRunning(data_dir())) StopCluster(data_dir(), "immediate");
    // A server that would not stop keeps its directory: the next private server's sweep finds
    // it by its dead owner.
    if (ClusterRunning(data_dir())) return;
  } catch (...) {
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string PostgresTestServer::Fail(const std::string& what,
                                     const std::string& tool_output) const {
  std::string message = "PostgresTestServer (" + dir_ + "): " + what;
  if (!tool_output.empty()) message += "\n--- tool output ---\n" + tool_output;
  const std::string tail = Tail(log_file(), 30);
  if (!tail.empty()) message += "\n--- server log tail (" + log_file() + ") ---\n" + tail;
  return message;
}

void PostgresTestServer::Start() {
  if (Running()) return;
  const ToolResult r = RunTool(
      {BinDir() + "/pg_ctl", "start", "-w", "-t", "60", "-s", "-D", data_dir(), "-l", log_file()},
      dir_);
  if (r.exit_code != 0 || !Running()) {
    throw std::runtime_error(
        Fail("pg_ctl start failed (exit " + std::to_string(r.exit_code) + ")", r.output));
  }
}

void PostgresTestServer::Stop(bool immediate) {
  if (!Running()) return;
  const std::string error = StopCluster(data_dir(), immediate ? "immediate" : "fast");
  if (!error.empty()) throw std::runtime_error(Fail(error));
}

void PostgresTestServer::Restart(bool immediate) {
  Stop(immediate);
  Start();
}

bool PostgresTestServer::Running() const { return ClusterRunning(data_dir()); }

void PostgresTestServer::Detach() {
  detached_ = true;
  std::error_code ec;
  fs::remove(dir_ + "/" + kOwnerFile, ec);  // not an orphan when we exit
}

void PostgresTestServer::Destroy(const std::string& dir) {
  std::error_code ec;
  if (dir.empty() || !fs::exists(dir, ec)) return;
  if (!IsFile(dir + "/" + kMarkerFile)) {
    throw std::runtime_error("PostgresTestServer::Destroy: " + dir +
                             " holds no cluster of this harness; not removing it");
  }
  const std::string data = dir + "/d";
  if (ClusterRunning(data)) {
    const std::string error = StopCluster(data, "immediate");
    if (!error.empty())
      throw std::runtime_error("PostgresTestServer::Destroy(" + dir + "): " + error);
  }
  fs::remove_all(dir, ec);
  if (ec)
    throw std::runtime_error("PostgresTestServer::Destroy: cannot remove " + dir + ": " +
                             ec.message());
}

// --- Connection strings and SQL ------------------------------------------------------------------

std::string PostgresTestServer::ConnInfo(const std::string& dbname) const {
  return "host=" + ConnValue(socket_dir_) + " port=" + std::to_string(port_) +
         " user=" + ConnValue(kUser) + " password=" + ConnValue(password_) +
         " dbname=" + ConnValue(dbname);
}

std::string PostgresTestServer::Url(const std::string& dbname) const {
  return "postgresql://" + PercentEncode(kUser) + ":" + PercentEncode(password_) + "@/" +
         PercentEncode(dbname) + "?host=" + PercentEncode(socket_dir_) +
         "&port=" + std::to_string(port_);
}

void PostgresTestServer::Exec(const std::string& dbname, const std::string& sql) const {
  ConnPtr conn = Connect(ConnInfo(dbname));
  ResultPtr res(PQexec(conn.get(), sql.c_str()), &PQclear);
  const ExecStatusType status = PQresultStatus(res.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK && status != PGRES_EMPTY_QUERY) {
    throw std::runtime_error("PostgresTestServer: in database " + dbname + ", " + sql +
                             "\nfailed: " + PQerrorMessage(conn.get()));
  }
}

namespace {

std::string QuoteIdentifier(PGconn* conn, const std::string& name) {
  char* quoted = PQescapeIdentifier(conn, name.c_str(), name.size());
  if (quoted == nullptr) {
    throw std::runtime_error("PostgresTestServer: bad identifier " + name + ": " +
                             PQerrorMessage(conn));
  }
  std::string out = quoted;
  PQfreemem(quoted);
  return out;
}

}  // namespace

void PostgresTestServer::CreateDatabase(const std::string& name) const {
  ConnPtr conn = Connect(ConnInfo("postgres"));
  const std::string sql = "CREATE DATABASE " + QuoteIdentifier(conn.get(), name);
  ResultPtr res(PQexec(conn.get(), sql.c_str()), &PQclear);
  if (PQresultStatus(res.get()) == PGRES_COMMAND_OK) return;
  const char* state = PQresultErrorField(res.get(), PG_DIAG_SQLSTATE);
  // 42P04 duplicate_database; 23505 when another session creates the same name at that moment.
  if (state != nullptr && (std::strcmp(state, "42P04") == 0 || std::strcmp(state, "23505") == 0)) {
    return;
  }
  throw std::runtime_error("PostgresTestServer: " + sql + " failed: " + PQerrorMessage(conn.get()));
}

void PostgresTestServer::DropDatabase(const std::string& name) const {
  ConnPtr conn = Connect(ConnInfo("postgres"));
  Exec("postgres",
       "DROP DATABASE IF EXISTS " + QuoteIdentifier(conn.get(), name) + " WITH (FORCE)");
}

std::string PostgresTestServer::UniqueName(const std::string& prefix) {
  static std::atomic<unsigned> counter{0};
  thread_local std::mt19937_64 rng([] {
    std::random_device device;
    std::seed_seq seed{
        device(), device(), static_cast<unsigned>(::getpid()),
        static_cast<unsigned>(std::hash<std::thread::id>()(std::this_thread::get_id())),
        static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count())};
    return std::mt19937_64(seed);
  }());
  std::string head;
  for (char c : prefix) {
    const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if ((lower >= 'a' && lower <= 'z') || (lower >= '0' && lower <= '9') || lower == '_')
      head += lower;
  }
  if (head.empty() || std::isdigit(static_cast<unsigned char>(head[0]))) head = "t" + head;
  char tail[64];
  std::snprintf(tail, sizeof tail, "_%ld_%u_%06llx", static_cast<long>(::getpid()), counter++,
                static_cast<unsigned long long>(rng() & 0xffffffULL));
  const std::size_t room = 63 - std::strlen(tail);  // NAMEDATALEN - 1
  if (head.size() > room) head.resize(room);
  return head + tail;
}

// --- The shared server and the fixture's state file ---------------------------------------------

std::string PostgresTestServer::StateFile(const std::string& state_dir) {
  return state_dir + "/" + kStateFileName;
}

void PostgresTestServer::WriteState(const std::string& state_dir) const {
  std::error_code ec;
  fs::create_directories(state_dir, ec);
  const nlohmann::json state = {
      {"socket_dir", socket_dir_}, {"port", port_},          {"user", kUser},
      {"password", password_},     {"data_dir", data_dir()}, {"dir", dir_},
      {"log_file", log_file()},    {"conninfo", ConnInfo()}, {"url", Url()},
  };
  const std::string tmp = StateFile(state_dir) + ".tmp";
  WriteFile(tmp, state.dump(2) + "\n");
  if (::rename(tmp.c_str(), StateFile(state_dir).c_str()) != 0) {
    throw std::runtime_error(Errno("PostgresTestServer: rename " + tmp));
  }
}

std::string PostgresTestServer::DirFromState(const std::string& state_dir) {
  if (!IsFile(StateFile(state_dir))) return "";
  const nlohmann::json state =
      nlohmann::json::parse(ReadFile(StateFile(state_dir)), nullptr, false);
  if (!state.is_object() || !state.contains("dir") || !state["dir"].is_string()) return "";
  return state["dir"].get<std::string>();
}

PostgresTestServer& PostgresTestServer::Shared() {
  static std::once_flag once;
  static std::unique_ptr<PostgresTestServer> server;
  static std::string error;
  std::call_once(once, [] {
    try {
      const char* state_dir = std::getenv(kStateEnv);
      const bool from_environment = state_dir != nullptr && *state_dir != '\0';
#ifdef RECAP_TEST_PG_DEFAULT_STATE
      // The build tree's fixture server, when ctest did not say (a test registered without
      // the variable, or a binary run by hand while the fixture's server is up).
      if (!from_environment) state_dir = RECAP_TEST_PG_DEFAULT_STATE;
#endif
      if (state_dir != nullptr && *state_dir != '\0') {
        const std::string file = StateFile(state_dir);
        const nlohmann::json state = nlohmann::json::parse(ReadFile(file), nullptr, false);
        if (state.is_object() && state.value("user", "") == kUser) {
          std::unique_ptr<PostgresTestServer> adopted(new PostgresTestServer(
              AdoptTag{}, state.value("dir", ""), state.value("socket_dir", ""),
              state.value("port", 0), state.value("password", "")));
          if (PQping((adopted->ConnInfo() + " connect_timeout=10").c_str()) == PQPING_OK) {
            server = std::move(adopted);
            return;
          }
        }
        if (from_environment) {
          std::cerr << "PostgresTestServer: " << kStateEnv << "=" << state_dir
                    << " names no running server (" << file << "); starting a private one"
                    << std::endl;
        }
      }
      server = std::make_unique<PostgresTestServer>();
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  if (server == nullptr) throw std::runtime_error(error);
  return *server;
}

}  // namespace recap::testing
