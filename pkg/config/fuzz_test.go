package config

import (
	"os"
	"testing"
)

// FuzzParse feeds the parser and validator arbitrary files: it must never
// panic, and every rejection must say what is wrong.
func FuzzParse(f *testing.F) {
	f.Add([]byte(validConfig))
	if b, err := os.ReadFile("../../deploy/cloud-config.example.yaml"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("inventory:\n  machines:\n  - name: a\n    addresses: [{type: InternalIP, address: 10.0.0.300}]\n"))
	f.Add([]byte("loadBalancer:\n  pools:\n  - {name: p, addresses: [\"192.0.2.9-192.0.2.1\"]}\nbgp: {localASN: 1, routerID: x}\n"))
	f.Add([]byte("&a [*a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("empty error for %q", data)
			}
			return
		}
		// What passed must pass again: defaults are stable.
		if err := cfg.Validate(); err != nil {
			t.Fatalf("a parsed config fails validation: %v\n%q", err, data)
		}
	})
}

func FuzzParseAddressRange(f *testing.F) {
	for _, s := range []string{"192.0.2.0/28", "2001:db8::/120", "192.0.2.1-192.0.2.9", "::ffff:1.2.3.4-1.2.3.5", "1.2.3.4/33"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseAddressRange(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("empty error for %q", s)
			}
			return
		}
		if r.Last.Less(r.First) || r.First.BitLen() != r.Last.BitLen() || !r.Contains(r.First) || !r.Contains(r.Last) {
			t.Fatalf("%q parsed to an inconsistent range %v", s, r)
		}
	})
}
