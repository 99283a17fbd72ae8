package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

// maxBodyBytes bounds every request body.
const maxBodyBytes = 1 << 20

// codeConflict is the HTTP-only error code for "already exists" and
// "still has children".
const codeConflict wire.Code = "conflict"

// handlerFunc serves one route after authorization. It returns the
// success status and the body to encode as JSON (nil for none).
type handlerFunc func(r *http.Request, id *auth.Identity) (int, any, error)

// listBody is the shape of every list response.
type listBody[T any] struct {
	Items []T `json:"items"`
}

// errorBody is the shape of every error response.
type errorBody struct {
	Error errorJSON `json:"error"`
}

type errorJSON struct {
	Code    wire.Code       `json:"code"`
	Message string          `json:"message"`
	Retry   wire.RetryClass `json:"retry"`
	Detail  map[string]any  `json:"detail,omitempty"`
}

// Handler returns the REST API. Every route of routes() is registered
// with its method and path pattern; anything else is answered with a JSON
// not_found.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	paths := http.NewServeMux() // every route path, any method: tells 405 from 404
	allowed := map[string][]string{}
	for _, rt := range s.routes() {
		mux.Handle(rt.pattern(), s.wrap(rt))
		if allowed[rt.path] == nil {
			paths.Handle(rt.path, http.NotFoundHandler())
		}
		allowed[rt.path] = append(allowed[rt.path], rt.method)
	}
	mux.Handle("/", s.wrap(route{path: "/", handle: func(r *http.Request, _ *auth.Identity) (int, any, error) {
		if _, pattern := paths.Handler(r); pattern != "" {
			methods := strings.Join(allowed[pattern], ", ")
			return 0, nil, &methodError{msg: fmt.Sprintf("method %s is not allowed on %s; use %s", r.Method, pattern, methods), allow: methods}
		}
		return 0, nil, &wire.Error{Code: wire.CodeNotFound, Retry: wire.RetryFatal, Message: "no such route"}
	}}))
	return mux
}

// methodError answers a known path asked with the wrong method.
type methodError struct{ msg, allow string }

func (e *methodError) Error() string { return e.msg }

// wrap authorizes, runs the route, writes the response and counts it.
func (s *Service) wrap(rt route) http.Handler {
	label := rt.pattern()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, body, err := s.serve(rt, r)
		if err != nil {
			status = s.writeError(w, r, err)
		} else {
			writeJSON(w, status, body)
		}
		s.metrics.count(label, status)
	})
}

func (s *Service) serve(rt route, r *http.Request) (int, any, error) {
	var id *auth.Identity
	if rt.scope != scopeNone {
		var err error
		if id, err = s.authorize(r, rt.scope); err != nil {
			return 0, nil, err
		}
	}
	return rt.handle(r, id)
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	if body == nil {
		w.WriteHeader(status)
		return
	}
	var b []byte
	if raw, ok := body.(json.RawMessage); ok {
		b = raw
	} else {
		var err error
		if b, err = json.Marshal(body); err != nil {
			status = http.StatusInternalServerError
			b = []byte(`{"error":{"code":"internal","message":"encode response","retry":"outcome_unknown"}}`)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// writeError maps err to a status and an error body, and returns the
// status. Unexpected errors are logged and reported without their text.
func (s *Service) writeError(w http.ResponseWriter, r *http.Request, err error) int {
	e := errorJSON{Code: wire.CodeInternal, Retry: wire.RetryOutcomeUnknown, Message: "internal error"}
	status := http.StatusInternalServerError
	var we *wire.Error
	var tooBig *http.MaxBytesError
	var badMethod *methodError
	switch {
	case errors.As(err, &badMethod):
		e = errorJSON{Code: wire.CodeInvalidRequest, Retry: wire.RetryFatal, Message: badMethod.msg}
		status = http.StatusMethodNotAllowed
		w.Header().Set("Allow", badMethod.allow)
	case errors.Is(err, ErrNotFound):
		e = errorJSON{Code: wire.CodeNotFound, Retry: wire.RetryFatal, Message: err.Error()}
		status = http.StatusNotFound
	case errors.Is(err, ErrConflict):
		e = errorJSON{Code: codeConflict, Retry: wire.RetryFatal, Message: err.Error()}
		status = http.StatusConflict
	case errors.As(err, &tooBig):
		e = errorJSON{Code: wire.CodeInvalidRequest, Retry: wire.RetryFatal,
			Message: "body: larger than " + strconv.Itoa(maxBodyBytes) + " bytes"}
		status = http.StatusRequestEntityTooLarge
	case errors.As(err, &we):
		e = errorJSON{Code: we.Code, Retry: we.Retry, Message: we.Message, Detail: we.Detail}
		status = statusForCode(we.Code)
	default:
		s.log.Error("control plane request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeJSON(w, status, errorBody{Error: e})
	return status
}

func statusForCode(c wire.Code) int {
	switch c {
	case wire.CodeUnauthorized, wire.CodeRevoked:
		return http.StatusUnauthorized
	case wire.CodeForbidden:
		return http.StatusForbidden
	case wire.CodeNotFound:
		return http.StatusNotFound
	case wire.CodeInvalidRequest:
		return http.StatusBadRequest
	case codeConflict:
		return http.StatusConflict
	case wire.CodeOverloaded, wire.CodeDraining, wire.CodeNotLeader, wire.CodeShardUnavailable, wire.CodeQuorumTimeout:
		return http.StatusServiceUnavailable
	case wire.CodeUnsupported:
		return http.StatusNotImplemented
	default:
		return http.StatusInternalServerError
	}
}

// invalid builds an invalid_request error.
func invalid(msg string) error {
	return &wire.Error{Code: wire.CodeInvalidRequest, Retry: wire.RetryFatal, Message: msg}
}

// decodeBody reads one JSON object into v: at most maxBodyBytes, no
// unknown fields, nothing after the object.
func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return invalid("body: unexpected data after the JSON object")
	}
	return nil
}

func bodyError(err error) error {
	var (
		tooBig  *http.MaxBytesError
		syntax  *json.SyntaxError
		typeErr *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooBig):
		return err
	case errors.Is(err, io.EOF):
		return invalid("body: a JSON object is required")
	case errors.As(err, &syntax):
		return invalid("body: malformed JSON at byte " + strconv.FormatInt(syntax.Offset, 10))
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return invalid("body: want a JSON object, got " + typeErr.Value)
		}
		return invalid(field + ": want " + typeErr.Type.String() + ", got " + typeErr.Value)
	default:
		// encoding/json reports unknown fields as `json: unknown field "x"`.
		return invalid("body: " + trimJSONPrefix(err.Error()))
	}
}

func trimJSONPrefix(s string) string {
	const p = "json: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}
