package config

import (
	"strings"
	"testing"
)

// TestAPIVersion: a config names its version or not; one written for a
// newer release is refused with what this binary does not know.
func TestAPIVersion(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string // empty: valid
	}{
		{"no version", "inventory: {}\n", nil},
		{"this version", "apiVersion: baremetal.cloudprovider.io/v1alpha1\ninventory: {}\n", nil},
		{"a newer version with new fields", "apiVersion: baremetal.cloudprovider.io/v1alpha2\ninventory:\n  machines:\n  - name: a\n    rackUnit: 12\n  fencing: {}\n",
			[]string{`apiVersion: "baremetal.cloudprovider.io/v1alpha2" is newer than this binary reads (baremetal.cloudprovider.io/v1alpha1): the config was written for a newer release (fields it does not know: inventory.machines[0].rackUnit, inventory.fencing)`}},
		{"a newer version with no new field", "apiVersion: baremetal.cloudprovider.io/v2\ninventory: {}\n",
			[]string{`is newer than this binary reads (baremetal.cloudprovider.io/v1alpha1): the config was written for a newer release (no field it does not know)`}},
		{"another kind of file", "apiVersion: v1\nkind: ConfigMap\n", []string{`apiVersion: "v1" is not a version of this provider's cloud config (baremetal.cloudprovider.io/v1alpha1)`}},
		{"a typo under this version is a plain unknown field", "apiVersion: baremetal.cloudprovider.io/v1alpha1\ninventry: {}\n", []string{`inventry: unknown field "inventry"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { parsesAs(t, tt.in, tt.want) })
	}
}

// parsesAs checks that in parses (want empty) or is refused with an error
// that says each of want.
func parsesAs(t *testing.T, in string, want []string) {
	t.Helper()
	_, err := Parse([]byte(in))
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("accepted; want %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}
