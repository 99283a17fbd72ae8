package auth

import "strings"

// glob is a pattern where '*' matches any run of characters (including
// none and including '/'); every other byte matches itself. It is split
// once at compile time so matching is a prefix test, a suffix test and a
// left-to-right search for each literal in between, with no allocation.
type glob struct {
	// parts are the literals between '*'s. A pattern without '*' has one
	// part (the whole pattern); a pattern with n '*'s has n+1 parts.
	// Invariant: len(parts) >= 1.
	parts []string
}

func compileGlob(p string) glob {
	return glob{parts: strings.Split(p, "*")}
}

// literal reports whether the pattern has no '*'.
func (g glob) literal() bool { return len(g.parts) == 1 }

// match reports whether the whole of s matches the pattern.
func (g glob) match(s string) bool {
	if g.literal() {
		return s == g.parts[0]
	}
	first, last := g.parts[0], g.parts[len(g.parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	// Taking each middle literal at its leftmost occurrence leaves the
	// most room for the ones after it, so a greedy scan is exact.
	mid := s[len(first) : len(s)-len(last)]
	for _, lit := range g.parts[1 : len(g.parts)-1] {
		i := strings.Index(mid, lit)
		if i < 0 {
			return false
		}
		mid = mid[i+len(lit):]
	}
	return true
}

// matchOrAncestor reports whether the pattern matches s or a prefix of s
// that ends just before a '/' (an ancestor path of s).
func (g glob) matchOrAncestor(s string) bool {
	if g.literal() {
		p := g.parts[0]
		return s == p || (len(s) > len(p) && s[len(p)] == '/' && strings.HasPrefix(s, p))
	}
	if g.match(s) {
		return true
	}
	if g.parts[len(g.parts)-1] == "" {
		// A trailing '*' absorbs whatever follows an ancestor, so an
		// ancestor match implies the full match already tested.
		return false
	}
	for i := strings.IndexByte(s, '/'); i >= 0; {
		if g.match(s[:i]) {
			return true
		}
		j := strings.IndexByte(s[i+1:], '/')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}
