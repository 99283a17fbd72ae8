package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/felixmq/felix/sdk/felix"
	"github.com/felixmq/felix/wire"
)

// codeUnreachable labels a refused connection; it picks a hint and is
// not printed as a code.
const codeUnreachable = "unreachable"

// Exit codes.
const (
	exitGeneric = 1
	exitUsage   = 2
)

// printer writes a command's results in the format -o chose.
type printer struct {
	w    io.Writer
	json bool
}

// newPrinter reads -o/--output; anything but text or json is a usage error.
func newPrinter(c *cli.Context) (printer, error) {
	switch f := c.String(flagOutput); f {
	case "", "text":
		return printer{w: c.App.Writer}, nil
	case "json":
		return printer{w: c.App.Writer, json: true}, nil
	default:
		return printer{}, usageErrorf(c, "unknown output format %q (use text or json)", f)
	}
}

// JSON writes v as one line of JSON.
func (p printer) JSON(v any) error {
	enc := json.NewEncoder(p.w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// Line writes one line of text.
func (p printer) Line(format string, args ...any) error {
	_, err := fmt.Fprintf(p.w, format+"\n", args...)
	return err
}

// Table writes a header and rows as aligned columns.
func (p printer) Table(header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// bytesField puts b into m under key when it is UTF-8 text, else base64
// encoded under key+"_base64", so JSON output never mangles binary data.
func bytesField(m map[string]any, key string, b []byte) {
	if utf8.Valid(b) {
		m[key] = string(b)
		return
	}
	m[key+"_base64"] = base64.StdEncoding.EncodeToString(b)
}

// usageErrorf is a usage error (exit code 2) with a pointer to --help.
func usageErrorf(c *cli.Context, format string, args ...any) error {
	msg := "error: " + fmt.Sprintf(format, args...)
	if c != nil && c.Command != nil && c.Command.HelpName != "" {
		msg += fmt.Sprintf("\nrun '%s --help' for usage", c.Command.HelpName)
	}
	return cli.Exit(msg, exitUsage)
}

// onUsageError turns urfave's flag-parsing errors into exit code 2.
func onUsageError(c *cli.Context, err error, _ bool) error {
	return usageErrorf(c, "%v", err)
}

// errorCode extracts the machine-readable code and message of an error
// from the control plane, the broker or the wire layer.
func errorCode(err error) (code, msg string) {
	var api *APIError
	var be *felix.BrokerError
	var we *wire.Error
	var ce *felix.SubscribeCursorError
	var de *felix.DialError
	switch {
	case errors.As(err, &de) && (de.Timeout() || errors.Is(de, syscall.ECONNREFUSED)):
		return codeBrokerUnreachable, de.Error()
	case errors.As(err, &ce):
		return string(ce.Reason), cursorMessage(ce)
	case errors.As(err, &api):
		return api.Code, api.Message
	case errors.As(err, &be):
		return string(be.Code), be.Message
	case errors.As(err, &we):
		return string(we.Code), we.Message
	case errors.Is(err, context.DeadlineExceeded):
		return "", "timed out: " + err.Error()
	case errors.Is(err, context.Canceled):
		return "", "interrupted"
	case errors.Is(err, syscall.ECONNREFUSED):
		return codeUnreachable, err.Error()
	}
	return "", err.Error()
}

// cursorMessage says which start was refused and what is available.
func cursorMessage(ce *felix.SubscribeCursorError) string {
	if ce.TooOld {
		return fmt.Sprintf("offset %d is no longer kept (retention); the oldest available is %d", ce.Requested, ce.Available)
	}
	return fmt.Sprintf("offset %d is past the end of the stream; the next offset is %d", ce.Requested, ce.Available)
}

// exitError renders err for the user: "error: <message> (code <code>)"
// plus a hint line for known codes, with exit code 1. Errors that already
// carry an exit code pass through unchanged.
func exitError(err error) error {
	if err == nil {
		return nil
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return err
	}
	code, msg := errorCode(err)
	if msg == "" {
		msg = err.Error()
	}
	var b strings.Builder
	b.WriteString("error: " + msg)
	if code != "" && code != codeUnreachable && code != codeBrokerUnreachable {
		fmt.Fprintf(&b, " (code %s)", code)
	}
	h := hintFor(err, code)
	var he *hintedError
	if errors.As(err, &he) && he.code == code {
		h = he.hint
	}
	if h != "" {
		b.WriteString("\nhint: " + h)
	}
	return cli.Exit(b.String(), exitGeneric)
}

// hintedError gives err a hint of its own for one code, where the caller
// knows better than the generic table what that code means.
type hintedError struct {
	err  error
	code string
	hint string
}

func (e *hintedError) Error() string { return e.err.Error() }
func (e *hintedError) Unwrap() error { return e.err }

// withHint attaches hint to err when err carries code.
func withHint(err error, code, hint string) error {
	if err == nil {
		return nil
	}
	if c, _ := errorCode(err); c != code {
		return err
	}
	return &hintedError{err: err, code: code, hint: hint}
}
