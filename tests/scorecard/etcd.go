package scorecard

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// PutKey writes key through the cluster's client endpoint (status.clientEndpoint, reachable from the
// scorecard's pod) and returns the revision of the write. With TLS, tlsConfig carries the cluster's client
// certificate (the Secret status.tls.clientSecretName names).
func PutKey(ctx context.Context, endpoint string, tlsConfig *tls.Config, key, value string) (int64, error) {
	if endpoint == "" {
		return 0, fmt.Errorf("the cluster reports no status.clientEndpoint")
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		TLS:         tlsConfig,
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return 0, err
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := cli.Put(ctx, key, value)
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}
