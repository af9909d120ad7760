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
	}{
		{name: "valid", text: good},
		{name: "valid beside the site's CIDRs", text: good, args: []string{"--cluster-cidr", "10.244.0.0/16,fd00:10:244::/56", "--service-cluster-ip-range", "10.96.0.0/12"}},
		{name: "every field error, each on its line",
			text: "loadBalancer:\n  pools:\n  - name: a\n    addresses: [10.0.0.300]\n  - name: a\n    addresses: [10.0.1.0/24]\nbgp: {localASN: 64512, peers: [{address: 10.0.0.1, asn: 64500, holdTime: 1s}]}\n",
			want: []string{`loadBalancer.pools[0].addresses[0]: "10.0.0.300"`, `loadBalancer.pools[1].name: "a" is already used by another pool`, "bgp.peers[0].holdTime"}},
		{name: "an unknown field", text: good + "bgpp: {}\n", want: []string{"bgpp"}},
		{name: "a pool in the pod network", text: good, args: []string{"--cluster-cidr", "10.0.0.0/16"},
			want: []string{`loadBalancer.pools[0].addresses[0]: "10.0.100.0/24" overlaps the pod CIDR 10.0.0.0/16 (--cluster-cidr)`}},
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
