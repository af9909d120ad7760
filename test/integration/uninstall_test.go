package integration

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// The removal page's command for a Service left with the CCM's finalizer
// and no CCM (deleted, waiting for its finalizers) removes that finalizer
// and no other controller's.
func TestUninstallRemovesOnlyTheCCMsFinalizer(t *testing.T) {
	const ns = "uninstall"
	ctx := context.Background()
	createNamespace(t, ns)
	const theirs, ours = "example.com/keep", "service.kubernetes.io/load-balancer-cleanup"
	createLBService(t, ns, "left", func(svc *v1.Service) { svc.Finalizers = []string{theirs, ours} })
	t.Cleanup(func() {
		// The test's own finalizer goes with the test.
		suite.Cluster.Admin.CoreV1().Services(ns).Patch(ctx, "left", "application/json-patch+json", []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
	})
	// Deleted while no CCM runs, it waits for its finalizers.
	if err := suite.Cluster.Admin.CoreV1().Services(ns).Delete(ctx, "left", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	block, err := framework.MarkdownBlock("docs/operations/uninstall.md", "A Service left with the finalizer", "sh")
	if err != nil {
		t.Fatal(err)
	}
	const names = "namespace=default name=web\n"
	if !strings.HasPrefix(block.Text, names) {
		t.Fatalf("the page's block does not start with %q", names)
	}
	framework.RunDocShell(t, suite.Cluster, t.TempDir(), filepath.Dir(suite.Binary), "namespace="+ns+" name=left\n"+strings.TrimPrefix(block.Text, names))
	svc, err := suite.Cluster.Admin.CoreV1().Services(ns).Get(ctx, "left", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(svc.Finalizers, []string{theirs}) {
		t.Errorf("after the page's command the Service has finalizers %v, want only %s's", svc.Finalizers, theirs)
	}
}
