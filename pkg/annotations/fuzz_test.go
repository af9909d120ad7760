package annotations

import (
	"strings"
	"testing"
)

// The annotation parsers read what any user may write on a Service: no
// input may panic them, and every rejection names the annotation.
func FuzzAnnotations(f *testing.F) {
	for _, s := range []string{"192.0.2.1", "192.0.2.1,2001:db8::1", "192.0.2.1,192.0.2.2", " , ", "fe80::1%eth0", "public", "Bad_Pool", "key with space", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		check := func(annotation string, err error) {
			if err != nil && !strings.Contains(err.Error(), annotation) {
				t.Fatalf("the error for %q does not name %s: %v", v, annotation, err)
			}
		}
		ips, err := ParseLoadBalancerIPs(LoadBalancerIPs, v)
		check(LoadBalancerIPs, err)
		if err == nil && (len(ips) == 0 || len(ips) > 2) {
			t.Fatalf("%q gave %v: one address per family at most", v, ips)
		}
		_, err = ParsePoolName(AddressPool, v)
		check(AddressPool, err)
		_, err = ParseSharingKey(SharingKey, v)
		check(SharingKey, err)
	})
}
