package catalog

import (
	"bytes"
	"encoding/json"
	"errors"

	bolt "go.etcd.io/bbolt"
)

// maxRequests bounds the remembered request outcomes; the oldest are
// forgotten first. A proposer re-proposes within seconds, far inside it.
const maxRequests = 10000

// outcome is the recorded result of a command with a request id.
type outcome struct {
	Result []byte `json:"r,omitempty"`
	Err    string `json:"e,omitempty"` // not_found, conflict, bad_command
	Msg    string `json:"m,omitempty"`
}

var outcomeKinds = map[string]error{"not_found": ErrNotFound, "conflict": ErrConflict, "bad_command": ErrBadCommand}

func (o outcome) result() ([]byte, error) {
	if o.Err == "" {
		return o.Result, nil
	}
	kind := outcomeKinds[o.Err]
	if kind == nil {
		kind = ErrBadCommand
	}
	return nil, &CatalogError{Kind: kind, Msg: o.Msg}
}

func recordedOutcome(tx *bolt.Tx, req string) (outcome, bool) {
	if req == "" {
		return outcome{}, false
	}
	raw := tx.Bucket(catReqBucket).Get([]byte(req))
	if raw == nil {
		return outcome{}, false
	}
	var o outcome
	if json.Unmarshal(raw, &o) != nil {
		return outcome{Err: "bad_command", Msg: "unreadable recorded outcome"}, true
	}
	return o, true
}

// recordOutcome remembers the outcome of request req (nothing when req is
// empty), forgetting the oldest beyond maxRequests.
func recordOutcome(tx *bolt.Tx, req string, result []byte, applyErr error) error {
	if req == "" {
		return nil
	}
	o := outcome{Result: result}
	if applyErr != nil {
		o = outcome{Err: "bad_command", Msg: applyErr.Error()}
		for name, kind := range outcomeKinds {
			if errors.Is(applyErr, kind) {
				o.Err = name
			}
		}
	}
	raw, err := json.Marshal(o)
	if err != nil {
		return err
	}
	lb := tx.Bucket(catReqLog)
	seq, err := lb.NextSequence()
	if err != nil {
		return err
	}
	if err := lb.Put(seqKey(seq), []byte(req)); err != nil {
		return err
	}
	if err := tx.Bucket(catReqBucket).Put([]byte(req), raw); err != nil {
		return err
	}
	if seq <= maxRequests {
		return nil
	}
	old := seqKey(seq - maxRequests)
	if k := lb.Get(old); k != nil {
		if err := tx.Bucket(catReqBucket).Delete(bytes.Clone(k)); err != nil {
			return err
		}
	}
	return lb.Delete(old)
}
