package serve

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/felixmq/felix/internal/atomicfile"
)

// ensureAdminToken makes sure path holds an admin token: when the file is
// missing it writes mint's token (atomically, see atomicfile.Write) and
// reports that it wrote. A file that exists must hold a token: an empty or
// unreadable one (a crash of a release that wrote in place, or a hand
// edit) is an error naming the fix, never a token, since an empty token
// would later start the catalog feeds with no credentials.
func ensureAdminToken(path string, mint func() (string, error)) (wrote bool, err error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		return false, checkTokenFile(path, b)
	case !errors.Is(err, os.ErrNotExist):
		return false, err
	}
	tok, err := mint()
	if err != nil {
		return false, err
	}
	if err := checkTokenFile(path, []byte(tok)); err != nil {
		return false, fmt.Errorf("minted token: %w", err)
	}
	if err := atomicfile.Write(path, []byte(tok+"\n"), 0o600); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	return true, nil
}

// checkTokenFile accepts one line holding a compact JWT (three non-empty
// base64url parts joined by dots).
func checkTokenFile(path string, b []byte) error {
	tok := strings.TrimSpace(string(b))
	fix := fmt.Sprintf("remove %s to mint a new admin token on the next start, or put a valid token in it", path)
	if tok == "" {
		return fmt.Errorf("%s is empty (perhaps left by an interrupted first start): %s", path, fix)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || !allBase64URL(parts) {
		return fmt.Errorf("%s does not hold a token: %s", path, fix)
	}
	return nil
}

func allBase64URL(parts []string) bool {
	for _, p := range parts {
		if p == "" {
			return false
		}
		for _, r := range p {
			ok := r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_'
			if !ok {
				return false
			}
		}
	}
	return true
}
