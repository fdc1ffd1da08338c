// The API server's TLS policy: TLS 1.2 or newer, forward-secret key exchange only, keys of a
// strength worth protecting, and errors that say which file is wrong and why.
//
//  - TLS 1.3 suites are all forward secret (ephemeral (EC)DHE); OpenSSL's defaults stay.
//  - TLS 1.2 suites: ECDHE or DHE key exchange with AES-GCM, ChaCha20-Poly1305 or AES-CBC
//    (kTls12Ciphers). Static-RSA key exchange (AES128-SHA256 and the like), which lets whoever
//    later obtains the key decrypt recorded sessions, is never offered; neither are TLS 1.0/1.1.
//  - The certificate's key: RSA (and DSA, DH) at least kMinRsaBits, elliptic curves at least
//    kMinEcBits. A weaker key is refused at start with a message naming its size and the minimum
//    (OpenSSL would refuse it too, but as "ee key too small", which httplib reports as a load
//    failure).
//
// Thread safety: stateless; CheckTlsFiles reads the files, ApplyTlsPolicy configures one SSL_CTX.
#pragma once

#include <openssl/ssl.h>

#include <string>

#include "absl/status/status.h"

namespace tessera::server {

inline constexpr int kMinRsaBits = 2048;
inline constexpr int kMinEcBits = 256;
// OpenSSL cipher string for TLS 1.2: forward-secret suites only.
inline constexpr char kTls12Ciphers[] =
    "ECDHE+AESGCM:ECDHE+CHACHA20:DHE+AESGCM:DHE+CHACHA20:ECDHE+AES:DHE+AES:"
    "!aNULL:!eNULL:!kRSA:!PSK:!SRP:!DSS:!MD5:!RC4:!3DES";

// Loads the PEM certificate chain and private key and checks them: each readable and parsable
// (errors name the file), the key of an accepted type and size (naming its bits and the minimum),
// and the key belonging to the certificate. OK means ApplyTlsPolicy will succeed with them.
absl::Status CheckTlsFiles(const std::string& cert_file, const std::string& key_file);

// Configures `ctx` for serving: the policy above, then the certificate chain and key. False when
// OpenSSL refuses any of it (CheckTlsFiles says why).
bool ApplyTlsPolicy(SSL_CTX& ctx, const std::string& cert_file, const std::string& key_file);

}  // namespace tessera::server
