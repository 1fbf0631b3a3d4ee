// Package sasl holds the server side of the SASL mechanisms a Kafka
// listener offers: PLAIN (RFC 4616), SCRAM-SHA-256 and SCRAM-SHA-512
// (RFC 5802, RFC 7677) and OAUTHBEARER (RFC 7628, KIP-255, KIP-768). It is
// pure, messages in, messages out, so that the kafka package drives it
// from SaslAuthenticate requests (KIP-152) and tests drive it from the
// RFCs' test vectors; the one I/O is the OAUTHBEARER JWKS file, stat'ed
// at most every 2 s and read when it changed.
//
// A SCRAM exchange, as the server sees it:
//
//	client-first   n,,n=user,r=<client nonce>
//	server-first   r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
//	client-final   c=biws,r=<both nonces>,p=<base64 client proof>
//	server-final   v=<base64 server signature>
//
// The server keeps no password: a credential is the salt, the iteration
// count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
// HMAC(SaltedPassword, "Server Key"), what Kafka keeps in its metadata log
// for each user and mechanism. The client proves it knows SaltedPassword
// without sending it; the server proves it holds ServerKey.
//
// An OAUTHBEARER exchange, as the server sees it (^A is %x01):
//
//	client   n,[a=<authzid>],^Aauth=Bearer <JWT>^A[<key>=<value>^A]*^A
//	server   (empty)                       the token is valid: done
//	   or    {"status":"invalid_token"}    it is not, and then
//	client   ^A                            the exchange fails
//
// A JWT is base64url(header).base64url(claims).base64url(signature). Two
// validators, as Kafka has two server callback handlers: the unsecured one
// (alg "none", Kafka's default, for development) and the JWKS one (RS256
// to RS512, ES256 to ES512, keys by kid). The session a token opens ends
// at its exp (CredentialExpirer), or sooner with connections.max.reauth.ms.
//
// Concurrency: a Server is one connection's, used by one goroutine at a
// time. A TokenValidator is a listener's, shared by all its connections'
// goroutines; the JWKS file behind it is guarded by a mutex.
//
// Non-obvious invariants:
//   - Every message comes from an unauthenticated peer: parsing never
//     panics, and a message is bounded by the caller's frame limit
//     (sasl.server.max.receive.size) before it gets here.
//   - Comparisons of proofs and passwords are constant-time.
//   - An unknown user and a wrong password fail alike, with
//     ErrAuthentication, so that a client cannot probe for user names by
//     the error it gets (Kafka answers both with SASL_AUTHENTICATION_FAILED).
//   - Channel binding is refused ("p=" in the GS2 header): Kafka does not
//     offer SCRAM-SHA-*-PLUS.
//   - A refused OAUTHBEARER token is answered with a challenge, not an
//     error: Kafka fails the exchange only on the client's ^A, and clients
//     wait for that round trip. The client is told only the RFC 6750 status;
//     the reason (expired, wrong issuer, unknown kid) is for the log.
//   - JSON member names of a JOSE header are read exactly: encoding/json
//     matches struct fields without regard to case, and {"ALG":"none"}
//     must not be a header with an alg (FuzzOAuthBearerMessage found it).
//   - Work an unauthenticated client can cause is bounded: a token of at
//     most 64 KiB, 32 extensions in 8 KiB, a signature tried with at most
//     4 keys, RSA keys of at most 8192 bits, scope duplicates found with a
//     map rather than a scan.
//   - Without sasl.oauthbearer.expected.audience, a token with an aud claim
//     is refused: jose4j's default, which Kafka keeps.
package sasl
