// Package integration tests the real CCM binary against a real
// kube-apiserver and etcd, running as the ServiceAccount of deploy/ with
// only the rights deploy/rbac.yaml gives it.
package integration

import (
	"os"
	"testing"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

var suite *framework.Suite

func TestMain(m *testing.M) { os.Exit(framework.RunSuite(m, &suite)) }
