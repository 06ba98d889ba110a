package etcdtest

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Fill puts values of valueSize bytes under prefix until they add up to at least total bytes, and returns
// how many it put: the large database that backup and restore benchmarks start from. The values are
// distinct per key (a repeated byte pattern shifted by the key's number), not that it matters to etcd,
// which stores them uncompressed.
func Fill(ctx context.Context, cli *clientv3.Client, prefix string, total int64, valueSize int) (int, error) {
	value := make([]byte, valueSize)
	n := 0
	for written := int64(0); written < total; written += int64(valueSize) {
		for i := range value {
			value[i] = byte('a' + (i+n)%26)
		}
		if _, err := cli.Put(ctx, fmt.Sprintf("%s%06d", prefix, n), string(value)); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
