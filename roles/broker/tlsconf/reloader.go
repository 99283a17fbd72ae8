package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"time"
)

// defaultCheckInterval is the least time between two looks at the
// certificate files.
const defaultCheckInterval = time.Second

// fileStamp identifies one version of a file well enough to notice a
// rewrite: its modification time and size.
type fileStamp struct {
	modTime time.Time
	size    int64
}

func statStamp(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{modTime: fi.ModTime(), size: fi.Size()}, nil
}

// Reloader serves an operator certificate from a certificate file and a
// key file and picks up rotated files without a restart. It is safe for
// concurrent use.
type Reloader struct {
	certFile, keyFile string

	// interval is the least time between two stat checks; tests set 0.
	interval time.Duration
	// now is the clock; tests replace it.
	now func() time.Time

	mu sync.Mutex // guards the fields below
	// cert is the certificate being served; never nil after NewReloader.
	cert      *tls.Certificate
	certStamp fileStamp
	keyStamp  fileStamp
	lastCheck time.Time
	// lastErr is the outcome of the latest reload attempt (nil on success).
	lastErr error
}

// NewReloader loads certFile and keyFile (PEM) and returns a Reloader
// serving them. A missing or unusable pair is an error.
func NewReloader(certFile, keyFile string) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile, interval: defaultCheckInterval, now: time.Now}
	cs, ks, err := r.stamps()
	if err != nil {
		return nil, err
	}
	cert, err := loadPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	r.cert, r.certStamp, r.keyStamp, r.lastCheck = cert, cs, ks, r.now()
	return r, nil
}

// GetCertificate returns the current certificate, first reloading the
// files if the check interval has passed and they changed. It fits
// tls.Config.GetCertificate. A failed reload keeps the previous
// certificate; see LastError.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.lastCheck) >= r.interval {
		r.lastCheck = now
		r.maybeReloadLocked()
	}
	return r.cert, nil
}

// LastError returns the error of the latest reload attempt, or nil when
// it succeeded or none has been needed.
func (r *Reloader) LastError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

// maybeReloadLocked reloads the pair when either file's stamp changed.
// The new stamps are remembered even when loading fails, so a broken pair
// is tried once per rewrite rather than on every handshake.
func (r *Reloader) maybeReloadLocked() {
	cs, ks, err := r.stamps()
	if err != nil {
		r.lastErr = err
		return
	}
	if cs == r.certStamp && ks == r.keyStamp {
		return
	}
	r.certStamp, r.keyStamp = cs, ks
	cert, err := loadPair(r.certFile, r.keyFile)
	if err != nil {
		r.lastErr = err
		return
	}
	r.cert, r.lastErr = cert, nil
}

func (r *Reloader) stamps() (cert, key fileStamp, err error) {
	if cert, err = statStamp(r.certFile); err != nil {
		return cert, key, fmt.Errorf("tlsconf: certificate file: %w", err)
	}
	if key, err = statStamp(r.keyFile); err != nil {
		return cert, key, fmt.Errorf("tlsconf: key file: %w", err)
	}
	return cert, key, nil
}

// loadPair loads a PEM certificate chain and key and parses the leaf.
func loadPair(certFile, keyFile string) (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: load %s and %s: %w", certFile, keyFile, err)
	}
	if cert.Leaf == nil {
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			return nil, fmt.Errorf("tlsconf: parse %s: %w", certFile, err)
		}
		cert.Leaf = leaf
	}
	return &cert, nil
}
