// pg_test_server: starts and stops the one PostgreSQL server a whole ctest run shares.
//
//   pg_test_server start STATE_DIR   creates a cluster (PostgresTestServer, pg_server.h), leaves
//                                    it running, writes STATE_DIR/conninfo.json and prints one
//                                    line saying where it listens
//   pg_test_server stop STATE_DIR    stops the server that STATE_DIR names and removes its
//                                    directory and the state file
//
// Meant as a ctest fixture: `start` is the FIXTURES_SETUP test, `stop` the FIXTURES_CLEANUP one,
// and the tests that require the fixture get RECAP_TEST_PG_STATE=STATE_DIR in their
// environment, so that PostgresTestServer::Shared() adopts the server instead of starting one.
// `start` first does away with whatever an earlier run left in STATE_DIR (a run interrupted
// before its cleanup): the server it names is stopped if it still runs, and removed, so each run
// starts from an empty server.
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>

#include "support/pg_server.h"

namespace {

using recap::testing::PostgresTestServer;

// Stops and removes the server an earlier state names, and the state file.
void Clean(const std::string& state_dir) {
  const std::string dir = PostgresTestServer::DirFromState(state_dir);
  if (!dir.empty()) PostgresTestServer::Destroy(dir);
  std::error_code ec;
  std::filesystem::remove(PostgresTestServer::StateFile(state_dir), ec);
}

int Start(const std::string& state_dir) {
  const std::string old_dir = PostgresTestServer::DirFromState(state_dir);
  if (!old_dir.empty()) {
    std::cout << "pg_test_server: removing the server of an earlier run (" << old_dir << ")\n";
  }
  Clean(state_dir);
  const auto t0 = std::chrono::steady_clock::now();
  PostgresTestServer server;
  server.Detach();
  server.WriteState(state_dir);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  std::cout << "pg_test_server: PostgreSQL listening on " << server.socket_dir() << "/.s.PGSQL."
            << server.port() << " (data " << server.data_dir() << ", log " << server.log_file()
            << ", state " << PostgresTestServer::StateFile(state_dir) << "), started in " << ms
            << " ms" << std::endl;
  return 0;
}

int Stop(const std::string& state_dir) {
  const std::string dir = PostgresTestServer::DirFromState(state_dir);
  if (dir.empty()) {
    std::cout << "pg_test_server: no server in " << state_dir << "; nothing to stop" << std::endl;
    return 0;
  }
  Clean(state_dir);
  std::cout << "pg_test_server: stopped and removed " << dir << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc == 3 ? argv[1] : "";
  if (command != "start" && command != "stop") {
    std::cerr << "usage: " << (argc > 0 ? argv[0] : "pg_test_server") << " start|stop STATE_DIR\n";
    return 2;
  }
  try {
    return command == "start" ? Start(argv[2]) : Stop(argv[2]);
  } catch (const std::exception& e) {
    std::cerr << "pg_test_server " << command << ": " << e.what() << std::endl;
    return 1;
  }
}
