package controlplane

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// Refresh token chains.
//
// A refresh token is "frt1.<family>.<gen>.<secret>": the chain (family)
// it belongs to, its generation, and 32 random bytes. The store keeps
// one immutable record per generation under meta key
// "refresh/<tenant>/<family>/<gen>", holding the SHA-256 of that
// generation's secret and the time it was issued (the proposer's clock).
// Generation g+1 is created with PutMetaIfAbsent, which Raft orders: of
// two members rotating the same generation at once exactly one wins, and
// the other sees the winner's record and decides again. A revoked chain
// is a last generation with Revoked set. "refresh/<tenant>/<family>/head"
// is a hint of the newest generation, so finding it takes few reads.

const (
	refreshTokenPrefix = "frt1"
	metaRefreshPrefix  = "refresh/"
	maxRotateAttempts  = 8  // lost races before giving up
	maxChainProbe      = 64 // generations walked past the head hint
)

// chainRecord is one generation of a refresh token chain.
type chainRecord struct {
	Tenant     string   `json:"tenant"`
	Principal  string   `json:"principal"`
	Family     string   `json:"family"`
	Gen        uint64   `json:"gen"`
	Hash       string   `json:"hash"`       // hex SHA-256 of this generation's secret
	IssuedAt   int64    `json:"issued_at"`  // Unix nanoseconds: when this generation replaced the previous one
	ExpiresAt  int64    `json:"expires_at"` // Unix seconds: end of the whole chain
	Actions    []string `json:"actions,omitempty"`
	Resources  []string `json:"resources,omitempty"`
	TTLSeconds int64    `json:"ttl_seconds"` // of each access token
	Revoked    bool     `json:"revoked,omitempty"`
}

// errReplay marks the refusal of a refresh token reused after the grace.
var errReplay = errors.New("refresh token replayed")

type replayError struct{ we *wire.Error }

func (e *replayError) Error() string   { return e.we.Error() }
func (e *replayError) Unwrap() []error { return []error{e.we, errReplay} }

func chainKey(tenant, family string, gen uint64) string {
	return metaRefreshPrefix + tenant + "/" + family + "/" + strconv.FormatUint(gen, 10)
}

func headKey(tenant, family string) string {
	return metaRefreshPrefix + tenant + "/" + family + "/head"
}

func randomText(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func formatRefreshToken(family string, gen uint64, secret string) string {
	return refreshTokenPrefix + "." + family + "." + strconv.FormatUint(gen, 10) + "." + secret
}

func parseRefreshToken(tok string) (family string, gen uint64, secret string, ok bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 4 || parts[0] != refreshTokenPrefix || parts[1] == "" || parts[3] == "" || len(tok) > 512 {
		return "", 0, "", false
	}
	for i := 0; i < len(parts[1]); i++ {
		if !nameByte(parts[1][i]) {
			return "", 0, "", false
		}
	}
	gen, err := strconv.ParseUint(parts[2], 10, 64)
	if err != nil {
		return "", 0, "", false
	}
	return parts[1], gen, parts[3], true
}

// newGeneration fills rec as the next generation with a fresh secret and
// returns its refresh token.
func newGeneration(rec *chainRecord, gen uint64, now time.Time) (string, error) {
	secret, err := randomText(32)
	if err != nil {
		return "", err
	}
	rec.Gen, rec.Hash, rec.IssuedAt, rec.Revoked = gen, hashSecret(secret), now.UnixNano(), false
	return formatRefreshToken(rec.Family, gen, secret), nil
}

// startChain stores generation 0 of a new chain and returns its token.
func (s *Service) startChain(ctx context.Context, rec *chainRecord, now time.Time) (string, error) {
	family, err := randomText(16)
	if err != nil {
		return "", err
	}
	rec.Family = family
	tok, err := newGeneration(rec, 0, now)
	if err != nil {
		return "", err
	}
	won, _, err := s.putGeneration(ctx, *rec)
	if err != nil {
		return "", err
	}
	if !won {
		return "", errors.New("refresh chain id collision")
	}
	return tok, nil
}

// putGeneration stores rec unless its generation exists, and reports
// whether it did; otherwise it returns the record that is there.
func (s *Service) putGeneration(ctx context.Context, rec chainRecord) (bool, chainRecord, error) {
	raw, err := json.Marshal(rec)
	if err != nil {
		return false, chainRecord{}, err
	}
	got, err := s.store.PutMetaIfAbsent(ctx, chainKey(rec.Tenant, rec.Family, rec.Gen), raw)
	if err != nil {
		return false, chainRecord{}, err
	}
	if string(got) == string(raw) {
		// The head is only a hint: losing it costs extra reads later.
		if err := s.store.PutMeta(ctx, headKey(rec.Tenant, rec.Family), []byte(strconv.FormatUint(rec.Gen, 10))); err != nil {
			s.log.Warn("refresh chain head not updated", "err", err)
		}
		return true, rec, nil
	}
	var other chainRecord
	if err := json.Unmarshal(got, &other); err != nil {
		return false, chainRecord{}, fmt.Errorf("stored refresh chain record: %w", err)
	}
	return false, other, nil
}

// generation reads one generation of a chain.
func (s *Service) generation(ctx context.Context, tenant, family string, gen uint64) (chainRecord, bool, error) {
	raw, ok, err := s.store.Meta(ctx, chainKey(tenant, family, gen))
	if err != nil || !ok {
		return chainRecord{}, false, err
	}
	var rec chainRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return chainRecord{}, false, fmt.Errorf("stored refresh chain record: %w", err)
	}
	return rec, true, nil
}

