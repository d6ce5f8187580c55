// PostgresTestServer: a real PostgreSQL server (the Debian `postgresql` package's initdb,
// pg_ctl and postgres) started for the PostgreSQL session store's tests.
//
// Each server is a cluster of its own in a short directory under /tmp (/tmp/recap-pg-XXXXXX:
// the cluster in d/, the Unix socket in s/, the server's log in log). It listens on that socket
// only (no TCP), runs with fsync off and small buffers, and has one superuser, `recap`, whose
// password (kPassword) is checked with scram-sha-256, so a wrong password is really refused.
// The port is fixed (kPort): it only names the socket file, so servers never collide.
//
//   recap::testing::PostgresTestServer& pg = recap::testing::PostgresTestServer::Shared();
//   const std::string db = pg.UniqueName("sessions");
//   pg.CreateDatabase(db);
//   PGconn* conn = PQconnectdb(pg.ConnInfo(db).c_str());    // or pg.Url(db)
//
// Shared() is the server a test process uses. Under ctest, one server serves the whole run: the
// pg_test_server program (pg_server_main.cc) starts it as a FIXTURES_SETUP test, writes where it
// listens to STATE_DIR/conninfo.json, and the tests find it through the RECAP_TEST_PG_STATE
// environment variable (= STATE_DIR); a FIXTURES_CLEANUP test stops it. Run alone, a test
// process starts a private server on first use and stops it at exit. Each test works in a
// database of its own (UniqueName), so tests in parallel processes never meet. A test that
// stops or restarts the server makes one of its own instead of touching the shared one:
//
//   recap::testing::PostgresTestServer pg;  // ~1-2 s: initdb and start
//   ... pg.Restart(); ...                     // same socket, same data
//
// When the tests run as root (initdb and postgres refuse root), the tools and the server run as
// the `postgres` system user, which owns the directory. The binaries are taken from
// $RECAP_PG_BINDIR, else the newest /usr/lib/postgresql/N/bin, else PATH; with none, the
// constructor throws, naming `apt-get install postgresql`. Any failure throws
// std::runtime_error with the tail of the server's log.
//
// A private server whose process died without stopping it (a crash, a ctest timeout) is stopped
// and removed by the next private server started on the machine: each directory names the
// process that owns it.
#ifndef RECAP_TESTS_SUPPORT_PG_SERVER_H_
#define RECAP_TESTS_SUPPORT_PG_SERVER_H_

#include <string>

namespace recap::testing {

class PostgresTestServer {
 public:
  static constexpr const char* kUser = "recap";
  static constexpr const char* kPassword = "recap-test-pw";
  static constexpr int kPort = 55432;
  // The environment variable naming the pg_test_server fixture's state directory.
  static constexpr const char* kStateEnv = "RECAP_TEST_PG_STATE";

  // Creates a cluster and starts it. `dir` empty: a fresh /tmp/recap-pg-XXXXXX. `dir` given:
  // that directory (created if missing, keep it short: the socket path inside must fit in 107
  // bytes); when it already holds a cluster this class made, the cluster is reused (started if
  // it is not running) instead of created.
  explicit PostgresTestServer(std::string dir = "");
  // Stops the server (immediate shutdown) and removes the directory, unless Detach() was called
  // or this is the adopted fixture server. Never throws.
  ~PostgresTestServer();
  PostgresTestServer(const PostgresTestServer&) = delete;
  PostgresTestServer& operator=(const PostgresTestServer&) = delete;

  // libpq key=value connection string: host=<socket dir> port=<port> user=recap password=...
  // dbname=<dbname>.
  std::string ConnInfo(const std::string& dbname = "postgres") const;
  // The same as a URL: postgresql://recap:PASSWORD@/DBNAME?host=%2Ftmp%2F...&port=PORT.
  std::string Url(const std::string& dbname = "postgres") const;
  std::string socket_dir() const { return socket_dir_; }
  int port() const { return port_; }
  std::string user() const { return kUser; }
  std::string password() const { return password_; }
  // The directory holding everything (cluster, socket, log), and the cluster inside it.
  std::string dir() const { return dir_; }
  std::string data_dir() const { return dir_ + "/d"; }
  std::string log_file() const { return dir_ + "/log"; }

  // CREATE DATABASE `name` (quoted as given); a database of that name already there is fine.
  void CreateDatabase(const std::string& name) const;
  // DROP DATABASE IF EXISTS `name` WITH (FORCE): connections to it are ended.
  void DropDatabase(const std::string& name) const;
  // Runs `sql` (one or several statements) in database `dbname`; throws with the server's
  // message when it fails.
  void Exec(const std::string& dbname, const std::string& sql) const;
  // A fresh lowercase identifier, unique across processes and calls: prefix (lowercased, other
  // characters than [a-z0-9_] dropped), the process id, a counter and random hex digits.
  static std::string UniqueName(const std::string& prefix = "t");

  // Stops the server: a fast shutdown (connections ended, a checkpoint), or with `immediate`
  // an immediate one (no checkpoint: the next start recovers, as after a crash). Stopped
  // already: nothing.
  void Stop(bool immediate = false);
  // Starts the stopped server on the same socket and port. Running already: nothing.
  void Start();
  void Restart(bool immediate = false);
  // Whether the postmaster named by the cluster's postmaster.pid is alive.
  bool Running() const;

  // Leaves the server running and its directory in place when this object goes (what the
  // pg_test_server fixture does).
  void Detach();

  // The server of this test process: the pg_test_server fixture's when $RECAP_TEST_PG_STATE
  // names its state directory and that server answers (adopted: never stopped or removed from
  // here), else a private one started on first call (thread-safe) and stopped at exit. A failure
  // to start is remembered: later calls throw the same error at once.
  static PostgresTestServer& Shared();

  // Stops the server whose directory is `dir` (immediate shutdown), if one runs, and removes
  // the directory. For fixture cleanup; never starts anything. Throws when the server would not
  // stop.
  static void Destroy(const std::string& dir);

  // The state file of the pg_test_server fixture: writes STATE_DIR/conninfo.json (socket dir,
  // port, user, password, data dir, dir, conninfo, url), and reads the directory of the server
  // that a state dir names ("" when none).
  void WriteState(const std::string& state_dir) const;
  static std::string StateFile(const std::string& state_dir);
  static std::string DirFromState(const std::string& state_dir);

 private:
  struct AdoptTag {};
  PostgresTestServer(AdoptTag, std::string dir, std::string socket_dir, int port,
                     std::string password);

  void Init();
  void Configure() const;
  std::string Fail(const std::string& what, const std::string& tool_output = "") const;

  std::string dir_;
  std::string socket_dir_;
  int port_ = kPort;
  std::string password_ = kPassword;
  bool detached_ = false;
  bool adopted_ = false;
  long owner_pid_ = 0;  // the process that made this object: only it stops the server
};

}  // namespace recap::testing

#endif  // RECAP_TESTS_SUPPORT_PG_SERVER_H_
