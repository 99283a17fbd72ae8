package controlplane

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// Meta keys the Service keeps in its Store.
const (
	metaSigningKey     = "signing_key"          // active ES256 key, PKCS#8 PEM
	metaRetiredKeys    = "signing_keys_retired" // JSON array of retiredKey, newest first
	metaBootstrapped   = "bootstrapped"         // set once, with the default tenant
	maxRetiredKeys     = 16                     // hard cap; see signing.go
	defaultTenantID    = "default"
	defaultNamespaceID = "default"
)

// Config configures a Service.
type Config struct {
	// DataDir is where the caller keeps the control plane's files; the
	// Service itself only uses the Store it is given.
	DataDir string
	// Logger receives the service's few events (nil: slog.Default()).
	Logger *slog.Logger
	// Now is the clock for minted tokens and verification (nil: time.Now).
	Now func() time.Time
	// RefreshReuseGrace is how long a rotated refresh token is still
	// accepted (0: FELIX_REFRESH_REUSE_GRACE_SECONDS, else 10s).
	RefreshReuseGrace time.Duration
	// RefreshTokenTTL is the life of a refresh token chain (0:
	// FELIX_REFRESH_TOKEN_TTL_SECONDS, else 30 days).
	RefreshTokenTTL time.Duration
	// OIDC tunes the verifiers of upstream tokens (Now defaults to the
	// service clock).
	OIDC auth.OIDCOptions
	// DefaultReplicationFactor is the replication factor of a stream
	// created without one (FELIX_DEFAULT_REPLICATION_FACTOR, read by
	// DefaultReplicationFactorFromEnv; 0 means 1).
	DefaultReplicationFactor uint32
}

// Service is the control plane: the catalog over a Store, token minting
// with the signing key kept in the Store, and the REST API. It is safe for
// concurrent use.
type Service struct {
	store    Store
	log      *slog.Logger
	now      func() time.Time
	signer   atomic.Pointer[auth.Signer] // swapped on rotation
	verifier *auth.Verifier              // fed this service's own JWKS
	mu       sync.Mutex                  // serializes read-modify-write API calls and rotation
	metrics  *httpMetrics
	openAPI  func() ([]byte, error) // the OpenAPI document, rendered once
	x        *authExtras            // token exchange, refresh and OIDC state
	// clusterID caches ClusterID once known.
	clusterID atomic.Pointer[string]
	// expiry is the broker expiry loop once StartExpiry ran (nil before).
	expiry *bgLoop
	// placement is the placement loop once StartPlacement ran (nil before).
	placement *bgLoop
	// placementMetrics are its gauges, registered by StartPlacement and
	// unregistered by Close (nil before).
	placementMetrics *placementMetrics
	// lastView is the cluster view last read whole (nil before), shared
	// by the brokers that ask for the same tag (cluster_view.go).
	lastView atomic.Pointer[wire.ClusterView]
	// defaultRF is Config.DefaultReplicationFactor (at least 1).
	defaultRF uint32
	// expiryTimeoutMs is FELIX_NODE_EXPIRY_TIMEOUT_MS once StartExpiry
	// ran (0 before): registration and heartbeat answers carry it, on
	// every member, so brokers keep their lease by it.
	expiryTimeoutMs atomic.Int64
	// endWaits ends held cluster-view waits (EndWaits).
	endWaits struct {
		once, close sync.Once
		c           chan struct{}
	}
}

// startTimeout bounds the store reads and writes of NewContext (loading or
// creating the signing key), within the caller's own deadline: a store
// that lost its quorum fails the start instead of hanging it.
const startTimeout = 30 * time.Second

// New is NewContext without a caller's context (the reads and writes are
// still bounded by startTimeout).
func New(cfg Config, store Store) (*Service, error) {
	return NewContext(context.Background(), cfg, store)
}

