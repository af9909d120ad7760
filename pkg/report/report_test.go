package report

import (
	"strings"
	"testing"
)

// The one mechanism behind "said once": a problem is said when it starts
// or its message changes, forgotten when it ends, and said again if it
// comes back; a Service hears nothing while Quiet.
func TestReportSaysOnceWhileItLasts(t *testing.T) {
	var said []string
	quiet := false
	r := &Reporter{
		Events: func(o Object, _, reason, msg string) { said = append(said, o.String()+" "+reason+": "+msg) },
		Quiet:  func(o Object) bool { return quiet && o.Kind == "Service" },
	}
	stranded := Problem{Reason: "VIPNotAnnounced", Object: Service("ns", "web"), Subject: "10.1.0.1", Log: "x", Message: "not announced"}
	other := Problem{Reason: "NodeAddressNotUsable", Object: Node("a"), Log: "y", Message: "loopback"}
	for _, tc := range []struct {
		name string
		now  []Problem
		want []string
	}{
		{"first seen", []Problem{stranded, other}, []string{"Service ns/web VIPNotAnnounced: not announced", "Node a NodeAddressNotUsable: loopback"}},
		{"still there", []Problem{stranded, other}, nil},
		{"a duplicate in one report", []Problem{stranded, stranded, other}, nil},
		{"the message changed", []Problem{stranded, {Reason: other.Reason, Object: other.Object, Log: "y", Message: "multicast"}}, []string{"Node a NodeAddressNotUsable: multicast"}},
		{"gone", nil, nil},
		{"back", []Problem{stranded}, []string{"Service ns/web VIPNotAnnounced: not announced"}},
	} {
		said = nil
		r.Report("scope", tc.now, nil)
		if strings.Join(said, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s: said %q, want %q", tc.name, said, tc.want)
		}
	}
	// Scopes do not clear each other.
	r.Report("other", nil, nil)
	if len(r.Said("scope")) != 1 {
		t.Errorf("another scope's report cleared this one: %v", r.Said("scope"))
	}
	// A standby records what it would say, and says nothing on Services.
	r.Report("scope", nil, nil)
	quiet, said = true, nil
	r.Report("scope", []Problem{stranded, other}, nil)
	if len(said) != 1 || !strings.HasPrefix(said[0], "Node a") {
		t.Errorf("quiet: said %q, want the Node's only", said)
	}
}
