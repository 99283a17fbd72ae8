package wire

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"testing"
)

// declaredCloseCodes returns the names of the CloseCode constants declared
// in closecode.go, so a constant left out of CloseCodes is caught.
func declaredCloseCodes(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "closecode.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "CloseCode" {
				for _, n := range vs.Names {
					names = append(names, n.Name)
				}
			}
		}
	}
	return names
}

// TestCloseCodesAreOneTable checks that every declared code is in
// CloseCodes once, that no two entries share a value or a name (a value
// has exactly one meaning), and that the table is in value order.
func TestCloseCodesAreOneTable(t *testing.T) {
	declared := declaredCloseCodes(t)
	if len(declared) != len(CloseCodes) {
		t.Errorf("closecode.go declares %d codes %v, CloseCodes lists %d", len(declared), declared, len(CloseCodes))
	}
	byValue := map[CloseCode]string{}
	byName := map[string]CloseCode{}
	for i, info := range CloseCodes {
		if prev, dup := byValue[info.Code]; dup {
			t.Errorf("value %d means both %s and %s", info.Code, prev, info.Name)
		}
		if prev, dup := byName[info.Name]; dup {
			t.Errorf("name %s names both %d and %d", info.Name, prev, info.Code)
		}
		byValue[info.Code], byName[info.Name] = info.Name, info.Code
		if i > 0 && info.Code <= CloseCodes[i-1].Code {
			t.Errorf("CloseCodes not in value order at %s", info.Name)
		}
		if got := info.Code.String(); got != info.Name {
			t.Errorf("CloseCode(%d).String() = %q, want %q", info.Code, got, info.Name)
		}
	}
	if got := CloseCode(1 << 40).String(); got != "close_code_1099511627776" {
		t.Errorf("unknown code String() = %q", got)
	}
}

// TestCloseCodesMatchProtocolDoc checks docs/protocol.md's close code
// table lists exactly CloseCodes, in order.
func TestCloseCodesMatchProtocolDoc(t *testing.T) {
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| (\\d+) \\| `([a-z_]+)` \\| `Close[A-Za-z]+` \\|")
	rows := row.FindAllStringSubmatch(string(doc), -1)
	if len(rows) != len(CloseCodes) {
		t.Fatalf("docs/protocol.md has %d close code rows, CloseCodes %d", len(rows), len(CloseCodes))
	}
	for i, r := range rows {
		v, _ := strconv.ParseUint(r[1], 10, 64)
		if want := CloseCodes[i]; CloseCode(v) != want.Code || r[2] != want.Name {
			t.Errorf("docs row %d is %s %s, want %d %s", i, r[1], r[2], want.Code, want.Name)
		}
	}
}
