package bmc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework/redfish"
)

func standIn(t *testing.T) (*redfish.Server, Target) {
	t.Helper()
	s, err := redfish.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, Target{Machine: "m1", Protocol: Redfish, Address: s.URL, CAFile: s.CAFile,
		Credentials: func() (string, string, error) { return s.Username, s.Password, nil }}
}

// askOnce opens a session, asks and logs out, as a background question does.
func askOnce(t *testing.T, target Target, timeout time.Duration) (PowerState, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	state, conn, err := question(ctx, Dial, target, nil)
	if conn != nil {
		conn.Close()
	}
	return state, err
}

// TestRedfishAnswers: each answer a BMC gives, right or wrong, and what
// the CCM makes of it. Only a clear "Off" is off; every wrong answer is
// Unknown, with a reason that says what was wrong, within the timeout.
func TestRedfishAnswers(t *testing.T) {
	tests := []struct {
		name    string
		power   string
		fault   redfish.Fault
		systems []string
		target  func(Target) Target
		want    PowerState
		err     string
	}{
		{name: "on", power: "On", want: On},
		{name: "off", power: "Off", want: Off},
		{name: "powering off is not off yet", power: "PoweringOff", want: On},
		{name: "powering on", power: "PoweringOn", want: On},
		{name: "paused", power: "Paused", want: On},
		{name: "a value not in the schema", power: "off", want: Unknown, err: `PowerState "off" is not one of On, Off`},
		{name: "no PowerState", power: "Off", fault: redfish.NoPowerState, want: Unknown, err: "has no PowerState"},
		{name: "login refused", power: "Off", fault: redfish.Unauthorized, want: Unknown, err: "Redfish login: answered 401"},
		{name: "wrong password", power: "Off", target: func(t Target) Target {
			t.Credentials = func() (string, string, error) { return "admin", "wrong", nil }
			return t
		}, want: Unknown, err: "Redfish login: answered 401"},
		{name: "server error", power: "Off", fault: redfish.ServerError, want: Unknown, err: "answered 500"},
		{name: "truncated JSON", power: "Off", fault: redfish.Truncated, want: Unknown, err: "is not the resource's JSON"},
		{name: "redirect elsewhere", power: "Off", fault: redfish.Redirect, want: Unknown, err: "answered 302 Found (redirected to https://127.0.0.1:1/redfish/v1/Systems"},
		{name: "more than a megabyte", power: "Off", fault: redfish.Huge, want: Unknown, err: "longer than 1048576 bytes"},
		{name: "an HTML page", power: "Off", fault: redfish.HTML, want: Unknown, err: `the answer is "text/html", not application/json`},
		{name: "slow", power: "Off", fault: redfish.Slow, want: Unknown, err: "context deadline exceeded"},
		{name: "two systems and none named", power: "Off", systems: []string{"1", "2"}, want: Unknown, err: "has 2 members: name the machine's with bmc.systemID"},
		{name: "two systems, one named", power: "Off", systems: []string{"1", "2"}, target: func(t Target) Target { t.SystemID = "2"; return t }, want: Off},
		{name: "a system named that is not there", power: "Off", target: func(t Target) Target { t.SystemID = "7"; return t }, want: Unknown, err: "answered 404"},
		{name: "certificate not trusted", power: "Off", target: func(t Target) Target { t.CAFile = ""; return t }, want: Unknown, err: "certificate"},
		{name: "verification skipped when said", power: "Off", target: func(t Target) Target { t.CAFile = ""; t.InsecureSkipVerify = true; return t }, want: Off},
		{name: "credentials unreadable", power: "Off", target: func(t Target) Target {
			t.Credentials = func() (string, string, error) { return "", "", context.Canceled }
			return t
		}, want: Unknown, err: "reading the BMC's credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, target := standIn(t)
			s.SetPower(tt.power)
			if tt.systems != nil {
				s.SetSystems(tt.systems...)
			}
			s.SetFault(tt.fault)
			if tt.target != nil {
				target = tt.target(target)
			}
			start := time.Now()
			got, err := askOnce(t, target, 500*time.Millisecond)
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("took %s for a 500ms question", took)
			}
			if got != tt.want {
				t.Errorf("state %q (%v), want %q", got, err, tt.want)
			}
			if tt.err == "" && err != nil {
				t.Errorf("error %v", err)
			}
			if tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("error %v, want one that says %q", err, tt.err)
			}
		})
	}
}

// TestRedfishSessionReused: a kept session asks without logging in again,
// logs in again once when the BMC ended it, and logs out at Close.
func TestRedfishSessionReused(t *testing.T) {
	s, target := standIn(t)
	ctx := context.Background()
	conn, err := Dial(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if st, err := conn.Power(ctx); st != On || err != nil {
			t.Fatalf("power %q %v", st, err)
		}
	}
	if logins, _, _, _ := s.Counts(); logins != 1 {
		t.Errorf("%d logins for three questions on one session", logins)
	}
	s.ExpireSessions()
	s.SetPower("Off")
	if st, err := conn.Power(ctx); st != Off || err != nil {
		t.Fatalf("after the session expired: %q %v", st, err)
	}
	if logins, _, _, _ := s.Counts(); logins != 2 {
		t.Errorf("%d logins after the session expired, want 2", logins)
	}
	conn.Close()
	if _, logouts, _, open := s.Counts(); logouts != 1 || open != 0 {
		t.Errorf("after Close: %d logouts, %d sessions open", logouts, open)
	}
}
