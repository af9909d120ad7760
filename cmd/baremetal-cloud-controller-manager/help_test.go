package main

import (
	"bytes"
	"strings"
	"testing"
)

// Each command's --help says what it takes: the root lists the
// subcommands, a subcommand its own flags and not the controller
// manager's, which it rejects.
func TestHelpSaysWhatEachCommandTakes(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		want, not []string
	}{
		{[]string{"--help"}, []string{"Usage:\n  baremetal-cloud-controller-manager [flags]", "Commands:", "validate", "convert-metallb", "--leader-elect", "--cloud-config", "The route controller needs it whenever the cloud config has a routes: section"},
			[]string{"Only used when --allocate-node-cidrs=true", "completion"}},
		{[]string{"validate", "--help"}, []string{"validate parses", "Usage:\n  baremetal-cloud-controller-manager validate --cloud-config FILE", "--cloud-config", "--cluster-cidr", "--service-cluster-ip-range"},
			[]string{"--leader-elect", "--kubeconfig", "--concurrent-service-syncs"}},
		{[]string{"convert-metallb", "--help"}, []string{"convert-metallb reads", "-f, --filename", "-o, --output", "--l2-interface"},
			[]string{"--leader-elect", "--kubeconfig", "--cloud-provider"}},
	} {
		cmd := newCommand(make(chan struct{}))
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(tc.args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		help := out.String()
		for _, w := range tc.want {
			if !strings.Contains(help, w) {
				t.Errorf("%v does not show %q:\n%s", tc.args, w, help)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(help, n) {
				t.Errorf("%v lists %s, which the command does not take", tc.args, n)
			}
		}
	}
}
