package cli

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// Policy is an RBAC role of a tenant and the permissions it grants.
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

// PutPolicy creates or replaces a role's permissions.
func (a *AdminClient) PutPolicy(ctx context.Context, tenant, role string, perms []string) (Policy, error) {
	var out Policy
	err := a.do(ctx, http.MethodPut, apiPath("tenants", tenant, "policies", role), nil, map[string]any{"permissions": perms}, &out)
	return out, err
}

// DeletePolicy removes a role (its principals' tokens are revoked).
func (a *AdminClient) DeletePolicy(ctx context.Context, tenant, role string) error {
	return a.do(ctx, http.MethodDelete, apiPath("tenants", tenant, "policies", role), nil, nil, nil)
}

// Policies lists a tenant's roles.
func (a *AdminClient) Policies(ctx context.Context, tenant string) ([]Policy, error) {
	return list[Policy](ctx, a, apiPath("tenants", tenant, "policies"), "policies")
}

// Assign gives principal role.
func (a *AdminClient) Assign(ctx context.Context, tenant, principal, role string) (Assignment, error) {
	var out Assignment
	err := a.do(ctx, http.MethodPut, apiPath("tenants", tenant, "principals", principal, "roles", role), nil, nil, &out)
	return out, err
}

// Unassign takes role from principal and revokes its tokens.
func (a *AdminClient) Unassign(ctx context.Context, tenant, principal, role string) error {
	return a.do(ctx, http.MethodDelete, apiPath("tenants", tenant, "principals", principal, "roles", role), nil, nil, nil)
}

// RemovePrincipal takes every role from principal and revokes its tokens.
func (a *AdminClient) RemovePrincipal(ctx context.Context, tenant, principal string) error {
	return a.do(ctx, http.MethodDelete, apiPath("tenants", tenant, "principals", principal), nil, nil, nil)
}

// Assignments lists a tenant's role assignments (one principal's when
// principal is not empty).
func (a *AdminClient) Assignments(ctx context.Context, tenant, principal string) ([]Assignment, error) {
	var q url.Values
	if principal != "" {
		q = url.Values{"principal": {principal}}
	}
	var raw struct {
		Items []Assignment `json:"items"`
	}
	err := a.do(ctx, http.MethodGet, apiPath("tenants", tenant, "assignments"), q, nil, &raw)
	return raw.Items, err
}

func rbacCommand() *cli.Command {
	return group(&cli.Command{
		Name:      "rbac",
		Usage:     "manage roles and who holds them (what exchanged tokens may do)",
		UsageText: "felix admin rbac policy add|remove|list ...\nfelix admin rbac role assign|unassign|list ...",
		Description: "A role (policy) is a set of ACTION:RESOURCE permissions; principals are given roles.\n" +
			"A token exchanged for an OIDC token holds the union of its principal's roles. Taking a\n" +
			"role away, or narrowing or deleting it, revokes the affected principals' tokens. Example:\n\n" +
			"   felix admin rbac policy add reader 'stream.subscribe:stream:acme/prod/*'\n" +
			"   felix admin rbac role assign alice reader",
		Subcommands: []*cli.Command{policyCommand(), roleCommand()},
	})
}

func policyCommand() *cli.Command {
	return group(&cli.Command{
		Name:        "policy",
		Usage:       "add, remove and list the permissions of roles",
		UsageText:   "felix admin rbac policy add ROLE PERM...\nfelix admin rbac policy remove ROLE [PERM...]\nfelix admin rbac policy list",
		Description: "Edits the tenant's roles. Example:\n\n   felix admin rbac policy add reader 'cache.read:cache:acme/prod/users/alice/*'",
		Subcommands: []*cli.Command{policyAddCommand(), policyRemoveCommand(), policyListCommand()},
	})
}

func policyAddCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "add",
		Usage:     "add permissions to a role, creating it if needed",
		ArgsUsage: "ROLE PERM...",
		UsageText: "felix admin rbac policy add ROLE PERM... [--tenant T] [-o json]",
		Description: "Adds each PERM (ACTION:RESOURCE, e.g. stream.publish:stream:acme/prod/*) to ROLE.\n" +
			"Example:\n\n   felix admin rbac policy add writer 'stream.publish:stream:acme/prod/*'",
		Flags: clientFlags(),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 2, -1); err != nil {
				return err
			}
			role, add := c.Args().First(), splitPerms(c.Args().Tail())
			return withAdmin(c, func(a *AdminClient, s Settings, p printer) error {
				perms, _, err := rolePerms(c.Context, a, s.Tenant, role)
				if err != nil {
					return err
				}
				for _, x := range add {
					if !slices.Contains(perms, x) {
						perms = append(perms, x)
					}
				}
				pol, err := a.PutPolicy(c.Context, s.Tenant, role, perms)
				if err != nil {
					return err
				}
				return printPolicy(p, pol)
			})
		},
	})
}

func policyRemoveCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "remove",
		Aliases:   []string{"rm"},
		Usage:     "remove permissions from a role, or the whole role",
		ArgsUsage: "ROLE [PERM...]",
		UsageText: "felix admin rbac policy remove ROLE [PERM...] [--tenant T]",
		Description: "Without PERM deletes ROLE; otherwise removes each PERM from it (and deletes it when\n" +
			"nothing is left). Principals holding the role have their tokens revoked. Example:\n\n" +
			"   felix admin rbac policy remove writer 'stream.publish:stream:acme/prod/*'",
		Flags: clientFlags(),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, -1); err != nil {
				return err
			}
			role, drop := c.Args().First(), splitPerms(c.Args().Tail())
			return withAdmin(c, func(a *AdminClient, s Settings, p printer) error {
				if len(drop) == 0 {
					if err := a.DeletePolicy(c.Context, s.Tenant, role); err != nil {
						return withHint(err, "not_found", "see the roles with felix admin rbac policy list")
					}
					return p.Line("deleted role %s of tenant %s", role, s.Tenant)
				}
				perms, ok, err := rolePerms(c.Context, a, s.Tenant, role)
				if err != nil {
					return err
				}
				if !ok {
					return exitError(&APIError{Status: 404, Code: "not_found", Message: "role " + role + " does not exist"})
				}
				perms = slices.DeleteFunc(perms, func(x string) bool { return slices.Contains(drop, x) })
				if len(perms) == 0 {
					if err := a.DeletePolicy(c.Context, s.Tenant, role); err != nil {
						return err
					}
					return p.Line("deleted role %s of tenant %s (no permissions left)", role, s.Tenant)
				}
				pol, err := a.PutPolicy(c.Context, s.Tenant, role, perms)
				if err != nil {
					return err
				}
				return printPolicy(p, pol)
			})
		},
	})
}

func policyListCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:        "list",
		Aliases:     []string{"ls"},
		Usage:       "list the tenant's roles",
		ArgsUsage:   " ",
		UsageText:   "felix admin rbac policy list [--tenant T] [-o json]",
		Description: "Lists each role and its permissions. Example:\n\n   felix admin rbac policy list -o json",
		Flags:       clientFlags(),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 0); err != nil {
				return err
			}
			return withAdmin(c, func(a *AdminClient, s Settings, p printer) error {
				pols, err := a.Policies(c.Context, s.Tenant)
				if err != nil {
					return err
				}
				if p.json {
					return p.JSON(nonNilSlice(pols))
				}
				rows := make([][]string, 0, len(pols))
				for _, pol := range pols {
					rows = append(rows, []string{pol.Role, strings.Join(pol.Permissions, ",")})
				}
				return p.Table([]string{"ROLE", "PERMISSIONS"}, rows)
			})
		},
	})
}

func roleCommand() *cli.Command {
	return group(&cli.Command{
		Name:        "role",
		Usage:       "give principals roles, take them away, list who holds what",
		UsageText:   "felix admin rbac role assign PRINCIPAL ROLE\nfelix admin rbac role unassign PRINCIPAL ROLE|--all\nfelix admin rbac role list [--principal P]",
		Description: "Edits the tenant's role assignments. Example:\n\n   felix admin rbac role assign alice reader",
		Subcommands: []*cli.Command{roleAssignCommand(), roleUnassignCommand(), roleListCommand()},
	})
}

func roleAssignCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:        "assign",
		Usage:       "give a principal a role",
		ArgsUsage:   "PRINCIPAL ROLE",
		UsageText:   "felix admin rbac role assign PRINCIPAL ROLE [--tenant T]",
		Description: "PRINCIPAL is the value of the tenant's principal claim (sub by default). Example:\n\n   felix admin rbac role assign alice reader",
		Flags:       clientFlags(),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 2, 2); err != nil {
				return err
			}
			principal, role := c.Args().Get(0), c.Args().Get(1)
			return withAdmin(c, func(a *AdminClient, s Settings, p printer) error {
				as, err := a.Assign(c.Context, s.Tenant, principal, role)
				if err != nil {
					return withHint(err, "not_found", "create the role first with felix admin rbac policy add "+role+" PERM")
				}
				if p.json {
					return p.JSON(as)
				}
				return p.Line("assigned role %s to %s in tenant %s", role, principal, s.Tenant)
			})
		},
	})
}

func roleUnassignCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:      "unassign",
		Usage:     "take a role (or every role) from a principal and revoke its tokens",
		ArgsUsage: "PRINCIPAL [ROLE]",
		UsageText: "felix admin rbac role unassign PRINCIPAL ROLE|--all [--tenant T]",
		Description: "Brokers end the principal's open streams and subscriptions; tokens exchanged from then\n" +
			"on hold what its remaining roles grant. Example:\n\n   felix admin rbac role unassign alice reader",
		Flags: clientFlags(&cli.BoolFlag{Name: "all", Usage: "take every role of the principal"}),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, 2); err != nil {
				return err
			}
			principal := c.Args().Get(0)
			if c.Bool("all") == (c.NArg() == 2) {
				return usageErrorf(c, "give either ROLE or --all")
			}
			return withAdmin(c, func(a *AdminClient, s Settings, p printer) error {
				if c.Bool("all") {
					if err := a.RemovePrincipal(c.Context, s.Tenant, principal); err != nil {
						return err
					}
					return p.Line("took every role from %s in tenant %s and revoked its tokens", principal, s.Tenant)
				}
				role := c.Args().Get(1)
				if err := a.Unassign(c.Context, s.Tenant, principal, role); err != nil {
					return withHint(err, "not_found", "see the assignments with felix admin rbac role list --principal "+principal)
				}
				return p.Line("took role %s from %s in tenant %s and revoked its tokens", role, principal, s.Tenant)
			})
		},
	})
}

func roleListCommand() *cli.Command {
	return leaf(&cli.Command{
		Name:        "list",
		Aliases:     []string{"ls"},
		Usage:       "list role assignments",
		ArgsUsage:   " ",
		UsageText:   "felix admin rbac role list [--principal P] [--tenant T] [-o json]",
		Description: "Lists who holds which role. Example:\n\n   felix admin rbac role list --principal alice",
		Flags:       clientFlags(&cli.StringFlag{Name: "principal", Usage: "only this `PRINCIPAL`'s roles"}),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 0); err != nil {
				return err
			}
			return withAdmin(c, func(a *AdminClient, s Settings, p printer) error {
				as, err := a.Assignments(c.Context, s.Tenant, c.String("principal"))
				if err != nil {
					return err
				}
				if p.json {
					return p.JSON(nonNilSlice(as))
				}
				rows := make([][]string, 0, len(as))
				for _, x := range as {
					rows = append(rows, []string{x.Principal, x.Role})
				}
				return p.Table([]string{"PRINCIPAL", "ROLE"}, rows)
			})
		},
	})
}

// rolePerms reads one role's permissions.
func rolePerms(ctx context.Context, a *AdminClient, tenant, role string) ([]string, bool, error) {
	pols, err := a.Policies(ctx, tenant)
	if err != nil {
		return nil, false, err
	}
	for _, p := range pols {
		if p.Role == role {
			return p.Permissions, true, nil
		}
	}
	return nil, false, nil
}

func printPolicy(p printer, pol Policy) error {
	if p.json {
		return p.JSON(pol)
	}
	return p.Line("role %s of tenant %s: %s", pol.Role, pol.Tenant, strings.Join(pol.Permissions, ","))
}

func nonNilSlice[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}
