// Package auth mints and checks Felix tokens and decides what a token may
// do. It is a leaf: the control plane signs with it, the broker verifies
// with it, and neither needs the other's code.
//
// # Tokens
//
// A Felix token is a compact JWS signed with ES256 (ECDSA P-256). Its
// header carries "kid", the base64url RFC 7638 SHA-256 thumbprint of the
// signing key's public half. Its payload has these claims:
//
//	iss    always "felix-auth" (Issuer)
//	aud    "felix-broker" (Audience); a string or an array containing it
//	sub    the subject the token was minted for
//	tid    the one tenant the token is valid for
//	perms  array of permission strings (below)
//	exp    expiry, seconds since the epoch; required
//	nbf    not before; iat issued at; jti a random id
//
// Signer.Sign fills iss, aud, iat, nbf and jti, and refuses claims without
// exp or tid or with a malformed permission. Signer.JWKS publishes the
// public keys only, so rotating means: add the new key as active, keep the
// old one in others until its tokens have expired.
//
// # Verification
//
// Verifier.Verify succeeds only when all of these hold: the token is at
// most MaxTokenBytes long and parses as a single-signature JWS using
// ES256; its kid names a key in the current JWKS (an unknown kid triggers
// at most one Fetch per MinRefetch, shared by concurrent callers, before
// giving up; the fetch runs under the context of the caller that started
// it, and a failed or invalid fetch leaves the old keys in place); the
// signature checks; iss and aud are as above; exp is present and now <=
// exp+Leeway; now >= nbf-Leeway when nbf is present; tid equals the tenant
// the caller names; every permission compiles. Any failure is a
// *wire.Error with code unauthorized and one of the messages "missing
// token", "malformed token", "unknown signing key", "bad signature",
// "wrong issuer", "wrong audience", "token expired", "token not yet valid"
// or "tenant mismatch"; the last three carry the detail reason
// token_expired, token_not_yet_valid or tenant_mismatch. Verify compiles
// the permissions each call; callers keep the Identity for the life of a
// stream and recheck it with Verifier.Expired, which applies the same
// exp+Leeway rule, so Verify and the recheck never disagree. Brokers and
// control-plane members use the same (default) Leeway.
//
// # Permissions
//
// A permission is "<action>:<resource-pattern>", split at the first ':'
// (the resource itself contains ':'). Neither part may be empty or hold
// spaces or control characters. In both parts '*' stands for any run of
// characters, '/' included. Resources are built by StreamResource
// ("stream:t/ns/s"), CacheResource ("cache:t/ns/c/key"), TenantResource
// ("tenant:t") and ClusterResource ("cluster").
//
// A resource pattern grants the resources it matches and everything below
// them: it also matches a resource when it matches a prefix of it that
// ends just before a '/'. So "stream:acme" grants "stream:acme/prod/x" but
// not "stream:acme2/prod/x", and "cache:acme/prod/sessions" grants every
// key of that cache. Because a cache key may contain '/', a grant naming
// one exact key also grants keys that continue it with '/'. "*:*" grants
// everything.
//
// Matcher.Allows does not allocate and is safe for concurrent use.
//
// Narrow computes what a token may get when its caller asks for some
// actions on some resources and RBAC granted some permissions: never more
// than either, with wildcards intersected rather than widened.
//
// # Revocations
//
// Revocations holds, per principal (tenant and subject), the instant
// before which its tokens no longer count: a token whose iat is earlier
// (or that has no iat) is refused with code revoked (retry class fatal);
// a token issued at or after it works. Identity.IssuedAt carries the iat
// for that comparison. A Verifier given VerifierOptions.Revocations
// refuses such tokens itself; the broker also ends the streams opened with
// them.
//
// # Upstream OIDC tokens
//
// OIDCVerifier checks tokens from an external identity provider (an
// OIDCIssuer) before the control plane exchanges them for Felix tokens:
// RSA and ECDSA signatures (RS*, PS*, ES*), keys from a JWKS URL (fetched
// with a bounded client and body, cached, refetched on an unknown kid at
// most once per MinRefetch) or a JWKS file (re-read when its size or
// modification time changes, checked at most every second), exact iss,
// aud containing the audience, a subject, and exp/nbf within Leeway. It
// returns the subject and the raw claims; refusals are unauthorized
// *wire.Error values with distinct messages.
package auth