// latest finds the newest generation of a chain at or after from.
func (s *Service) latest(ctx context.Context, from chainRecord) (chainRecord, error) {
	cur := from
	if raw, ok, err := s.store.Meta(ctx, headKey(from.Tenant, from.Family)); err != nil {
		return chainRecord{}, err
	} else if h, perr := strconv.ParseUint(string(raw), 10, 64); ok && perr == nil && h > cur.Gen {
		rec, found, err := s.generation(ctx, from.Tenant, from.Family, h)
		if err != nil {
			return chainRecord{}, err
		}
		if found {
			cur = rec
		}
	}
	for range maxChainProbe {
		next, ok, err := s.generation(ctx, cur.Tenant, cur.Family, cur.Gen+1)
		if err != nil {
			return chainRecord{}, err
		}
		if !ok {
			return cur, nil
		}
		cur = next
	}
	return chainRecord{}, errors.New("refresh chain: newest generation not found")
}

func refreshRefused(msg string) error { return unauthorizedErr(msg) }

// rotate decides a refresh: it returns the new generation and its
// token, or why the token is refused. perms computes the new access
// token's permissions and may refuse (before anything is stored).
func (s *Service) rotate(ctx context.Context, tenant, tok string, now time.Time,
	perms func(chainRecord) ([]string, error)) (chainRecord, string, []string, error) {
	family, gen, secret, ok := parseRefreshToken(tok)
	if !ok {
		return chainRecord{}, "", nil, refreshRefused("malformed refresh token")
	}
	own, ok, err := s.generation(ctx, tenant, family, gen)
	if err != nil {
		return chainRecord{}, "", nil, err
	}
	if !ok {
		return chainRecord{}, "", nil, s.prunedOrUnknown(ctx, tenant, family, gen, now)
	}
	if own.Tenant != tenant || subtle.ConstantTimeCompare([]byte(own.Hash), []byte(hashSecret(secret))) != 1 {
		return chainRecord{}, "", nil, refreshRefused("unknown refresh token")
	}
	for range maxRotateAttempts {
		cur, err := s.latest(ctx, own)
		if err != nil {
			return chainRecord{}, "", nil, err
		}
		switch {
		case cur.Revoked:
			return chainRecord{}, "", nil, refreshRefused("refresh token chain revoked: an older refresh token of it was reused; exchange an OIDC token again")
		case now.Unix() >= cur.ExpiresAt:
			return chainRecord{}, "", nil, refreshRefused("refresh token expired; exchange an OIDC token again")
		}
		if cur.Gen > gen {
			replaced, ok, err := s.generation(ctx, tenant, family, gen+1)
			if err != nil || !ok {
				return chainRecord{}, "", nil, errors.Join(err, errors.New("refresh chain: missing generation"))
			}
			if now.Sub(time.Unix(0, replaced.IssuedAt)) > s.x.grace {
				return chainRecord{}, "", nil, s.replayed(ctx, cur, now)
			}
		}
		granted, err := perms(cur)
		if err != nil {
			return chainRecord{}, "", nil, err
		}
		next := cur
		newTok, err := newGeneration(&next, cur.Gen+1, now)
		if err != nil {
			return chainRecord{}, "", nil, err
		}
		won, _, err := s.putGeneration(ctx, next)
		if err != nil {
			return chainRecord{}, "", nil, err
		}
		if won {
			s.prune(ctx, next, now)
			return next, newTok, granted, nil
		}
	}
	return chainRecord{}, "", nil, &wire.Error{Code: wire.CodeOverloaded, Retry: wire.RetryRetryAfter,
		Message: "refresh token is being refreshed concurrently too often; try again"}
}

