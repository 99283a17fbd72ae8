package serve

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testJWT = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.c2lnbmF0dXJl"

func mintOnce(t *testing.T, calls *int) func() (string, error) {
	return func() (string, error) {
		*calls++
		return testJWT, nil
	}
}

func TestEnsureAdminTokenWritesOnceAndKeeps(t *testing.T) {
	path := filepath.Join(t.TempDir(), adminTokenFile)
	var calls int
	wrote, err := ensureAdminToken(path, mintOnce(t, &calls))
	if err != nil || !wrote {
		t.Fatalf("first start: wrote=%v err=%v", wrote, err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != testJWT+"\n" {
		t.Fatalf("token file %q, %v", b, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left: %v", err)
	}
	wrote, err = ensureAdminToken(path, mintOnce(t, &calls))
	if err != nil || wrote || calls != 1 {
		t.Fatalf("second start: wrote=%v err=%v mints=%d", wrote, err, calls)
	}
}

// TestEnsureAdminTokenRefusesABadFile covers a file that exists but holds
// no token: it is reported with the fix, and nothing is minted over it.
func TestEnsureAdminTokenRefusesABadFile(t *testing.T) {
	for name, content := range map[string]string{
		"empty":      "",
		"blank":      " \n",
		"garbage":    "not a token\n",
		"two_tokens": testJWT + "\n" + testJWT + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), adminTokenFile)
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			var calls int
			wrote, err := ensureAdminToken(path, mintOnce(t, &calls))
			if err == nil || wrote || calls != 0 {
				t.Fatalf("wrote=%v err=%v mints=%d", wrote, err, calls)
			}
			if !strings.Contains(err.Error(), "remove "+path) {
				t.Fatalf("the error does not say what to do: %v", err)
			}
			if b, _ := os.ReadFile(path); string(b) != content {
				t.Fatalf("the file changed to %q", b)
			}
		})
	}
}

// TestEnsureAdminTokenAfterACrash covers what a crash during the first
// start can leave: a temporary file (with or without the target).
func TestEnsureAdminTokenAfterACrash(t *testing.T) {
	t.Run("leftover_temp", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), adminTokenFile)
		if err := os.WriteFile(path+".tmp", []byte("eyJhb"), 0o644); err != nil {
			t.Fatal(err)
		}
		var calls int
		if wrote, err := ensureAdminToken(path, mintOnce(t, &calls)); err != nil || !wrote {
			t.Fatalf("wrote=%v err=%v", wrote, err)
		}
		if b, _ := os.ReadFile(path); string(b) != testJWT+"\n" {
			t.Fatalf("token file %q", b)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v (the leftover's mode leaked)", fi.Mode())
		}
		if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("temporary file left: %v", err)
		}
	})
	t.Run("leftover_temp_and_empty_target", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), adminTokenFile)
		if err := os.WriteFile(path+".tmp", []byte(testJWT), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		var calls int
		wrote, err := ensureAdminToken(path, mintOnce(t, &calls))
		if err == nil || wrote || calls != 0 || !strings.Contains(err.Error(), "is empty") {
			t.Fatalf("wrote=%v err=%v mints=%d", wrote, err, calls)
		}
	})
}

func TestEnsureAdminTokenMintFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), adminTokenFile)
	boom := errors.New("boom")
	if _, err := ensureAdminToken(path, func() (string, error) { return "", boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed mint left a file: %v", err)
	}
}
