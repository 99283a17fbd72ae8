package auth

import (
	"fmt"
	"strings"
)

// Matcher answers "may this token do action A on resource R" for a
// compiled set of permissions. It is immutable and safe for concurrent
// use. A nil *Matcher allows nothing.
type Matcher struct {
	perms []string
	all   bool              // some permission is "*:*"
	exact map[Action][]glob // resource patterns by literal action
	wild  []wildRule        // permissions whose action contains '*'
}

type wildRule struct {
	action   glob
	resource glob
}

// CompilePerms parses permission strings of the form
// "<action>:<resource-pattern>" (split at the first ':'). Both parts must
// be non-empty and free of spaces and control characters. The first bad
// entry is reported; nothing is compiled in that case.
func CompilePerms(perms []string) (*Matcher, error) {
	m := &Matcher{perms: append([]string(nil), perms...), exact: map[Action][]glob{}}
	for i, p := range perms {
		action, pattern, err := splitPerm(p)
		if err != nil {
			return nil, fmt.Errorf("auth: permission %d %q: %w", i, p, err)
		}
		m.add(action, pattern)
	}
	return m, nil
}

func splitPerm(p string) (action, pattern string, err error) {
	if i := strings.IndexFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f }); i >= 0 {
		return "", "", fmt.Errorf("space or control character at byte %d", i)
	}
	action, pattern, ok := strings.Cut(p, ":")
	switch {
	case !ok:
		return "", "", fmt.Errorf("want <action>:<resource-pattern>")
	case action == "":
		return "", "", fmt.Errorf("empty action")
	case pattern == "":
		return "", "", fmt.Errorf("empty resource pattern")
	}
	return action, pattern, nil
}

func (m *Matcher) add(action, pattern string) {
	if strings.Trim(action, "*") == "" && strings.Trim(pattern, "*") == "" {
		m.all = true
		return
	}
	res := compileGlob(pattern)
	if !strings.Contains(action, "*") {
		m.exact[Action(action)] = append(m.exact[Action(action)], res)
		return
	}
	m.wild = append(m.wild, wildRule{action: compileGlob(action), resource: res})
}

// Allows reports whether some permission grants action a on resource. A
// permission grants it when its action pattern matches a and its resource
// pattern matches resource or an ancestor of it (a prefix ending just
// before a '/'). It does not allocate.
func (m *Matcher) Allows(a Action, resource string) bool {
	if m == nil {
		return false
	}
	if m.all {
		return true
	}
	for _, g := range m.exact[a] {
		if g.matchOrAncestor(resource) {
			return true
		}
	}
	for i := range m.wild {
		r := &m.wild[i]
		if r.action.match(string(a)) && r.resource.matchOrAncestor(resource) {
			return true
		}
	}
	return false
}

// Perms returns a copy of the permission strings the matcher was compiled
// from.
func (m *Matcher) Perms() []string {
	if m == nil {
		return nil
	}
	return append([]string(nil), m.perms...)
}
