// Package sasl holds the server side of the SASL mechanisms a Kafka
// listener offers: PLAIN (RFC 4616) and SCRAM-SHA-256 and SCRAM-SHA-512
// (RFC 5802, RFC 7677). It is pure: messages in, messages out, no I/O, so
// that the kafka package drives it from SaslAuthenticate requests (KIP-152)
// and tests drive it from the RFCs' test vectors.
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
package sasl
