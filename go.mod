module github.com/felixmq/felix

go 1.26.0

require (
	github.com/VictoriaMetrics/metrics v1.45.0
	github.com/anishathalye/porcupine v1.3.1
	github.com/go-jose/go-jose/v4 v4.1.9
	github.com/prometheus/client_model v0.6.2
	github.com/prometheus/common v0.66.1
	github.com/quic-go/quic-go v0.65.0
	github.com/urfave/cli/v2 v2.27.7
	go.etcd.io/bbolt v1.5.0
	go.etcd.io/raft/v3 v3.7.0
	golang.org/x/sync v0.25.0
	golang.org/x/sys v0.47.0
	google.golang.org/protobuf v1.36.11
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/cpuguy83/go-md2man/v2 v2.0.7 // indirect
	github.com/kr/pretty v0.3.1 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/russross/blackfriday/v2 v2.1.0 // indirect
	github.com/valyala/fastrand v1.1.0 // indirect
	github.com/valyala/histogram v1.2.0 // indirect
	github.com/xrash/smetrics v0.0.0-20240521201337-686a1a2994c1 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/crypto v0.54.0 // indirect
	golang.org/x/net v0.56.0 // indirect
)
