#include "support/test_tls.h"

#include <cstdio>
#include <memory>
#include <stdexcept>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace recap {
namespace testing {
namespace {

struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertDeleter {
  void operator()(X509* c) const { X509_free(c); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyDeleter>;
using Cert = std::unique_ptr<X509, CertDeleter>;

void Require(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("making the test certificates: ") + what);
}

Key NewKey() {
  Key key(EVP_EC_gen("P-256"));
  Require(key != nullptr, "EVP_EC_gen");
  return key;
}

void AddExtension(X509* cert, X509V3_CTX* ctx, int nid, const char* value) {
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value);
  Require(ext != nullptr, "X509V3_EXT_conf_nid");
  const int added = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  Require(added == 1, "X509_add_ext");
}

// A certificate for `key` named `common_name`: a CA when `issuer` is null (self-signed), else
// a server certificate for 127.0.0.1 and localhost signed by `issuer`.
Cert NewCert(EVP_PKEY* key, const char* common_name, long serial, X509* issuer,
             EVP_PKEY* issuer_key) {
  Cert cert(X509_new());
  Require(cert != nullptr, "X509_new");
  X509* x = cert.get();
  Require(X509_set_version(x, 2) == 1, "X509_set_version");
  ASN1_INTEGER_set(X509_get_serialNumber(x), serial);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 7L * 24 * 3600);
  Require(X509_set_pubkey(x, key) == 1, "X509_set_pubkey");
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("recap tests"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name), -1, -1, 0);
  Require(X509_set_issuer_name(x, issuer != nullptr ? X509_get_subject_name(issuer) : name) == 1,
          "X509_set_issuer_name");
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer != nullptr ? issuer : x, x, nullptr, nullptr, 0);
  AddExtension(x, &ctx, NID_subject_key_identifier, "hash");
  if (issuer == nullptr) {
    AddExtension(x, &ctx, NID_basic_constraints, "critical,CA:TRUE");
    AddExtension(x, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    AddExtension(x, &ctx, NID_authority_key_identifier, "keyid:always");
    AddExtension(x, &ctx, NID_basic_constraints, "critical,CA:FALSE");
    AddExtension(x, &ctx, NID_key_usage, "critical,digitalSignature");
    AddExtension(x, &ctx, NID_ext_key_usage, "serverAuth");
    AddExtension(x, &ctx, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
  }
  Require(X509_sign(x, issuer_key != nullptr ? issuer_key : key, EVP_sha256()) > 0, "X509_sign");
  return cert;
}

void WriteCert(const std::string& path, X509* cert) {
  FILE* f = std::fopen(path.c_str(), "w");
  Require(f != nullptr, "fopen");
  const bool ok = PEM_write_X509(f, cert) == 1;
  Require(std::fclose(f) == 0 && ok, "PEM_write_X509");
}

void WriteKey(const std::string& path, EVP_PKEY* key) {
  FILE* f = std::fopen(path.c_str(), "w");
  Require(f != nullptr, "fopen");
  const bool ok = PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  Require(std::fclose(f) == 0 && ok, "PEM_write_PrivateKey");
}

}  // namespace

TestPki MakeTestPki(const std::string& dir) {
  TestPki pki;
  pki.ca_file = dir + "/ca.pem";
  pki.other_ca_file = dir + "/other-ca.pem";
  pki.server.certificate_file = dir + "/server.pem";
  pki.server.key_file = dir + "/server.key";

  Key ca_key = NewKey();
  Cert ca = NewCert(ca_key.get(), "recap test CA", 1, nullptr, nullptr);
  Key other_key = NewKey();
  Cert other = NewCert(other_key.get(), "recap test CA", 2, nullptr, nullptr);
  Key server_key = NewKey();
  Cert server = NewCert(server_key.get(), "127.0.0.1", 3, ca.get(), ca_key.get());

  WriteCert(pki.ca_file, ca.get());
  WriteCert(pki.other_ca_file, other.get());
  WriteCert(pki.server.certificate_file, server.get());
  WriteKey(pki.server.key_file, server_key.get());
  return pki;
}

}  // namespace testing
}  // namespace recap
