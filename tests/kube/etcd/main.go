// Command etcd is etcd's own server main (go.etcd.io/etcd/server/v3/etcdmain) built inside the
// test bed's module, so that its version is the one k8s.io/kubernetes pins (see ../go.mod).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
