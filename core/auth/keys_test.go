package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

func mustKey(t testing.TB) *SigningKey {
	t.Helper()
	k, err := GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKIDIsThumbprint(t *testing.T) {
	k := mustKey(t)
	jwk := jose.JSONWebKey{Key: &k.priv.PublicKey}
	tp, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if want := base64.RawURLEncoding.EncodeToString(tp); k.KID() != want {
		t.Fatalf("KID = %q, want %q", k.KID(), want)
	}
	if k2 := mustKey(t); k2.KID() == k.KID() {
		t.Fatal("two generated keys share a KID")
	}
}

func TestPEMRoundTrip(t *testing.T) {
	k := mustKey(t)
	b, err := k.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "-----BEGIN PRIVATE KEY-----") {
		t.Fatalf("not a PKCS#8 PEM: %q", b[:40])
	}
	k2, err := ParseSigningKeyPEM(b)
	if err != nil {
		t.Fatal(err)
	}
	if k2.KID() != k.KID() || !k2.priv.Equal(k.priv) {
		t.Fatal("PEM round trip changed the key")
	}
}

func TestParseSigningKeyPEMRefusals(t *testing.T) {
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(p384)
	if err != nil {
		t.Fatal(err)
	}
	sec1, err := x509.MarshalECPrivateKey(mustKey(t).priv)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		in []byte
		ok bool
	}{
		"empty":     {nil, false},
		"garbage":   {[]byte("not pem"), false},
		"p384":      {pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), false},
		"bad der":   {pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}), false},
		"wrong tag": {pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), false},
		"sec1":      {pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}), true},
	}
	for name, c := range cases {
		_, err := ParseSigningKeyPEM(c.in)
		if (err == nil) != c.ok {
			t.Errorf("%s: err = %v, want ok=%v", name, err, c.ok)
		}
	}
}

func TestJWKSIsPublicAndParses(t *testing.T) {
	a, b := mustKey(t), mustKey(t)
	b2 := NewSigner(a, b, a) // duplicate keys are listed once
	doc, err := b2.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(doc, &set); err != nil {
		t.Fatalf("go-jose cannot parse our JWKS: %v", err)
	}
	if len(set.Keys) != 2 || set.Keys[0].KeyID != a.KID() || set.Keys[1].KeyID != b.KID() {
		t.Fatalf("keys = %+v", set.Keys)
	}
	for _, k := range set.Keys {
		if !k.IsPublic() || k.Algorithm != "ES256" || k.Use != "sig" {
			t.Errorf("key %q: public=%v alg=%q use=%q", k.KeyID, k.IsPublic(), k.Algorithm, k.Use)
		}
	}
	var raw struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(doc, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range raw.Keys {
		for _, private := range []string{"d", "p", "q", "dp", "dq", "qi", "k"} {
			if _, ok := k[private]; ok {
				t.Errorf("JWKS key carries private member %q", private)
			}
		}
	}
}

func TestParseJWKSRefusesPrivateKeys(t *testing.T) {
	k := mustKey(t)
	doc, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k.priv, KeyID: k.kid}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseJWKS(doc); err == nil {
		t.Fatal("a JWKS with a private key was accepted")
	}
	if _, err := parseJWKS([]byte("{")); err == nil {
		t.Fatal("broken JSON accepted")
	}
}

func TestParseJWKSSkipsForeignKeysAndFillsKID(t *testing.T) {
	k := mustKey(t)
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &p384.PublicKey, KeyID: "p384"},              // wrong curve: skipped
		{Key: &k.priv.PublicKey, KeyID: "enc", Use: "enc"}, // not for signatures: skipped
		{Key: &k.priv.PublicKey},                           // no kid: filed under its thumbprint
	}}
	doc, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := parseJWKS(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != 1 || ks[k.KID()] == nil {
		t.Fatalf("key set = %v, want only %q", ks, k.KID())
	}
}
