package controlplane

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/felixmq/felix/raftmeta/catalog"
	"github.com/felixmq/felix/wire"
)

// Policy is an RBAC role of a tenant: the permissions it grants.
type Policy struct {
	Tenant      string   `json:"tenant"`
	Role        string   `json:"role"`
	Permissions []string `json:"permissions"`
}

// Assignment gives a principal of a tenant a role.
type Assignment struct {
	Tenant    string `json:"tenant"`
	Principal string `json:"principal"`
	Role      string `json:"role"`
}

// Batch is an all-or-nothing create of one namespace's streams and caches
// (see catalog.Batch).
type Batch = catalog.Batch

// PutRevocation implements Store.
func (s *RaftStore) PutRevocation(ctx context.Context, r wire.Revocation) error {
	return s.write(ctx, wire.KindRevocations, catalog.ModePut, wire.CatalogItem{Revocation: &r})
}

// DeleteRevocation implements Store.
func (s *RaftStore) DeleteRevocation(ctx context.Context, tenant, subject string) error {
	return s.drop(ctx, wire.KindRevocations, keyOf(tenant, subject), false)
}

// Revocations implements Store.
func (s *RaftStore) Revocations(ctx context.Context, tenant string) ([]wire.Revocation, error) {
	items, err := s.items(ctx, wire.KindRevocations, childPrefix(tenantKey(tenant)))
	return resources(items, err, func(it wire.CatalogItem) *wire.Revocation { return it.Revocation })
}

// PutPolicy implements Store.
func (s *RaftStore) PutPolicy(ctx context.Context, p Policy) error {
	return s.putRecord(ctx, catalog.RecordPolicies, keyOf(p.Tenant, p.Role), p)
}

// DeletePolicy implements Store.
func (s *RaftStore) DeletePolicy(ctx context.Context, tenant, role string) error {
	_, err := s.propose(ctx, catalog.CmdDeleteRecord(catalog.RecordPolicies, keyOf(tenant, role)))
	return err
}

// Policies implements Store.
func (s *RaftStore) Policies(ctx context.Context, tenant string) ([]Policy, error) {
	return records[Policy](ctx, s, catalog.RecordPolicies, childPrefix(tenantKey(tenant)))
}

// PutAssignment implements Store.
func (s *RaftStore) PutAssignment(ctx context.Context, a Assignment) error {
	return s.putRecord(ctx, catalog.RecordAssignments, keyOf(a.Tenant, a.Principal, a.Role), a)
}

// DeleteAssignment implements Store.
func (s *RaftStore) DeleteAssignment(ctx context.Context, tenant, principal, role string) error {
	_, err := s.propose(ctx, catalog.CmdDeleteRecord(catalog.RecordAssignments, keyOf(tenant, principal, role)))
	return err
}

// Assignments implements Store.
func (s *RaftStore) Assignments(ctx context.Context, tenant string) ([]Assignment, error) {
	return records[Assignment](ctx, s, catalog.RecordAssignments, childPrefix(tenantKey(tenant)))
}

func (s *RaftStore) putRecord(ctx context.Context, bucket, key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = s.propose(ctx, catalog.CmdPutRecord(bucket, key, raw))
	return err
}

func records[T any](ctx context.Context, s *RaftStore, bucket, prefix string) ([]T, error) {
	raws, err := readAfter(ctx, s, func() ([][]byte, error) { return s.cat.Records(bucket, prefix) })
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(raws))
	for _, raw := range raws {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("corrupt %s record: %w", bucket, err)
		}
		out = append(out, v)
	}
	return out, nil
}
