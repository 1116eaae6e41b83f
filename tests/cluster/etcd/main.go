// The etcd server of the release Kubernetes pins (go.etcd.io/etcd/server/v3, the version
// of k8s.io/kubernetes' etcd client), built by scripts/cluster/build-control-plane.sh for
// the control plane of the cluster tests. Debian bookworm's etcd-server is 3.4.23; the
// API server of this release requests watch progress from etcd only from 3.4.31 and
// 3.5.13 on, and without it a watch cache that sees no event of its resource cannot catch
// up with a list's newer resource version: a watch from there ends with "Too large
// resource version" after 3 s, which the busy conformance runs hit.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
