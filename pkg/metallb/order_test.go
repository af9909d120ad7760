package metallb

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/ipam"
)

// poolDump is an IPAddressPool of one address per name (so that a pool
// can be full), with spec fields extra.
func poolDump(name, addr, extra string) string {
	return fmt.Sprintf("\n- apiVersion: metallb.io/v1beta1\n  kind: IPAddressPool\n  metadata: {name: %s, namespace: metallb-system}\n  spec: {addresses: [%s/32]%s}\n", name, addr, extra)
}

// After conversion a Service gets an address of the pool MetalLB would
// give it (its allocator's pinnedPoolsForService and Allocate): first the
// pools whose serviceAllocation selects it (by namespace or Service
// labels), by priority (lowest first, none last), then the pools without
// a serviceAllocation; a pool with a serviceAllocation that selects
// nothing (a priority alone) is never given automatically. Ties, which
// MetalLB leaves to map order, go by name.
func TestConvertedPoolsAreTriedInMetalLBsOrder(t *testing.T) {
	pools := []string{
		poolDump("aaa-general", "192.0.2.1", ""),
		poolDump("zzz-general", "192.0.2.2", ""),
		poolDump("team-pinned", "192.0.2.3", ", serviceAllocation: {namespaces: [team]}"),
		poolDump("team-first", "192.0.2.4", ", serviceAllocation: {priority: 1, namespaces: [team]}"),
		poolDump("team-second", "192.0.2.5", ", serviceAllocation: {priority: 2, namespaces: [team]}"),
		poolDump("web-labelled", "192.0.2.6", ", serviceAllocation: {serviceSelectors: [{matchLabels: {tier: web}}]}"),
		poolDump("priority-only", "192.0.2.7", ", serviceAllocation: {priority: 1}"),
	}
	res, err := Convert([]byte(list(append(pools, ad(""), peerCR)...)), Options{})
	if err != nil || len(res.Refused) > 0 {
		t.Fatalf("%v %v", err, res.Refused)
	}
	cfg, err := config.Parse(res.Config)
	if err != nil {
		t.Fatalf("the converted config: %v\n%s", err, res.Config)
	}
	alloc := ipam.New(cfg.LoadBalancer.Pools)
	// Services in order; each takes its pool's only address, so the next
	// one of the kind shows the next pool in MetalLB's order.
	for i, tc := range []struct {
		namespace string
		labels    map[string]string
		want      string
	}{
		{"team", nil, "team-first"},
		{"team", nil, "team-second"},
		{"team", nil, "team-pinned"},
		{"team", nil, "aaa-general"},
		{"other", map[string]string{"tier": "web"}, "web-labelled"},
		{"other", nil, "zzz-general"},
		{"other", nil, ""}, // priority-only is never given automatically
	} {
		req := ipam.Request{Service: fmt.Sprintf("%s/svc-%d", tc.namespace, i), Namespace: tc.namespace, Labels: tc.labels, Families: []ipam.Family{ipam.IPv4}}
		got, err := alloc.Allocate(req)
		pool := ""
		if err == nil {
			pool = alloc.PoolOf(got[0])
		}
		if pool != tc.want {
			t.Errorf("Service %d of namespace %s (labels %v): pool %q (%v), want %q as MetalLB would", i, tc.namespace, tc.labels, pool, err, tc.want)
		}
	}
	if !strings.Contains(strings.Join(findings(res.Notes), "\n"), "IPAddressPool metallb-system/priority-only: spec.serviceAllocation") {
		t.Errorf("no note says that priority-only is never given automatically: %v", res.Notes)
	}
}

func findings(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.String())
	}
	return out
}

// The converter says what the sharing rule will be after the move.
func TestConvertSaysTheSharingRule(t *testing.T) {
	res, err := Convert([]byte(list(poolCR, ad(""), peerCR)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(findings(res.Notes), "\n"), "Services: metallb.io/allow-shared-ip: every address Services share when the CCM takes over is kept, across namespaces too") {
		t.Errorf("no note on the sharing rule: %v", findings(res.Notes))
	}
}
