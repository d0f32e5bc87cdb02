#!/usr/bin/env bash
# tests/indexer/tls_certs.sh DIR: a throw-away PKI for the amqps tests.
#
# Writes into DIR: ca.pem (the test CA), server.pem and server.key (the
# broker's certificate, signed by that CA, for DNS:localhost and
# IP:127.0.0.1), and wrong-ca.pem (another CA that signed nothing here),
# so a test can connect with verification on and see a wrong CA refused.
# Keys are 2048-bit RSA, valid for a day; nothing leaves DIR.
set -euo pipefail

dir=${1:?usage: tls_certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
subj() { printf '/CN=%s' "$1"; }

openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "$(subj dlock-test-ca)" \
    -keyout ca.key -out ca.pem 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "$(subj dlock-wrong-ca)" \
    -keyout wrong-ca.key -out wrong-ca.pem 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "$(subj localhost)" \
    -keyout server.key -out server.csr 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
    -days 1 -extfile server.ext -out server.pem 2>/dev/null
chmod 644 server.key
