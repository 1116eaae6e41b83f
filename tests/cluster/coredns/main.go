// The cluster DNS of scripts/conformance.sh --conformance: CoreDNS of the pinned module
// with only the plugins its Corefile (scripts/cluster/coredns-up.sh, kubeadm's) uses,
// so the build does not pull every cloud provider's SDK.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// The order a query passes the plugins in, as CoreDNS's own plugin.cfg orders them.
var directives = []string{
	"reload", "ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes", "forward",
}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
