package auth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// minRSABits is the smallest RSA key an upstream JWKS may use.
const minRSABits = 2048

// upstreamKeys is an identity provider's public signing keys by key id.
// It is never mutated after parseUpstreamJWKS returns.
type upstreamKeys struct {
	byKID map[string]any // *rsa.PublicKey or *ecdsa.PublicKey
	only  any            // the single key when the set has exactly one, else nil
}

// parseUpstreamJWKS reads an identity provider's JWKS: RSA (2048 bits or
// more) and ECDSA public keys meant for signatures. Keys of other kinds or
// uses are skipped; a key with private material makes the set invalid.
func parseUpstreamJWKS(b []byte) (*upstreamKeys, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("auth: parse upstream JWKS: %w", err)
	}
	ks := &upstreamKeys{byKID: map[string]any{}}
	var n int
	for i, k := range set.Keys {
		if !k.IsPublic() {
			return nil, fmt.Errorf("auth: upstream JWKS key %d (%q) holds private material", i, k.KeyID)
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		switch pub := k.Key.(type) {
		case *rsa.PublicKey:
			if pub.N.BitLen() < minRSABits {
				continue
			}
		case *ecdsa.PublicKey:
		default:
			continue
		}
		ks.byKID[k.KeyID] = k.Key
		ks.only = k.Key
		n++
	}
	if n != 1 {
		ks.only = nil
	}
	return ks, nil
}

// lookup finds kid; a token without kid uses the set's only key.
func (ks *upstreamKeys) lookup(kid string) (any, bool) {
	if ks == nil {
		return nil, false
	}
	if kid == "" {
		return ks.only, ks.only != nil
	}
	k, ok := ks.byKID[kid]
	return k, ok
}

// jwksLoader reads the JWKS document from a URL or a file.
type jwksLoader interface {
	load(ctx context.Context) ([]byte, error)
	// changed reports, cheaply, whether the document may have changed
	// since the last load (a file's size or modification time).
	changed() bool
}

// urlLoader fetches a JWKS over HTTP with a bounded client and body.
type urlLoader struct {
	url     string
	client  *http.Client
	maxBody int64
}

func (u *urlLoader) load(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.url, nil)
	if err != nil {
		return nil, fmt.Errorf("auth: JWKS request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := u.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("auth: fetch JWKS: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, u.maxBody+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("auth: read JWKS: %w", err)
	case int64(len(b)) > u.maxBody:
		return nil, fmt.Errorf("auth: JWKS larger than %d bytes", u.maxBody)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("auth: fetch JWKS: HTTP %d", resp.StatusCode)
	}
	return b, nil
}

func (u *urlLoader) changed() bool { return false }

// fileLoader reads a JWKS file, noticing when it is replaced.
type fileLoader struct {
	path    string
	maxBody int64

	mu    sync.Mutex
	stamp fileStamp // of the last load
}

type fileStamp struct {
	size    int64
	modTime time.Time
}

func (f *fileLoader) load(context.Context) ([]byte, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, fmt.Errorf("auth: open JWKS file: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("auth: stat JWKS file: %w", err)
	}
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(fh, f.maxBody+1)); err != nil {
		return nil, fmt.Errorf("auth: read JWKS file: %w", err)
	}
	if int64(buf.Len()) > f.maxBody {
		return nil, fmt.Errorf("auth: JWKS file larger than %d bytes", f.maxBody)
	}
	f.mu.Lock()
	f.stamp = fileStamp{size: st.Size(), modTime: st.ModTime()}
	f.mu.Unlock()
	return buf.Bytes(), nil
}

func (f *fileLoader) changed() bool {
	st, err := os.Stat(f.path)
	if err != nil {
		return false // keep the keys we have; a load will report the error
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return st.Size() != f.stamp.size || !st.ModTime().Equal(f.stamp.modTime)
}
