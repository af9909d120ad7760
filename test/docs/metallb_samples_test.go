package docs

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/metallb"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// TestMetalLBsOwnSamplesConvert converts each of MetalLB's own documented
// examples (configsamples/ of the MetalLB that hack/metallb pins, read
// from the module cache): each converts to a config that validates, or is
// refused naming the resource and the field. Most are fragments of one
// site (an advertisement naming a pool of another sample): those are
// refused for what the dump lacks, as a user's incomplete dump would be.
func TestMetalLBsOwnSamplesConvert(t *testing.T) {
	dir, err := framework.MetalLBModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	// The fields refused in each sample; none: it converts.
	want := map[string][]string{
		"bgpadv_selectspool_by_label.yaml":            {""},
		"bgpadv_selectspool_by_list.yaml":             {"spec.peers", "spec.ipAddressPools", ""},
		"bgpadvertisement_communities_localpref.yaml": {"spec.ipAddressPools", ""},
		"bgpadvertisement_community_alias.yaml":       {"spec.ipAddressPools", ""},
		"bgpadvertisement_with_node_selector.yaml":    {"spec.nodeSelectors", "spec.ipAddressPools", ""},
		"bgppeer_simple.yaml":                         nil,
		"bgppeer_with_bfdprofile.yaml":                nil,
		"bgppeer_with_session_options.yaml":           nil,
		"bgppeer_with_vrf.yaml":                       {"spec.vrf"},
		"bgppeer_withsecret.yaml":                     nil,
		"deployment_bgp.yaml":                         nil,
		"deployment_l2.yaml":                          nil,
		"ipaddresspool_simple.yaml":                   nil,
		"ipaddresspool_with_selector.yaml":            nil,
		"l2adv_selects_pools_by_list.yaml":            {"spec.ipAddressPools"},
		"l2adv_with_node_selector.yaml":               {"spec.nodeSelectors"},
		"simple_pool_adv_bgp.yaml":                    {""},
		"simple_pool_adv_l2.yaml":                     nil,
	}
	files, err := filepath.Glob(filepath.Join(dir, "configsamples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples in %s: %v", dir, err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		fields, known := want[name]
		if !known {
			t.Errorf("%s: a sample this test does not know: add what it should convert to", name)
			continue
		}
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		res, err := metallb.Convert(text, metallb.Options{L2Interface: "eth1"})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var got []string
		for _, r := range res.Refused {
			if r.Object == "" {
				t.Errorf("%s: a refusal names no resource: %s", name, r)
			}
			got = append(got, r.Field)
		}
		if !slices.Equal(got, fields) {
			t.Errorf("%s: refused fields %q, want %q (%v)", name, got, fields, res.Refused)
		}
		if len(fields) == 0 && res.Config == nil {
			t.Errorf("%s: converted to nothing", name)
		}
	}
}