// replayed revokes the chain whose newest generation is cur and the
// principal's tokens, and returns the refusal.
func (s *Service) replayed(ctx context.Context, cur chainRecord, now time.Time) error {
	for range maxRotateAttempts {
		dead := cur
		dead.Gen, dead.Hash, dead.IssuedAt, dead.Revoked = cur.Gen+1, "", now.UnixNano(), true
		won, other, err := s.putGeneration(ctx, dead)
		if err != nil {
			return err
		}
		if won || other.Revoked {
			break
		}
		if cur, err = s.latest(ctx, other); err != nil {
			return err
		}
	}
	if err := s.revokePrincipal(ctx, cur.Tenant, cur.Principal, "refresh token reused"); err != nil {
		return err
	}
	s.log.Warn("refresh token reused after rotation; chain revoked", "tenant", cur.Tenant, "subject", cur.Principal)
	return &replayError{we: &wire.Error{Code: wire.CodeUnauthorized, Retry: wire.RetryFatal,
		Message: "refresh token reused after it was rotated: the chain is revoked and the principal's tokens withdrawn"}}
}

// refreshRequest is the body of POST .../token/refresh.
type refreshRequest struct {
	RefreshToken string `json:"refresh_token"`
}

func (s *Service) refreshToken(r *http.Request, _ *auth.Identity) (int, any, error) {
	status, body, err := s.refresh(r)
	countResult("felix_controlplane_token_refreshes_total", err)
	return status, body, err
}

func (s *Service) refresh(r *http.Request) (int, any, error) {
	n, err := pathNames(r, "tenant")
	if err != nil {
		return 0, nil, err
	}
	var req refreshRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	if req.RefreshToken == "" {
		return 0, nil, invalid("refresh_token: required")
	}
	ctx := r.Context()
	if err := s.mustTenant(ctx, n[0]); err != nil {
		return 0, nil, err
	}
	rec, tok, perms, err := s.rotate(ctx, n[0], req.RefreshToken, s.now(), func(c chainRecord) ([]string, error) {
		return s.tokenPerms(ctx, c.Tenant, c.Principal, c.Actions, c.Resources)
	})
	if err != nil {
		return 0, nil, err
	}
	resp, err := s.issue(ctx, rec, perms, tok)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, resp, nil
}

// prune deletes the generations a refresh can no longer accept: every one
// before the newest's predecessor whose successor was issued longer ago
// than the reuse grace (a superseded token is still good within the
// grace). Presenting a pruned one is recognised as a replay from the
// generation number alone (prunedOrUnknown), so a chain holds a bounded
// number of records however often it is refreshed. A failed delete only
// leaves a record behind, for a later refresh to prune.
func (s *Service) prune(ctx context.Context, next chainRecord, now time.Time) {
	for k := int64(next.Gen) - 2; k >= 0; k-- {
		succ, ok, err := s.generation(ctx, next.Tenant, next.Family, uint64(k)+1)
		if err != nil || !ok || now.Sub(time.Unix(0, succ.IssuedAt)) <= s.x.grace {
			return
		}
		if _, ok, err := s.generation(ctx, next.Tenant, next.Family, uint64(k)); err != nil || !ok {
			return // pruned before, with everything older
		}
		if err := s.store.DeleteMeta(ctx, chainKey(next.Tenant, next.Family, uint64(k))); err != nil {
			s.log.Warn("pruning a refresh chain generation", "err", err)
			return
		}
	}
}

// prunedOrUnknown decides a refresh token whose generation has no record:
// a generation the chain has moved at least two past was pruned, so the
// token is an old one presented again — a replay, which revokes the chain;
// anything else is unknown.
func (s *Service) prunedOrUnknown(ctx context.Context, tenant, family string, gen uint64, now time.Time) error {
	raw, ok, err := s.store.Meta(ctx, headKey(tenant, family))
	if err != nil {
		return err
	}
	head, perr := strconv.ParseUint(string(raw), 10, 64)
	if !ok || perr != nil || head < gen+2 {
		return refreshRefused("unknown refresh token")
	}
	rec, found, err := s.generation(ctx, tenant, family, head)
	if err != nil {
		return err
	}
	if !found || rec.Tenant != tenant {
		return refreshRefused("unknown refresh token")
	}
	cur, err := s.latest(ctx, rec)
	if err != nil {
		return err
	}
	if cur.Revoked {
		return refreshRefused("refresh token chain revoked: an older refresh token of it was reused; exchange an OIDC token again")
	}
	return s.replayed(ctx, cur, now)
}
