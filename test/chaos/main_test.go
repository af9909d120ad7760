// Package chaos is the fault-tolerance suite: the real CCM binary killed,
// failed over, cut off from its API server, fed bad input and peering
// with real BGP daemons that restart, against a real kube-apiserver and
// etcd. Sizes and durations are flags with CI-sized defaults, for example
//
//	go test ./test/chaos -run Storm -args -services=1000 -kills=10
package chaos

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

var (
	services = flag.Int("services", 200, "LoadBalancer Services in the restart storm, the failover and the outage")
	kills    = flag.Int("kills", 10, "times the restart storm kills the CCM")
	churn    = flag.Int("churn", 100, "Services created and deleted while checking that no BGP session resets")
	outage   = flag.Duration("outage", 30*time.Second, "how long the API server is stopped")
)

var suite *framework.Suite

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(framework.RunSuite(m, &suite))
}
