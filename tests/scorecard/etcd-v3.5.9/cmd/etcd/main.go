// Command etcd is the etcd server (go.etcd.io/etcd/server/v3 has no main package of its own).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
