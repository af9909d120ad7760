package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	const good = "loadBalancer:\n  pools:\n  - name: a\n    addresses: [10.0.100.0/24]\nbgp: {localASN: 64512, peers: [{address: 10.0.0.1, asn: 64500}]}\n"
	cases := []struct {
		name, text string
		args       []string
		want       []string // lines of stderr; none: valid
		warnings   []string // lines of stderr of a valid file
	}{
		{name: "valid", text: good},
		{name: "valid beside the site's CIDRs", text: good, args: []string{"--cluster-cidr", "10.244.0.0/16,fd00:10:244::/56", "--service-cluster-ip-range", "10.96.0.0/12"}},
		{name: "every field error, each on its line",
			text: "loadBalancer:\n  pools:\n  - name: a\n    addresses: [10.0.0.300]\n  - name: a\n    addresses: [10.0.1.0/24]\nbgp: {localASN: 64512, peers: [{address: 10.0.0.1, asn: 64500, holdTime: 1s}]}\n",
			want: []string{`loadBalancer.pools[0].addresses[0] (line 4): "10.0.0.300"`, `loadBalancer.pools[1].name (line 5): "a" is already used by another pool`, "bgp.peers[0].holdTime (line 7): "}},
		{name: "an unknown field", text: good + "bgpp: {}\n", want: []string{"bgpp"}},
		{name: "a pool in the pod network", text: good, args: []string{"--cluster-cidr", "10.0.0.0/16"},
			want: []string{`loadBalancer.pools[0].addresses[0] (line 4): "10.0.100.0/24" overlaps the pod CIDR 10.0.0.0/16 (--cluster-cidr)`}},
		{name: "an IPv6 pool and only an IPv4 peer", text: strings.Replace(strings.Replace(good, "[10.0.100.0/24]", "[10.0.100.0/24, \"2001:db8::/124\"]", 1), "asn: 64500", "asn: 64500, addressFamilies: [ipv4-unicast]", 1),
			want: []string{`loadBalancer.pools[0].addresses[1] (line 4): "2001:db8::/124" is announced over BGP, but no peer in bgp.peers takes ipv6-unicast`}},
		{name: "a peer inside a pool", text: strings.Replace(good, "address: 10.0.0.1", "address: 10.0.100.1", 1),
			want: []string{`bgp.peers[0].address (line 5): "10.0.100.1" is in pool "a"`}},
		{name: "a password file that is not here", text: strings.Replace(good, "asn: 64500", "asn: 64500, passwordFile: /etc/baremetal/bgp/nowhere", 1)},
		{name: "a selector that matches no machine: a warning", text: strings.Replace(good, "asn: 64500", "asn: 64500, nodeSelector: {matchLabels: {rack: rakc1}}", 1),
			warnings: []string{`warning: bgp.peers[0].nodeSelector (line 5): matches no machine of the inventory (rack=rakc1)`}},
		{name: "a BMC credential file that is not here: a warning", text: "inventory:\n  machines:\n  - name: a\n    bmc: {protocol: ipmi, address: 10.0.0.21, usernameFile: /etc/baremetal-bmc/a-user, passwordFile: /etc/baremetal-bmc/a-password}\n" + good,
			warnings: []string{
				"warning: inventory.machines[0].bmc.usernameFile (line 4): /etc/baremetal-bmc/a-user does not exist here; the CCM refuses the config unless it exists where it runs",
				"warning: inventory.machines[0].bmc.passwordFile (line 4): /etc/baremetal-bmc/a-password does not exist here"}},
		{name: "a flag that is no CIDR", text: good, args: []string{"--service-cluster-ip-range", "10.96.0.0"},
			want: []string{`--service-cluster-ip-range: "10.96.0.0" is not a CIDR`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cloud.yaml")
			if err := os.WriteFile(path, []byte(c.text), 0o600); err != nil {
				t.Fatal(err)
			}
			// The flags as the command parses them; the rest as it runs.
			cmd := validateCommand()
			if err := cmd.ParseFlags(append([]string{"--cloud-config", path}, c.args...)); err != nil {
				t.Fatal(err)
			}
			flag := func(name string) []string {
				v, _ := cmd.Flags().GetStringSlice(name)
				return v
			}
			var stdout, stderr bytes.Buffer
			err := validate(&stdout, &stderr, cmd.Flag("cloud-config").Value.String(), flag("cluster-cidr"), flag("service-cluster-ip-range"))
			if len(c.want) == 0 {
				if err != nil || stdout.String() != path+": valid\n" {
					t.Fatalf("want valid, got %v; stdout %q, stderr %q", err, stdout.String(), stderr.String())
				}
				for _, w := range c.warnings {
					if !strings.Contains(stderr.String(), path+": "+w) {
						t.Errorf("stderr %q does not warn %q", stderr.String(), w)
					}
				}
				if len(c.warnings) == 0 && stderr.Len() > 0 {
					t.Errorf("a valid file, and stderr says %q", stderr.String())
				}
				return
			}
			if err == nil {
				t.Fatalf("want exit 1 for %q, got success: %s", c.want, stdout.String())
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			for _, w := range c.want {
				found := false
				for _, l := range lines {
					found = found || (strings.HasPrefix(l, path+": ") && strings.Contains(l, w))
				}
				if !found {
					t.Errorf("no line of stderr names %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}
