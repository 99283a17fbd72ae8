package controlplane

import "strconv"

// EnvDefaultReplicationFactor names the replication factor a stream
// created without one gets (1 to 7; 1 when unset). `felix dev` sets it to
// min(3, nodes) for its nodes.
const EnvDefaultReplicationFactor = "FELIX_DEFAULT_REPLICATION_FACTOR"

// DefaultReplicationFactorFromEnv reads FELIX_DEFAULT_REPLICATION_FACTOR
// for Config.DefaultReplicationFactor: 1 when unset, an error naming the
// variable when it is not a whole number in 1..7.
func DefaultReplicationFactorFromEnv(env func(string) string) (uint32, error) {
	raw := env(EnvDefaultReplicationFactor)
	if raw == "" {
		return 1, nil
	}
	n, err := strconv.ParseUint(raw, 10, 32)
	if err != nil || n < 1 || n > maxReplication {
		var p problems
		p.add(EnvDefaultReplicationFactor, "%q is not a replication factor (1 to %d)", raw, maxReplication)
		return 1, p.err()
	}
	return uint32(n), nil
}
