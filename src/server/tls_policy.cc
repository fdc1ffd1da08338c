#include "server/tls_policy.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"

namespace tessera::server {
namespace {

struct FileCloser {
  void operator()(FILE* f) const { fclose(f); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

// The oldest error OpenSSL queued (the one that says what went wrong), and clears the queue.
std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  std::string what = "not PEM";
  if (e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    what = buf;
  }
  ERR_clear_error();
  return what;
}

}  // namespace

absl::Status CheckTlsFiles(const std::string& cert_file, const std::string& key_file) {
  std::unique_ptr<FILE, FileCloser> cf(fopen(cert_file.c_str(), "r"));
  if (!cf)
    return absl::InvalidArgumentError(absl::StrCat("--tls-cert ", cert_file, ": cannot read"));
  std::unique_ptr<X509, X509Free> cert(PEM_read_X509(cf.get(), nullptr, nullptr, nullptr));
  if (!cert) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-cert ", cert_file, ": not a PEM certificate (", OpenSslError(), ")"));
  }
  std::unique_ptr<FILE, FileCloser> kf(fopen(key_file.c_str(), "r"));
  if (!kf) return absl::InvalidArgumentError(absl::StrCat("--tls-key ", key_file, ": cannot read"));
  std::unique_ptr<EVP_PKEY, PkeyFree> key(PEM_read_PrivateKey(kf.get(), nullptr, nullptr, nullptr));
  if (!key) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-key ", key_file, ": not an unencrypted PEM private key (", OpenSslError(), ")"));
  }
  const int bits = EVP_PKEY_get_bits(key.get());
  const int id = EVP_PKEY_get_base_id(key.get());
  int min_bits = 0;
  const char* type = "";
  switch (id) {
    case EVP_PKEY_RSA:
    case EVP_PKEY_RSA_PSS:
      type = "RSA";
      min_bits = kMinRsaBits;
      break;
    case EVP_PKEY_EC:
      type = "EC";
      min_bits = kMinEcBits;
      break;
    case EVP_PKEY_ED25519:
    case EVP_PKEY_ED448:
      type = "EdDSA";
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls-key ", key_file, ": unsupported key type (", OBJ_nid2sn(id),
          "); use RSA of at least ", kMinRsaBits, " bits or an EC key of at least ", kMinEcBits));
  }
  if (bits < min_bits) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-key ", key_file, ": ", type, " key of ",
                                                   bits, " bits is too weak; at least ", min_bits,
                                                   " bits are required"));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat("--tls-key ", key_file,
                                                   " is not the key of the certificate in ",
                                                   cert_file, " (the PEM files do not match)"));
  }
  return absl::OkStatus();
}

bool ApplyTlsPolicy(SSL_CTX& ctx, const std::string& cert_file, const std::string& key_file) {
  SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_SESSION_RESUMPTION_ON_RENEGOTIATION |
                                SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  const bool ok = SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION) == 1 &&
                  SSL_CTX_set_cipher_list(&ctx, kTls12Ciphers) == 1 &&
                  SSL_CTX_set_dh_auto(&ctx, 1) == 1 &&
                  SSL_CTX_use_certificate_chain_file(&ctx, cert_file.c_str()) == 1 &&
                  SSL_CTX_use_PrivateKey_file(&ctx, key_file.c_str(), SSL_FILETYPE_PEM) == 1 &&
                  SSL_CTX_check_private_key(&ctx) == 1;
  ERR_clear_error();
  return ok;
}

}  // namespace tessera::server
