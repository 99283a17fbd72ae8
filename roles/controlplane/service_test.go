package controlplane

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/felixmq/felix/core/auth"
	"github.com/felixmq/felix/wire"
)

func reopenService(t *testing.T, path string) *Service {
	t.Helper()
	store := openTestRaft(t, path)
	svc, err := New(Config{Logger: quietLogger()}, store)
	if err != nil {
		store.Close()
		t.Fatal(err)
	}
	return svc
}

func tokenKID(t *testing.T, tok string) string {
	t.Helper()
	head, _, _ := strings.Cut(tok, ".")
	raw, err := base64.RawURLEncoding.DecodeString(head)
	must(t, err)
	var h struct {
		KID string `json:"kid"`
	}
	must(t, json.Unmarshal(raw, &h))
	return h.KID
}

func TestBootstrapExactlyOnce(t *testing.T) {
	path := t.TempDir()
	svc := reopenService(t, path)
	created, err := svc.Bootstrap(bg)
	must(t, err)
	if !created {
		t.Fatal("first Bootstrap created nothing")
	}
	created, err = svc.Bootstrap(bg)
	must(t, err)
	if created {
		t.Fatal("second Bootstrap ran again")
	}
	snap, err := svc.Snapshot(bg, wire.KindNamespaces)
	must(t, err)
	if len(snap.Items) != 1 || snap.Items[0].Namespace.Namespace != "default" || snap.Seq != 1 {
		t.Fatalf("namespaces after bootstrap: %+v", snap)
	}
	tok, err := svc.MintToken(auth.Claims{Subject: "x", TenantID: "default", Perms: []string{"*:*"}, Expiry: time.Now().Add(time.Hour)})
	must(t, err)
	must(t, svc.Close())

	// Across a reopen: the flag holds, the key is the same, the catalog is kept.
	svc = reopenService(t, path)
	defer svc.Close()
	created, err = svc.Bootstrap(bg)
	must(t, err)
	if created {
		t.Fatal("Bootstrap ran again after reopen")
	}
	tok2, err := svc.MintToken(auth.Claims{Subject: "x", TenantID: "default", Perms: []string{"*:*"}, Expiry: time.Now().Add(time.Hour)})
	must(t, err)
	if tokenKID(t, tok) != tokenKID(t, tok2) {
		t.Fatal("signing key changed across reopen")
	}
	snap, err = svc.Snapshot(bg, wire.KindTenants)
	must(t, err)
	if len(snap.Items) != 1 || snap.Seq != 1 {
		t.Fatalf("tenants after reopen: %+v", snap)
	}
}

func TestServiceFeedsRejectUnknownKind(t *testing.T) {
	svc := reopenService(t, t.TempDir())
	defer svc.Close()
	if _, err := svc.Snapshot(bg, "widgets"); err == nil {
		t.Fatal("Snapshot accepted an unknown kind")
	}
	if _, err := svc.Changes(bg, "widgets", 0); err == nil {
		t.Fatal("Changes accepted an unknown kind")
	}
}
