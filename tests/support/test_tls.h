// Certificates for the HTTPS tests, made with OpenSSL's library in a directory of the test's:
// a private CA, a server certificate it signed for 127.0.0.1 and localhost, and a second CA
// that signed nothing (the "wrong CA" a client may be pointed at). Only in builds with OpenSSL
// (RECAP_TEST_HAVE_TLS).
//
//   recap::testing::TempDir dir("recap-tls");
//   const recap::testing::TestPki pki = recap::testing::MakeTestPki(dir.path());
//   recap::testing::HttpTestServer server(pki.server);   // https://127.0.0.1:<port>
//   options.ca_path = pki.ca_file;                        // trusted
//   options.ca_path = pki.other_ca_file;                  // refused
#ifndef RECAP_TESTS_SUPPORT_TEST_TLS_H_
#define RECAP_TESTS_SUPPORT_TEST_TLS_H_

#include <string>

#include "support/http_test_server.h"

namespace recap {
namespace testing {

struct TestPki {
  std::string ca_file;        // the CA that signed the server's certificate (PEM)
  std::string other_ca_file;  // a CA that signed nothing here (PEM)
  TlsIdentity server;         // the server's certificate (for 127.0.0.1, localhost) and key
};

// Writes the files into `dir`. Throws std::runtime_error when OpenSSL fails.
TestPki MakeTestPki(const std::string& dir);

}  // namespace testing
}  // namespace recap

#endif  // RECAP_TESTS_SUPPORT_TEST_TLS_H_
