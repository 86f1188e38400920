// tls_peer.h — who a TLS client expects at the other end: the name it asked for (sent as SNI,
// and checked in the certificate by OpenSSL itself, so that a mismatch is reported as
// X509_V_ERR_HOSTNAME_MISMATCH rather than as a bare failure), or the IP address it dialled.
// Header-only; for targets that link OpenSSL (the webhook sender, the CLI's HTTP client, which
// includes it from this layer below the front-ends).
#pragma once

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>
#include <string>

namespace delayq::webhook {

inline bool is_ip_literal(const std::string& host) {
  boost::system::error_code error;
  (void)boost::asio::ip::make_address(host, error);
  return !error;
}

// Before the handshake, on the session that will make it.
inline void expect_peer(SSL* ssl, const std::string& host) {
  if (is_ip_literal(host)) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str());
  } else {
    // SNI (SSL_set_tlsext_host_name, without the macro's C cast), then the name.
    SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
             const_cast<char*>(host.c_str()));
    SSL_set1_host(ssl, host.c_str());
  }
}

}  // namespace delayq::webhook
