package auth

import "strings"

// Narrow returns the permissions a token gets when its caller asks for
// actions × resources and RBAC granted granted. The result is never wider
// than granted, nor wider than the request: a requested permission that a
// granted one covers is kept as asked; otherwise, where a granted
// permission lies inside the request, the granted (narrower) part is kept,
// action and resource intersected separately. Overlaps this cannot express
// exactly are dropped, never widened. Malformed entries are ignored; the
// result has no duplicates and keeps the order of the request.
func Narrow(granted []string, actions []string, resources []string) []string {
	type perm struct{ action, resource string }
	var grants []perm
	for _, g := range granted {
		if a, r, err := splitPerm(g); err == nil {
			grants = append(grants, perm{a, r})
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, ra := range actions {
		for _, rr := range resources {
			if _, _, err := splitPerm(ra + ":" + rr); err != nil {
				continue
			}
			for _, g := range grants {
				a, okA := narrower(g.action, ra, false)
				r, okR := narrower(g.resource, rr, true)
				if p := a + ":" + r; okA && okR && !seen[p] {
					seen[p] = true
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// narrower returns whichever of the patterns a and b lies inside the
// other, or false when neither provably does.
func narrower(a, b string, ancestors bool) (string, bool) {
	switch {
	case patternCovers(a, b, ancestors):
		return b, true
	case patternCovers(b, a, ancestors):
		return a, true
	}
	return "", false
}

// patternCovers reports whether everything pattern specific grants is
// also granted by pattern general. With ancestors, a pattern also grants
// whatever lies below what it matches (resource semantics, see
// glob.matchOrAncestor). The test is conservative: false may mean "not
// provable".
func patternCovers(general, specific string, ancestors bool) bool {
	if general == specific || strings.Trim(general, "*") == "" {
		return true
	}
	// Every string specific grants starts with its literal prefix.
	prefix, _, specificHasStar := strings.Cut(specific, "*")
	g := compileGlob(general)
	switch {
	case g.literal():
		return ancestors && strings.HasPrefix(prefix, general+"/")
	case len(g.parts) == 2 && g.parts[1] == "":
		// "L*" grants every string starting with L.
		return strings.HasPrefix(prefix, g.parts[0])
	case specificHasStar:
		return false
	case ancestors:
		// A literal specific grants itself and what lies below it; a
		// pattern granting it (or an ancestor of it) grants those too.
		return g.matchOrAncestor(specific)
	default:
		return g.match(specific)
	}
}
