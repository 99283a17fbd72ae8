package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"

	jose "github.com/go-jose/go-jose/v4"
)

// SigningKey is an ES256 (ECDSA P-256) private key together with its key
// id. The key id is the base64url (unpadded) RFC 7638 SHA-256 thumbprint of
// the public key, so the same key always gets the same id.
type SigningKey struct {
	priv *ecdsa.PrivateKey
	kid  string // Invariant: kid == thumbprintKID(&priv.PublicKey).
}

// GenerateSigningKey creates a fresh P-256 signing key.
func GenerateSigningKey() (*SigningKey, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("auth: generate key: %w", err)
	}
	return newSigningKey(priv)
}

func newSigningKey(priv *ecdsa.PrivateKey) (*SigningKey, error) {
	if priv == nil || priv.Curve != elliptic.P256() {
		return nil, errors.New("auth: signing key must be ECDSA P-256")
	}
	kid, err := thumbprintKID(&priv.PublicKey)
	if err != nil {
		return nil, err
	}
	return &SigningKey{priv: priv, kid: kid}, nil
}

// KID returns the key id placed in the "kid" header of tokens this key
// signs and in its JWKS entry.
func (k *SigningKey) KID() string { return k.kid }

// MarshalPEM encodes the private key as a PKCS#8 "PRIVATE KEY" PEM block.
// The result is secret material.
func (k *SigningKey) MarshalPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.priv)
	if err != nil {
		return nil, fmt.Errorf("auth: marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParseSigningKeyPEM decodes a key written by MarshalPEM. It also accepts
// a SEC 1 "EC PRIVATE KEY" block. Any key other than ECDSA P-256 is
// refused.
func ParseSigningKeyPEM(b []byte) (*SigningKey, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("auth: no PEM block in signing key")
	}
	switch block.Type {
	case "PRIVATE KEY":
		key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("auth: parse PKCS#8 key: %w", err)
		}
		priv, ok := key.(*ecdsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("auth: signing key is %T, want ECDSA P-256", key)
		}
		return newSigningKey(priv)
	case "EC PRIVATE KEY":
		priv, err := x509.ParseECPrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("auth: parse EC key: %w", err)
		}
		return newSigningKey(priv)
	default:
		return nil, fmt.Errorf("auth: unexpected PEM block %q", block.Type)
	}
}

// publicJWK returns the public half of k as a JWK ready for a JWKS.
func (k *SigningKey) publicJWK() jose.JSONWebKey {
	return jose.JSONWebKey{
		Key:       &k.priv.PublicKey,
		KeyID:     k.kid,
		Algorithm: string(jose.ES256),
		Use:       "sig",
	}
}

// thumbprintKID computes the RFC 7638 SHA-256 thumbprint of pub, base64url
// encoded without padding.
func thumbprintKID(pub *ecdsa.PublicKey) (string, error) {
	jwk := jose.JSONWebKey{Key: pub}
	tp, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("auth: key thumbprint: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(tp), nil
}
