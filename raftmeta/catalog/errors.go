package catalog

import "errors"

// Deterministic outcomes of catalog commands. They are part of the
// replicated result: every member computes the same one, and the proposer
// gets it back from Propose. Errors wrap one of them and name the
// resource; match with errors.Is.
var (
	// ErrNotFound: the resource, or the parent it needs, does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the resource exists already, still has children, or an
	// idempotency key was reused for a different batch.
	ErrConflict = errors.New("conflict")
	// ErrBadCommand: the command could not be decoded or is not valid.
	ErrBadCommand = errors.New("raftmeta catalog: malformed command")
)

// CatalogError is a deterministic catalog failure with a readable message
// that unwraps to ErrNotFound, ErrConflict or ErrBadCommand.
type CatalogError struct {
	Kind error
	Msg  string
}

func (e *CatalogError) Error() string { return e.Msg }
func (e *CatalogError) Unwrap() error { return e.Kind }

func notFound(msg string) error { return &CatalogError{Kind: ErrNotFound, Msg: msg} }
func conflict(msg string) error { return &CatalogError{Kind: ErrConflict, Msg: msg} }
func badCommand(msg string) error {
	return &CatalogError{Kind: ErrBadCommand, Msg: "malformed catalog command: " + msg}
}

// isDeterministic reports whether err is a replicated outcome (as opposed
// to a local failure such as a disk error).
func isDeterministic(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) || errors.Is(err, ErrBadCommand)
}
