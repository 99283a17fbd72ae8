package auth

import (
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
)

// Issuer is the "iss" of every Felix token.
const Issuer = "felix-auth"

// Audience is the "aud" every Felix token must name.
const Audience = "felix-broker"

// Claims are the fields of a Felix token that callers set or read. The
// issuer and audience are fixed (Issuer, Audience) and filled by Sign.
type Claims struct {
	Subject   string    // "sub": who the token was minted for
	TenantID  string    // "tid": the only tenant the token is valid for
	Perms     []string  // "perms": permission strings, see CompilePerms
	IssuedAt  time.Time // "iat"; Sign fills it with now when zero
	NotBefore time.Time // "nbf"; Sign fills it with IssuedAt when zero
	Expiry    time.Time // "exp"; required
	ID        string    // "jti"; Sign fills it with random hex when empty
}

// tokenClaims is the JSON shape of a token payload: the registered claims
// plus Felix's tid and perms.
type tokenClaims struct {
	jwt.Claims
	TenantID string   `json:"tid"`
	Perms    []string `json:"perms"`
}

func toTokenClaims(c Claims) tokenClaims {
	perms := c.Perms
	if perms == nil {
		perms = []string{}
	}
	return tokenClaims{
		Claims: jwt.Claims{
			Issuer:    Issuer,
			Subject:   c.Subject,
			Audience:  jwt.Audience{Audience},
			Expiry:    jwt.NewNumericDate(c.Expiry),
			NotBefore: jwt.NewNumericDate(c.NotBefore),
			IssuedAt:  jwt.NewNumericDate(c.IssuedAt),
			ID:        c.ID,
		},
		TenantID: c.TenantID,
		Perms:    perms,
	}
}