// NewContext builds a Service over store, loading the signing key from the
// store's meta or generating and storing one, under ctx bounded by
// startTimeout. The Service owns store once it is returned: Close closes
// it (on an error the caller still owns store).
func NewContext(ctx context.Context, cfg Config, store Store) (*Service, error) {
	if cfg.DefaultReplicationFactor > maxReplication {
		return nil, fmt.Errorf("controlplane: default replication factor %d is out of range 1..%d", cfg.DefaultReplicationFactor, maxReplication)
	}
	s := &Service{store: store, log: cfg.Logger, now: cfg.Now, metrics: newHTTPMetrics(),
		defaultRF: max(cfg.DefaultReplicationFactor, 1)}
	s.openAPI = sync.OnceValues(func() ([]byte, error) { return buildOpenAPI(s.routes()) })
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.x = newAuthExtras(cfg, s.now, s.log)
	// The verifier only needs this service's own keys: installSigner
	// pushes them on start and rotation, and a key id it does not know
	// (another member rotated) reloads them from the store.
	s.verifier = auth.NewVerifier(auth.VerifierOptions{Now: s.now, Fetch: s.reloadSigner})
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	active, err := s.loadActiveKey(ctx)
	if err != nil {
		return nil, err
	}
	retired, err := s.loadRetiredKeys(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.installSigner(active, retired); err != nil {
		return nil, err
	}
	return s, nil
}

// loadActiveKey reads the active signing key, creating it on first start.
// PutMetaIfAbsent makes concurrent first starts agree on one key.
func (s *Service) loadActiveKey(ctx context.Context) (*auth.SigningKey, error) {
	pemBytes, ok, err := s.store.Meta(ctx, metaSigningKey)
	if err != nil {
		return nil, fmt.Errorf("read signing key: %w", err)
	}
	if !ok {
		k, err := auth.GenerateSigningKey()
		if err != nil {
			return nil, err
		}
		fresh, err := k.MarshalPEM()
		if err != nil {
			return nil, err
		}
		if pemBytes, err = s.store.PutMetaIfAbsent(ctx, metaSigningKey, fresh); err != nil {
			return nil, fmt.Errorf("store signing key: %w", err)
		}
		if string(pemBytes) == string(fresh) {
			s.log.Info("generated a new token signing key", "kid", k.KID())
		}
	}
	k, err := auth.ParseSigningKeyPEM(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("stored signing key: %w", err)
	}
	return k, nil
}

// installSigner makes active the signing key and publishes the JWKS
// (active plus retired keys) to the verifier.
func (s *Service) installSigner(active *auth.SigningKey, retired []*auth.SigningKey) error {
	others := make([]*auth.SigningKey, 0, len(retired))
	for _, k := range retired {
		if k.KID() != active.KID() {
			others = append(others, k)
		}
	}
	signer := auth.NewSigner(active, others...)
	jwks, err := signer.JWKS()
	if err != nil {
		return err
	}
	if err := s.verifier.SetJWKS(jwks); err != nil {
		return fmt.Errorf("load own JWKS: %w", err)
	}
	s.signer.Store(signer)
	return nil
}

// Bootstrap creates tenant "default" and its namespace "default" exactly
// once in the store's life: a later call, from this or any process over the
// same store, does nothing and reports false, even if they were deleted.
func (s *Service) Bootstrap(ctx context.Context) (bool, error) {
	t := wire.Tenant{TenantID: defaultTenantID, DisplayName: "Default tenant"}
	ns := wire.Namespace{TenantID: defaultTenantID, Namespace: defaultNamespaceID}
	created, err := s.store.Bootstrap(ctx, metaBootstrapped, t, ns)
	if err != nil {
		return false, fmt.Errorf("bootstrap: %w", err)
	}
	if created {
		s.log.Info("bootstrapped the catalog", "tenant", t.TenantID, "namespace", ns.Namespace)
	}
	return created, nil
}

// MintToken signs a token with the active key. Expiry and TenantID are
// required; IssuedAt and NotBefore default to the service clock's now and
// ID to a random value.
func (s *Service) MintToken(c auth.Claims) (string, error) {
	if c.IssuedAt.IsZero() {
		c.IssuedAt = s.now()
	}
	if c.NotBefore.IsZero() {
		c.NotBefore = c.IssuedAt
	}
	return s.signer.Load().Sign(c)
}

// Snapshot returns every live resource of kind and the cursor to follow
// the kind's changes from.
func (s *Service) Snapshot(ctx context.Context, kind wire.CatalogKind) (*wire.CatalogPage, error) {
	if !feedKind(kind) {
		return nil, unknownKind(kind)
	}
	return s.stamped(ctx)(s.store.Snapshot(ctx, kind))
}

// Changes returns up to DefaultChangesLimit changes of kind after since.
func (s *Service) Changes(ctx context.Context, kind wire.CatalogKind, since uint64) (*wire.CatalogPage, error) {
	if !feedKind(kind) {
		return nil, unknownKind(kind)
	}
	return s.stamped(ctx)(s.store.Changes(ctx, kind, since, DefaultChangesLimit))
}

// stamped returns a function that names the cluster on a page read from
// the store, so a broker knows whose catalog it follows.
func (s *Service) stamped(ctx context.Context) func(*wire.CatalogPage, error) (*wire.CatalogPage, error) {
	return func(p *wire.CatalogPage, err error) (*wire.CatalogPage, error) {
		if err != nil {
			return nil, err
		}
		if p.ClusterID, err = s.ClusterID(ctx); err != nil {
			return nil, err
		}
		return p, nil
	}
}

// JWKS returns the public keys tokens are verified with.
func (s *Service) JWKS(ctx context.Context) ([]byte, error) {
	return s.signer.Load().JWKS()
}

// Close stops the broker expiry and placement loops, then closes the store.
func (s *Service) Close() error {
	s.EndWaits()
	s.expiry.stop()
	s.placement.stop()
	s.placementMetrics.close()
	return s.store.Close()
}

func unknownKind(kind wire.CatalogKind) error {
	return &wire.Error{Code: wire.CodeInvalidRequest, Retry: wire.RetryFatal,
		Message: fmt.Sprintf("kind: %q is not one of tenants, namespaces, caches, streams, revocations", kind)}
}
