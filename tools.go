//go:build tools

package tools

import (
	_ "github.com/VictoriaMetrics/metrics"
	_ "github.com/go-jose/go-jose/v4"
	_ "github.com/go-jose/go-jose/v4/jwt"
	_ "github.com/quic-go/quic-go"
	_ "github.com/urfave/cli/v2"
	_ "go.etcd.io/bbolt"
	_ "golang.org/x/sync/semaphore"
	_ "golang.org/x/sync/errgroup"
	_ "gopkg.in/yaml.v3"
)

