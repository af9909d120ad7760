package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
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
	convertSamples(t, filepath.Join(dir, "configsamples"), "", metallb.Options{L2Interface: "eth1"}, want)
}

// TestFRRK8sOwnSamplesConvert converts each of FRR-K8s's own examples
// (config/samples of the FRR-K8s MetalLB requires), beside a pool that
// holds the prefixes they advertise: each converts, or is refused naming
// the fields that only the nodes' FRR can serve.
func TestFRRK8sOwnSamplesConvert(t *testing.T) {
	dir, err := framework.FRRK8sModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	const pool = "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: samples, namespace: metallb-system}\nspec: {addresses: [192.168.0.0/15]}\n---\n"
	// The fields refused in each sample; none: it converts. Receiving
	// routes and raw FRR configuration stay with FRR-K8s.
	receive := "spec.bgp.routers[0].neighbors[%d].toReceive"
	nothing := "spec.bgp.routers[0].neighbors[%d].toAdvertise"
	want := map[string][]string{
		"advertise_two_neighs_one_config.yaml":     nil,
		"advertise_two_neighs_two_configs.yaml":    nil,
		"basic.yaml":                               {fmt.Sprintf(receive, 0)},
		"four_neighs_mixed_receive_advertise.yaml": {fmt.Sprintf(receive, 0), fmt.Sprintf(receive, 1), fmt.Sprintf(receive, 2), fmt.Sprintf(receive, 3)},
		"neighbor_with_password.yaml":              nil,
		// Its nodeSelector is no label selector (labelSelector: is no
		// field of one): refused as unknown, where the API server would
		// prune it and select every node.
		"node_selector.yaml":                        {"spec"},
		"raw_config_in_two_parts.yaml":              {"spec.raw.rawConfig", fmt.Sprintf(nothing, 0), fmt.Sprintf(nothing, 1), fmt.Sprintf(nothing, 2), "spec.raw.rawConfig"},
		"two_neighs_receive_all_from_one.yaml":      {fmt.Sprintf(receive, 0), fmt.Sprintf(nothing, 0), fmt.Sprintf(nothing, 1)},
		"two_neighs_receive_some_ips_from_one.yaml": {fmt.Sprintf(receive, 0), fmt.Sprintf(nothing, 0), fmt.Sprintf(nothing, 1)},
		"two_routers_different_vrfs.yaml":           {"spec.bgp.routers[1].vrf", "spec.bgp.routers[1].asn"},
	}
	convertSamples(t, filepath.Join(dir, "config", "samples"), pool, metallb.Options{}, want)
}

// convertSamples converts each sample in dir, after prefix, and checks
// the fields refused in it against want (none: it converts).
func convertSamples(t *testing.T, dir, prefix string, opts metallb.Options, want map[string][]string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples in %s: %v", dir, err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		res, err := metallb.Convert(append([]byte(prefix), text...), opts)
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
		fields, known := want[name]
		if !known {
			t.Errorf("%s: a sample this test does not know: refused %q (%v); add what it should convert to", name, got, res.Refused)
			continue
		}
		if !slices.Equal(got, fields) {
			t.Errorf("%s: refused fields %q, want %q (%v)", name, got, fields, res.Refused)
		}
		if len(fields) == 0 && res.Config == nil {
			t.Errorf("%s: converted to nothing", name)
		}
	}
}

// TestMetalLBv016FRRK8sDumpConverts converts the dump taken from a
// MetalLB v0.16 running in FRR-K8s mode on a leaf-spine site (written by
// test/e2e's TestMetalLBInFRRK8sModeConverts with -update-frrk8s-dump),
// as it came from kubectl: MetalLB's resources, its FRRConfigurations per
// node and the site's own.
func TestMetalLBv016FRRK8sDumpConverts(t *testing.T) {
	dump, err := os.ReadFile(filepath.Join("testdata", "metallb-v0.16-frrk8s-dump.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := metallb.Convert(dump, metallb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Refused) > 0 {
		t.Fatalf("refused: %v", res.Refused)
	}
	generated := 0
	for _, n := range res.Notes {
		if strings.Contains(n.Message, "written by MetalLB for node") {
			generated++
		}
	}
	if generated != 4 {
		t.Errorf("%d of MetalLB's per-node FRRConfigurations recognised, want the 4 nodes': %v", generated, res.Notes)
	}
	cfg, err := config.ParseWithoutSecrets(res.Config)
	if err != nil {
		t.Fatal(err)
	}
	if problems := framework.FRRK8sSiteProblems(cfg); len(problems) > 0 {
		t.Errorf("%s\n%s", strings.Join(problems, "\n"), res.Config)
	}
}
